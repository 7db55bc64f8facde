"""Write a GPU run's figures into benchmarks/README.md, between the gpu-results markers.

    python benchmarks/merge_gpu_results.py RESULTS_DIR [RESULTS_DIR ...]

RESULTS_DIR is what ``bash benchmarks/gpu.sh --offline KIT --results DIR`` wrote on the GPU
machine: environment.json (device, driver, torch and CUDA versions, date), results_cuda.json
(benchmarks/run.py's raw figures), install.json (kit and source commit) and cuda_tests.txt
(pytest's output). Several folders (a run split into calls that each fit a time limit) merge in
the order given, a later folder's benchmark replacing an earlier one's; they must come from the
same GPU. The section is a function of the folders alone (no "today"), so merging again gives the
same README. The merged raw figures go to benchmarks/results_cuda.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import run

SECTION = "gpu-results"
RAW_JSON = run.BENCH_DIR / "results_cuda.json"


class MergeError(Exception):
    pass


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise MergeError(
            f"{path} not found: is {path.parent} a folder written by gpu.sh --offline --results?"
        ) from None


def tests_summary(folder: Path) -> str | None:
    """pytest's closing line ('12 passed, 1 skipped in 30.1s'), if the tests ran."""
    path = folder / "cuda_tests.txt"
    if not path.is_file():
        return None
    found = [
        line.strip(" =") for line in path.read_text().splitlines() if re.search(r"\d+ (passed|failed|error)", line)
    ]
    return found[-1] if found else "no summary line (see cuda_tests.txt)"


def load_run(folder: Path) -> dict:
    install = folder / "install.json"
    return {
        "environment": read_json(folder / "environment.json"),
        "results": read_json(folder / "results_cuda.json"),
        "install": json.loads(install.read_text()) if install.is_file() else {},
        "tests": tests_summary(folder),
    }


def combine(runs: list[dict]) -> dict:
    """One run from several: same GPU required; later benchmarks replace earlier ones."""
    gpus = {r["environment"].get("gpu") for r in runs}
    if len(gpus) != 1 or None in gpus:
        raise MergeError(
            f"the folders come from different or unnamed devices ({sorted(map(str, gpus))}); merge one GPU's runs"
        )
    merged = {**runs[-1], "results": {}}
    for one in runs:
        merged["results"].update({name: value for name, value in one["results"].items() if not name.startswith("_")})
    merged["tests"] = next((r["tests"] for r in reversed(runs) if r["tests"]), None)
    return merged


def header_lines(merged: dict) -> list[str]:
    env, install = merged["environment"], merged["install"]
    quick = any(isinstance(r, dict) and r.get("quick") for r in merged["results"].values())
    lines = [
        f"Measured {env['date']} on {env['gpu']} (driver {env.get('driver') or 'unknown'}); torch {env['torch']}, "
        f"CUDA {env['cuda']}, transformers {env['transformers']}, Python {env['python']}.",
        f"Mode: {'quick' if quick else 'full'}. Command: `bash benchmarks/gpu.sh --offline KIT"
        f"{' --quick' if quick else ''}`, merged by `python benchmarks/merge_gpu_results.py`. "
        "Raw figures: `benchmarks/results_cuda.json`.",
    ]
    if install.get("kit_id"):
        lines.append(f"Kit {install['kit_id']} built from commit {install.get('source_commit') or 'unknown'}.")
    if install.get("faiss"):
        lines.append(install["faiss"][0].upper() + install["faiss"][1:] + ".")
    if merged["tests"]:
        lines.append(f"CUDA tests: {merged['tests']}.")
    return lines


def render_section(merged: dict) -> str:
    start, end = run.markers(SECTION)
    lines = [start, *header_lines(merged), "", "| Figure | Value | Goal | Met |", "|---|---|---|---|"]
    for name in run.SCRIPTS:
        if name in merged["results"]:
            lines += [
                f"| {figure} | {value} | {goal} | {met} |"
                for figure, value, goal, met in run.rows_for(name, merged["results"][name])
            ]
    lines.append(end)
    return "\n".join(lines)


def merge(folders: list[Path], readme: Path = run.README, raw_json: Path = RAW_JSON) -> str:
    merged = combine([load_run(folder) for folder in folders])
    section = render_section(merged)
    run.write_readme(section, SECTION, readme=readme)
    raw = {**merged["results"], "_environment": merged["environment"], "_install": merged["install"]}
    raw_json.write_text(json.dumps(raw, indent=2, default=str) + "\n")
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="results folders of gpu.sh --offline, in order")
    parser.add_argument("--readme", type=Path, default=run.README)
    parser.add_argument("--raw-json", type=Path, default=RAW_JSON)
    args = parser.parse_args(argv)
    try:
        section = merge(args.folders, args.readme, args.raw_json)
    except MergeError as error:
        parser.exit(2, f"merge_gpu_results: error: {error}\n")  # 2: input not usable as given
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
