"""`instemb-rag query` as a user runs it: wall time of the command, cold and warm, beside the
in-process search and the encoder alone, in one run.

    python benchmarks/bench_cli.py [--quick] [--json-out out.json] [--model DIR] [--queries 10]

On an index of the bundled sample documents (built here with the model):
- warm: the resident query process is up (one query before the clock); each of ``--queries``
  queries, each with its own instruction, is one `instemb-rag query` subprocess: p50 and p90. The
  command is the console script's entry (`python -m instemb_rag.cli`: the lean client,
  instemb_rag/cli/entry.py); ``warm_typer_app`` asks the same queries through the typer app
  (INSTEMB_FULL_CLI=1, the path before the lean client), for comparison;
- beside each wall time, the CPU time of the command's own process (user + system, from
  ``getrusage(RUSAGE_CHILDREN)`` around it: the resident process it talks to or starts is not its
  child, so this is the client's own cost, what the warm goal of 0.12 s is about);
- cold: nothing resident, the caches warm on disk (the model's converted weights, MiniLM); the
  query starts the resident process and is answered by it; ``--cold`` runs, each after
  `daemon stop`: p50 and p90; and the same with --no-daemon (everything in the command's process);
- in this process: ``Index.search`` under an instruction against the encoder's query alone
  (``encode_queries``), and, for a composed model (the default), its query against one plain query
  of its LLM with the same text and instruction; medians of interleaved repeats;
- whether the paths (warm, warm through the typer app, --no-daemon, Index.search) give the same
  hits and scores.

The run's INSTEMB_HOME is a scratch folder whose entries link to the user's (caches stay warm,
and a resident process of the user's own is neither used nor stopped). The load average is
recorded: absolute times move with it. ``--smoke``: the tiny random model, 2 queries, 1 cold run.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from bench_common import (
    PROJECT_ROOT,
    apply_threads,
    base_parser,
    emit,
    interleaved_times,
    machine_info,
    median,
    percentile,
    smoke_run,
)

CLI = [sys.executable, "-m", "instemb_rag.cli"]
SAMPLE_DOCS = PROJECT_ROOT / "instemb_rag" / "sample_docs"
# (query, instruction): every instruction distinct, so no answer comes from a cache.
QUERIES = [
    ("Which tent should I buy?", "focus on durability and weather resistance"),
    ("Which tent should I buy?", "focus on packed weight and size"),
    ("What should I cook with on a trip?", "focus on fuel efficiency in cold weather"),
    ("Which backpack is best?", "focus on comfort on long days"),
    ("Which shelter for two people?", "focus on how quickly it is pitched"),
    ("What gear for a winter trip?", "focus on warmth and wind protection"),
    ("Which stove is the lightest?", "focus on weight, ignore price"),
    ("Which backpack for a day hike?", "focus on capacity and pockets"),
    ("Which tent for a rainy week?", "focus on how well it stays dry"),
    ("What is a good budget option?", "focus on value for money"),
    ("Which stove boils fastest?", "focus on boil time"),
    ("Which pack carries heavy loads?", "focus on the frame and the hip belt"),
]


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder (default: the shipped default)")
    parser.add_argument("--queries", type=int, default=10, help="warm queries (distinct instructions)")
    parser.add_argument("--cold", type=int, default=5, help="cold runs of each cold path")
    parser.add_argument("--repeats", type=int, default=20, help="in-process repeats per variant")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.cold, args.repeats = min(args.queries, 10), min(args.cold, 3), min(args.repeats, 10)
    if args.smoke:
        args.queries, args.cold, args.repeats = 2, 1, 2
    user_home = Path(os.environ.get("INSTEMB_HOME") or Path.home() / ".cache" / "instemb-rag")
    with smoke_run(args) as scratch, tempfile.TemporaryDirectory(prefix="bench-cli-") as folder:
        work = Path(folder)
        home = linked_home(user_home if scratch is None else Path(os.environ["INSTEMB_HOME"]), work / "home")
        env = {**os.environ, "INSTEMB_HOME": str(home), "INSTEMB_DAEMON_IDLE": "600"}
        env.pop("INSTEMB_NO_DAEMON", None)
        index_dir = build_index(work / "index", args.model, env)
        try:
            return emit(measure(args, index_dir, env), args.json_out)
        finally:
            subprocess.run([*CLI, "daemon", "stop"], env=env, capture_output=True, timeout=60)


def linked_home(user_home: Path, home: Path) -> Path:
    """A scratch INSTEMB_HOME whose entries link to the user's, but for the resident process's."""
    home.mkdir(parents=True)
    if user_home.is_dir():
        for entry in user_home.iterdir():
            if entry.name != "daemon":
                (home / entry.name).symlink_to(entry.resolve())
    return home


def build_index(index_dir: Path, model: str | None, env: dict) -> Path:
    command = [*CLI, "index", str(SAMPLE_DOCS), "--index-dir", str(index_dir), "--no-progress"]
    if model:
        command += ["--model", model]
    completed = subprocess.run(command, env={**env, "INSTEMB_NO_DAEMON": "1"}, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"indexing the sample documents failed: {completed.stderr.strip()[-500:]}")
    return index_dir


class QueryRun(NamedTuple):
    """One command: its wall seconds, the CPU seconds of its own process, its JSON answer."""

    wall_s: float
    client_cpu_s: float
    answer: dict


def run_query(index_dir: Path, query: tuple[str, str], env: dict, *options: str) -> QueryRun:
    """One `instemb-rag query --json` as a user runs it."""
    command = [*CLI, "query", query[0], "-i", query[1], "--index-dir", str(index_dir), "--json", *options]
    cpu_before = children_cpu_seconds()
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    cpu_seconds = children_cpu_seconds() - cpu_before
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:])} failed: {completed.stderr.strip()[-500:]}")
    if "note:" in completed.stderr and not options:
        raise SystemExit(f"the query did not go through the resident process: {completed.stderr.strip()}")
    return QueryRun(seconds, cpu_seconds, json.loads(completed.stdout))


def children_cpu_seconds() -> float:
    """User + system CPU of this process's finished, waited-for children (and theirs, waited for by
    them): around one subprocess.run, that command's own."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stop_resident(env: dict) -> None:
    subprocess.run([*CLI, "daemon", "stop"], env=env, capture_output=True, timeout=60, check=True)


def summary(runs: list[QueryRun]) -> dict:
    """Wall and client CPU seconds of these runs: p50, p90 and each."""
    samples, cpu = [run.wall_s for run in runs], [run.client_cpu_s for run in runs]
    return {
        "p50_s": round(median(samples), 3),
        "p90_s": round(percentile(samples, 90), 3),
        "runs": len(samples),
        "all_s": [round(s, 3) for s in samples],
        "client_cpu_p50_s": round(median(cpu), 3),
        "client_cpu_p90_s": round(percentile(cpu, 90), 3),
        "client_cpu_all_s": [round(c, 3) for c in cpu],
    }


def measure(args, index_dir: Path, env: dict) -> dict:
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    queries = QUERIES[: args.queries] if args.queries <= len(QUERIES) else QUERIES * (args.queries // len(QUERIES) + 1)
    queries = queries[: args.queries]
    cold_daemon, cold_in_process = [], []
    for run in range(args.cold):
        stop_resident(env)
        cold_daemon.append(run_query(index_dir, queries[run % len(queries)], env))
        cold_in_process.append(run_query(index_dir, queries[run % len(queries)], env, "--no-daemon"))
    run_query(index_dir, ("warm-up", "warm-up instruction"), env)  # the process up, the index open
    warm = [run_query(index_dir, query, env) for query in queries]
    warm_typer_app = [run_query(index_dir, query, {**env, "INSTEMB_FULL_CLI": "1"}) for query in queries]
    in_process = measure_in_process(args, index_dir, queries[0], env)
    no_daemon = run_query(index_dir, queries[0], env, "--no-daemon").answer
    same = identical(warm[0].answer, no_daemon, in_process["hits"]) and identical(
        warm_typer_app[0].answer, no_daemon, in_process["hits"]
    )
    return {
        "smoke": bool(args.smoke),
        "machine": machine_info(args.device),
        "load_average_before": round(load_before, 2) if load_before is not None else None,
        "cores": os.cpu_count(),
        "model": args.model or "default",
        "warm": summary(warm),
        "warm_typer_app": summary(warm_typer_app),
        "cold_resident": summary(cold_daemon),
        "cold_no_daemon": summary(cold_in_process),
        "in_process": {key: value for key, value in in_process.items() if key != "hits"},
        "identical_answers": same,
    }


def measure_in_process(args, index_dir: Path, query: tuple[str, str], env: dict) -> dict:
    """Index.search under an instruction vs the encoder's query alone; a composed model's query vs
    one plain query of its LLM (same text and instruction). Medians of interleaved repeats, ms."""
    os.environ["INSTEMB_HOME"] = env["INSTEMB_HOME"]
    apply_threads(args.threads)
    from instemb_rag.index import Index
    from instemb_rag.queries import Query

    text, instruction = query
    with Index.open(index_dir, model=args.model) as index:
        encoder = index.encoder
        variants = {
            "index_search": lambda: index.search(Query(text, instruction), k=5),
            "encoder_query": lambda: encoder.encode_queries([text], instruction),
        }
        llm = plain_llm_of(encoder)
        if llm is not None:
            variants["plain_llm_query"] = lambda: llm.encode_queries([text], instruction)
        samples = interleaved_times(variants, args.repeats, args.device)
        hits = [hit.to_dict() for hit in index.search(Query(text, instruction), k=5)]
    ms = {name: round(median(times) * 1000, 2) for name, times in samples.items()}
    result = {"median_ms": ms, "search_over_encoder": round(ms["index_search"] / ms["encoder_query"], 3), "hits": hits}
    if "plain_llm_query" in ms:
        result["composed_over_plain_llm"] = round(ms["encoder_query"] / ms["plain_llm_query"], 3)
    return result


def plain_llm_of(encoder):
    """The LLM a composed model's query prefill runs (its query LLM), or None for a model that is
    its LLM."""
    from instemb_rag import InstEmbEncoder

    if isinstance(encoder, InstEmbEncoder):
        return None
    for part in ("query_llm", "documents_llm"):
        candidate = getattr(encoder, part, None)
        if isinstance(candidate, InstEmbEncoder):
            return candidate
    return None


def identical(warm: dict, no_daemon: dict, in_process_hits: list[dict]) -> bool:
    def key(hits: list[dict]) -> list[tuple]:
        return [(hit["source"], hit["position"], round(hit["score"], 5)) for hit in hits]

    return key(warm["hits"][:5]) == key(no_daemon["hits"][:5]) == key(in_process_hits)


if __name__ == "__main__":
    main()
