"""Run every benchmark and regenerate the results table in benchmarks/README.md.

    python benchmarks/run.py --quick            # a few minutes on a small CPU
    python benchmarks/run.py --device cuda      # full repeats on a GPU machine
    python benchmarks/run.py --only encoder multi_instruction
    python benchmarks/run.py --smoke            # seconds a script: tiny model, table printed only
    bash benchmarks/gpu.sh                      # GPU machine: install, CUDA tests, GPU table

Each script runs in its own process (``main(argv) -> dict``, ``--quick``, ``--smoke``,
``--json-out``, see bench_common.py); one that is missing or fails becomes a row saying so, never
a stale figure. ``--smoke`` checks that every script still runs and renders (its figures mean
nothing): it leaves README.md and results.json alone.
Ratios are measured inside one script run; absolute times are labelled with the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:  # the renderers beside this script, however it is loaded
    sys.path.insert(0, str(BENCH_DIR))

from table_rows import RENDERERS, gpu_rows, rows_for  # noqa: E402

__all__ = ["RENDERERS", "SCRIPTS", "gpu_rows", "main", "markers", "render_table", "rows_for", "write_readme"]
README = BENCH_DIR / "README.md"
RESULTS_JSON = BENCH_DIR / "results.json"
START, END = "<!-- results:start -->", "<!-- results:end -->"

# name -> script; the order is the table's order.
SCRIPTS = {
    "encoder": "bench_encoder.py",
    "multi_instruction": "bench_multi_instruction.py",
    "generate_baseline": "bench_generate_baseline.py",
    "index": "bench_index.py",
    "hybrid": "bench_hybrid.py",
    "training": "bench_training.py",
    "serve": "bench_serve.py",
    "cli": "bench_cli.py",  # `instemb-rag query` end to end: warm (resident process), cold, in-process
    "reader": "bench_reader.py",  # the reader's second stage: p50 of re-scoring k hits (issue 67)
    "ray": "bench_ray.py",  # `ray` extra; skipped (a row saying so) without it
    "gpu": "bench_gpu.py",  # CUDA only (run by default with --device cuda; see gpu.sh)
}
GPU_ONLY = {"gpu"}


def run_script(name: str, quick: bool, device: str, timeout_s: int, smoke: bool = False) -> dict:
    script = BENCH_DIR / SCRIPTS[name]
    if not script.is_file():
        return {"missing": f"benchmarks/{script.name} is not in this checkout"}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / f"{name}.json"
        command = [sys.executable, str(script), "--json-out", str(out), "--device", device]
        if quick:
            command.append("--quick")
        if smoke:
            command.append("--smoke")
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        try:
            completed = subprocess.run(command, cwd=BENCH_DIR.parent, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"failed": f"timed out after {timeout_s} s"}
        if completed.returncode != 0 or not out.is_file():
            tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
            return {"failed": f"exit {completed.returncode}: " + " | ".join(tail)}
        return json.loads(out.read_text())


def machine_line(results: dict) -> str:
    machine = next((r["machine"] for r in results.values() if isinstance(r, dict) and "machine" in r), None)
    if machine is None:
        return "machine: unknown"
    gpu = f", GPU {machine['gpu']}" if machine.get("gpu") else ""
    return (
        f"{machine['cpu']}, {machine['cores']} cores ({machine['torch_threads']} torch threads){gpu}; "
        f"torch {machine['torch']}, transformers {machine['transformers']}; device {machine['device']}"
    )


def render_table(results: dict, quick: bool, command: str, section: str = "results", smoke: bool = False) -> str:
    start, end = markers(section)
    mode = "smoke (tiny model: the figures mean nothing)" if smoke else "quick" if quick else "full"
    lines = [
        start,
        f"Measured {dt.date.today().isoformat()} on: {machine_line(results)}.",
        f"Mode: {mode}. Command: `{command}`. "
        + ("Raw figures: not written (smoke)." if smoke else "Raw figures: `benchmarks/results.json`."),
        "",
        "| Figure | Value | Goal | Met |",
        "|---|---|---|---|",
    ]
    for name, result in results.items():
        if name not in RENDERERS:
            continue
        for figure, value, goal, met in rows_for(name, result):
            lines.append(f"| {figure} | {value} | {goal} | {met} |")
    lines.append(end)
    return "\n".join(lines)


def markers(section: str) -> tuple[str, str]:
    return (START, END) if section == "results" else (f"<!-- {section}:start -->", f"<!-- {section}:end -->")


def write_readme(table: str, section: str = "results", readme: Path = README) -> None:
    start, end = markers(section)
    title = "Results" if section == "results" else section.replace("-", " ").capitalize()
    text = readme.read_text() if readme.is_file() else f"# Benchmarks\n\n{start}\n{end}\n"
    if start not in text or end not in text:
        text = text.rstrip() + f"\n\n## {title}\n\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    readme.write_text(head + table + tail)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="each script on the tiny test model in seconds; prints the table, leaves README.md and results.json alone",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", nargs="*", choices=list(SCRIPTS), default=None)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per script")
    parser.add_argument("--no-readme", action="store_true", help="print the table, leave README.md alone")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="measure nothing: rebuild the README table from benchmarks/results.json",
    )
    parser.add_argument(
        "--section",
        default=None,
        help="README markers to write between (default: results; gpu-results with --device cuda)",
    )
    parser.add_argument(
        "--results-json",
        type=Path,
        default=None,
        help="raw figures file (default: results.json; results_cuda.json with --device cuda); "
        "written even with --no-readme when named",
    )
    args = parser.parse_args(argv)
    cuda = args.device.startswith("cuda")
    section = args.section or ("gpu-results" if cuda else "results")
    results_json = args.results_json or (BENCH_DIR / "results_cuda.json" if cuda else RESULTS_JSON)
    if args.render_only:
        saved = json.loads(results_json.read_text())
        quick = any(isinstance(r, dict) and r.get("quick") for r in saved.values())
        write_readme(render_table(saved, quick, saved.get("_command", "python benchmarks/run.py"), section), section)
        return saved
    names = args.only or [name for name in SCRIPTS if cuda or args.smoke or name not in GPU_ONLY]
    # Only figures from this run go into the table: no mixing with older runs.
    results = {name: run_script(name, args.quick, args.device, args.timeout, args.smoke) for name in names}
    command = (
        "python benchmarks/run.py"
        + (" --quick" if args.quick else "")
        + (" --smoke" if args.smoke else "")
        + (f" --device {args.device}" if args.device != "cpu" else "")
    )
    table = render_table(results, args.quick, command, section, args.smoke)
    print(table)
    if args.results_json or not (args.no_readme or args.smoke):  # a file named on the command line is always written
        results_json.write_text(json.dumps({**results, "_command": command}, indent=2, default=str))
    if not (args.no_readme or args.smoke):
        write_readme(table, section)
    return results


if __name__ == "__main__":
    main()
