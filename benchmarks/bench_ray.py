"""Distributed indexing throughput (`index --ray`): 1 vs 2 local Ray encoder workers, next to
the single-process path, and the driver's commit ceiling that bounds N workers.

    python benchmarks/bench_ray.py --limit 96 [--quick] [--model PATH] [--json-out PATH]

Writes the first --limit Vaswani abstracts as files (as bench_index.py does) and indexes them
three times into fresh index folders with the same encoder: in this process (torch's threads),
with a local Ray runtime and one encoder actor (--threads-per-worker x 2 CPUs), and with two
actors (one CPU each). Per run: `end_to_end_chunks_per_s` (everything: Ray start-up and actor
model loading included) is the headline; `startup_s` is the time to the first commit and
`chunks_per_s` the commit rate after it (a commit every 8 chunks). On the Ray path Ray Data
hands the driver outputs in bursts, so chunks embedded before the first commit land after it and
`chunks_per_s` overstates the embedding rate there; compare Ray runs with each other by it, and
with the single-process run end to end only.

The driver ceiling is how fast the driver commits precomputed vectors (catalog transaction per
file + store), i.e. the chunks/s no number of workers can exceed with this driver.

On a 2-core machine two workers cannot beat one by much: both share the same two cores (and
here a training job of another engineer held them; see `load_average` in the output). The
GPU projection lives in docs/scale-out.md.

``--smoke`` runs the three indexings and the ceiling on the tiny random model of tests/testing.py,
8 abstracts (made-up ones where ../shared/data is absent) and 80 precomputed chunks; Ray's
start-up still takes its seconds. The figures mean nothing.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_common import SHARED_DATA, base_parser, emit, machine_info, smoke_run
from bench_index import corpus_and_queries, write_corpus

DATA = SHARED_DATA / "vaswani"


class CommitClock:
    """Progress callbacks that note when chunks were committed."""

    def __init__(self):
        self.times: list[tuple[float, int]] = []

    def start(self, total) -> None:
        self.started = time.perf_counter()

    def advance(self, chunks: int) -> None:
        self.times.append((time.perf_counter(), chunks))

    def steady_rate(self) -> float:
        """chunks/s from the first commit to the last (the first group's chunks excluded)."""
        if len(self.times) < 2:
            return float("nan")
        first, last = self.times[0][0], self.times[-1][0]
        chunks = sum(count for _, count in self.times[1:])
        return chunks / (last - first) if last > first else float("nan")


GROUP_CHUNKS = 8  # commit every 8 chunks (default 64) so that commit times trace the embedding rate


def run_once(encoder, docs: Path, index_dir: Path, batch_size: int, ray_options=None) -> dict:
    from instemb_rag.index import Indexer, IndexOptions, indexer, ray_embedding

    # Both embedding paths read the group size they imported from run_shared (index/distributed.py
    # became ray_embedding.py in issue 31; the smoke test of issue 51 runs this where Ray is installed).
    indexer.EMBED_GROUP_CHUNKS = ray_embedding.EMBED_GROUP_CHUNKS = GROUP_CHUNKS

    clock = CommitClock()
    started = time.perf_counter()
    report = Indexer(encoder, IndexOptions(index_dir=index_dir, batch_size=batch_size, ray=ray_options)).run(
        docs, clock
    )
    total = time.perf_counter() - started
    first_commit = clock.times[0][0] - started if clock.times else float("nan")
    return {
        "chunks": report.chunks_added,
        "seconds": round(total, 1),
        "startup_s": round(first_commit, 1),
        "chunks_per_s": round(clock.steady_rate(), 2),
        "end_to_end_chunks_per_s": round(report.chunks_added / total, 2),
    }


def driver_ceiling(dimension: int, chunks: int = 2000, chunks_per_file: int = 4) -> dict:
    """Chunks/s the driver commits (catalog + embedded Qdrant shard) with the vectors given."""
    from instemb_rag.index.catalog import Catalog
    from instemb_rag.index.documents import Chunk
    from instemb_rag.index.options import StoreOptions
    from instemb_rag.index.stores import open_store

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(chunks, dimension)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        catalog = Catalog.open(Path(folder))
        store = open_store(Path(folder), catalog, StoreOptions(store="qdrant"), dimension)
        started = time.perf_counter()
        for first in range(0, chunks, chunks_per_file):
            group = [Chunk(n - first, f"chunk {n} " + "text " * 200, {}) for n in range(first, first + chunks_per_file)]
            source = f"file{first}.txt"
            removed, added = catalog.replace_file(
                source, str(first), 1, group, vectors[first : first + chunks_per_file]
            )
            store.apply(
                removed,
                added,
                vectors[first : first + chunks_per_file],
                [{"source": source, "position": c.position} for c in group],
            )
            if first % 64 == 0:
                store.sync()
        store.sync()
        seconds = time.perf_counter() - started
        store.close()
        catalog.close()
    return {
        "chunks": chunks,
        "chunks_per_file": chunks_per_file,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1),
        "store": "embedded Qdrant + SQLite catalog (synchronous=FULL)",
    }


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="Abstracts to index (default 96, quick 32, smoke 8).")
    parser.add_argument("--model", default=None, help="Encoder (default: the shipped default model).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads-per-worker", type=int, default=2, help="CPUs of the single Ray worker.")
    args = parser.parse_args(argv)
    if not DATA.is_dir() and not args.smoke:
        return emit({"skipped": f"{DATA} is absent"}, args.json_out)
    try:
        import ray  # noqa: F401

        from instemb_rag.index.options import RayOptions  # noqa: F401
    except ImportError:
        return emit({"skipped": "ray is not installed: pip install 'instemb-rag[ray]'"}, args.json_out)
    with smoke_run(args):
        result = measure(args)
    return emit(result, args.json_out)


def measure(args) -> dict:
    from instemb_rag import InstEmbEncoder
    from instemb_rag.index.options import RayOptions

    limit = args.limit or (8 if args.smoke else 32 if args.quick else 96)
    encoder = InstEmbEncoder.from_pretrained(args.model, device=args.device)
    kwargs = {"path": args.model, "device": args.device}
    result: dict = {
        "machine": machine_info(args.device),
        "quick": args.quick,
        "smoke": args.smoke,
        "load_average_before": os.getloadavg(),
        "abstracts": limit,
        "batch_size": args.batch_size,
    }
    with tempfile.TemporaryDirectory() as folder:
        docs = Path(folder) / "docs"
        write_corpus(corpus_and_queries(limit, args.smoke)[0], docs)
        runs = {
            "single_process": None,
            "ray_1_worker": RayOptions(workers=1, cpus_per_worker=args.threads_per_worker, encoder_kwargs=kwargs),
            "ray_2_workers": RayOptions(workers=2, cpus_per_worker=1, encoder_kwargs=kwargs),
        }
        for name, ray_options in runs.items():
            print(f"== {name}", flush=True)
            result[name] = run_once(encoder, docs, Path(folder) / name, args.batch_size, ray_options)
            print(result[name], flush=True)
    result["two_over_one_worker"] = round(
        result["ray_2_workers"]["chunks_per_s"] / result["ray_1_worker"]["chunks_per_s"], 2
    )
    chunks = 80 if args.smoke else 400 if args.quick else 2000
    result["driver_ceiling"] = driver_ceiling(encoder.dimension, chunks=chunks)
    result["load_average_after"] = os.getloadavg()
    return result


if __name__ == "__main__":
    main()
