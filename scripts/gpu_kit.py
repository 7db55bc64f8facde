"""A kit that carries the GPU run to a GPU machine with no package index, 64 MiB at a time.

    python scripts/gpu_kit.py build [--out gpu-kit] [--teacher PATH]     # here (PyPI reachable)
    python3 scripts/gpu_kit.py install gpu-kit                           # there (run by gpu.sh --offline)

``build`` writes, into an ignored folder: the wheels the GPU image lacks (resolved for CPython
3.12 manylinux x86-64 by default, the image's own packages left out, torch never shipped) and the
project's wheel; the default model's converted safetensors folder (and ``--teacher``); the data
files the benchmarks read; all of it cut into pieces of at most 60 MiB (sha256 each) and packed
into ``transfer-NN`` folders that each fit one 64 MiB copy of the working tree. ``manifest.json``
lists every file and piece, ``plan.json`` what each transfer carries. ``install`` checks and joins
the pieces, installs the wheels with ``pip install --no-index --no-deps --target`` on top of the
image's torch and writes ``env.sh`` for gpu.sh; ``smoke`` embeds one query; ``environment``
records the device for the GPU table. Exit codes: 2 when the kit or the image is not usable as
given (the message names what is missing), 1 on anything unexpected.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kit_install  # noqa: E402  (after the path line above: scripts/ is no package)
import kit_wheels as kw  # noqa: E402
from kit_pieces import (  # noqa: E402
    KitError,
    cut_into_pieces,
    entries_to_json,
    folder_files,
    move_into_transfers,
    plan_transfers,
    reset_folder,
    write_json,
)

MIB = 1 << 20
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# manifest.json and plan.json travel with every transfer; they stay far below this.
METADATA_RESERVE = 1 * MIB
KIT_MARKER = "manifest.json"
# What the benchmarks read under the data root (bench_encoder/bench_gpu: SciFact abstracts;
# bench_index: Vaswani; bench_training: the four training sets). Whole files, so that query,
# corpus and qrels files keep referring to each other.
BENCH_DATA_FILES = {
    "scifact": ("corpus.jsonl", "stance.jsonl"),
    "vaswani": ("corpus.jsonl", "queries.jsonl", "qrels.tsv"),
    "msmarco_qa": ("corpus.jsonl", "queries.jsonl", "qrels.tsv"),
    "pubmedqa": ("pqal.jsonl",),
    "condaqa": ("dev.jsonl",),
}
NO_DATA = {"root": None, "files": 0, "missing": ["not asked for (--no-data)"]}


# ---------------------------------------------------------------- build (here)


def working_tree_bytes() -> int:
    """What travels with every transfer besides the kit: tracked and untracked-not-ignored files."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0  # not a git checkout: nothing to subtract is known
    paths = (PROJECT_ROOT / name for name in listed.decode().split("\0") if name)
    return sum(path.stat().st_size for path in paths if path.is_file())


def carry_prefix(kit: Path) -> str:
    """How a transfer names the kit: relative to the checkout (it must be git-ignored there)."""
    try:
        relative = kit.relative_to(PROJECT_ROOT)
    except ValueError:
        return str(kit)
    ignored = (
        subprocess.run(["git", "-C", str(PROJECT_ROOT), "check-ignore", "-q", str(relative / KIT_MARKER)]).returncode
        == 0
    )
    if not ignored:
        raise KitError(
            f"{kit} is inside the checkout but not git-ignored: it would travel whole with every copy; use gpu-kit/"
        )
    return relative.as_posix()


def prepare_kit_folder(kit: Path) -> None:
    ours = (kit / KIT_MARKER).is_file() or (kit / "staging").is_dir()  # a kit, or an interrupted build
    if kit.exists() and any(kit.iterdir()) and not ours:
        raise KitError(f"{kit} exists and holds no kit (no {KIT_MARKER}); name an empty or new folder")
    reset_folder(kit)


def model_files(folder: Path, dest_prefix: str, what: str) -> list[tuple[Path, str]]:
    if not (folder / "config.json").is_file():
        raise KitError(f"{what} folder {folder} has no config.json: pass a Hugging Face model folder")
    return [(path, f"{dest_prefix}/{path.relative_to(folder).as_posix()}") for path in folder_files(folder)]


def backbone_source(model: Path | None) -> tuple[Path, dict]:
    """The folder to ship and its manifest record: the converted default (INSTEMB_HOME) or ``model``."""
    if model is not None:
        return model, {"name": model.name, "default": False, "dest": "models/backbone"}
    from instemb_rag.encoder.backbone import DEFAULT_BACKBONE, convert_default_model

    print("gpu_kit: the default model's converted folder (converted once if absent; INSTEMB_HOME)", flush=True)
    return convert_default_model(), {
        "name": DEFAULT_BACKBONE,
        "default": True,
        "dest": f"home/models/{DEFAULT_BACKBONE}",
    }


def data_files(data_root: Path | None) -> tuple[list[tuple[Path, str]], dict]:
    """The benchmark data files present under ``data_root``; what is absent is recorded, not fatal."""
    if data_root is None:
        from instemb_rag.paths import data_root as configured

        data_root = configured()
    if not data_root.is_dir():
        print(
            f"gpu_kit: note: no development data at {data_root}; the kit carries none (benchmarks that need it will say so)"
        )
        return [], {"root": str(data_root), "files": 0, "missing": ["all: the folder is absent"]}
    wanted = [f"{name}/{file}" for name, files in BENCH_DATA_FILES.items() for file in files]
    present = [relative for relative in wanted if (data_root / relative).is_file()]
    missing = sorted(set(wanted) - set(present))
    if missing:
        print(f"gpu_kit: note: not in {data_root}: {', '.join(missing)}")
    return [(data_root / relative, f"data/{relative}") for relative in present], {
        "root": str(data_root),
        "files": len(present),
        "missing": missing,
    }


def collect_wheels(args, folder: Path) -> list[dict]:
    """The project's wheel, then (unless --no-dependency-wheels) what the image lacks, then fallbacks."""
    environment = kw.target_environment(None if args.local else args.python_version)
    options = kw.target_options(
        None if args.local else args.python_version, tuple(args.platform or kw.DEFAULT_PLATFORMS)
    )
    # A --local kit or an explicit requirement list targets no GPU image: no extras unless named.
    extras = tuple(args.extra) if args.extra else (() if args.local or args.requirement else kw.DEFAULT_EXTRAS)
    project = kw.build_project_wheel(folder)
    rows = [
        wheel_row(project, "instemb-rag", "install", kw.applicable(kw.wheel_requires(project), extras, environment))
    ]
    if args.no_dependency_wheels:
        return rows
    if args.image_packages:
        image = kw.read_image_packages(args.image_packages)
    else:
        image = kw.local_packages() if args.local else kw.read_image_packages()
    requirements = list(args.requirement or kw.project_requirements(extras))
    if any(kw.requirement_name(r) == kw.GPU_FAISS for r in requirements):
        requirements.append(kw.CPU_FAISS)  # the fallback, should the CUDA build not load on the image
    print("gpu_kit: resolving the requirements for the target (pip)", flush=True)
    shipped = kw.select_shipped(kw.resolve(requirements, options), image, set(args.also))
    files = kw.download(shipped, options, folder)
    for package in shipped:
        requires = kw.applicable(package["requires_dist"], tuple(package["extras"]), environment)
        role = "fallback" if package["name"] == kw.CPU_FAISS and kw.GPU_FAISS in files else "install"
        rows.append(wheel_row(files[package["name"]], package["name"], role, requires))
    return rows


def wheel_row(path: Path, name: str, role: str, requires: list[str]) -> dict:
    return {"path": path, "file": path.name, "name": name, "role": role, "requires": requires}


def source_commit() -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, check=True)
        dirty = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.decode().strip() + ("+local-changes" if dirty.stdout.strip() else "")


def transfer_budget(transfer_mib: int, piece_mib: int) -> tuple[int, int, int]:
    """(bytes of pieces per transfer, largest piece, working tree bytes): the tree travels every time."""
    tree = working_tree_bytes()
    budget = transfer_mib * MIB - tree - METADATA_RESERVE
    if budget < MIB:
        raise KitError(f"the working tree ({tree / MIB:.1f} MiB) leaves no room in a {transfer_mib} MiB transfer")
    return budget, min(piece_mib * MIB, budget), tree


def gather_sources(args, scratch: Path) -> tuple[list[dict], list[tuple[Path, str, str]], dict]:
    """Every file of the kit as (path, destination, kind), the wheel rows and the manifest records."""
    wheels = collect_wheels(args, scratch)
    backbone, model = backbone_source(args.model)
    sources = [(row["path"], f"wheels/{row['file']}", "wheel") for row in wheels]
    sources += [(path, dest, "model") for path, dest in model_files(backbone, model["dest"], "model")]
    if args.teacher:
        sources += [(path, dest, "teacher") for path, dest in model_files(args.teacher, "models/teacher", "teacher")]
    data, data_record = data_files(args.data_root) if not args.no_data else ([], NO_DATA)
    sources += [(path, dest, "data") for path, dest in data]
    teacher = {"name": args.teacher.name, "dest": "models/teacher"} if args.teacher else None
    return wheels, sources, {"model": model, "teacher": teacher, "data": data_record}


def make_manifest(args, wheels: list[dict], records: dict, entries: list) -> dict:
    target_python = f"{sys.version_info[0]}.{sys.version_info[1]}" if args.local else args.python_version
    manifest = {
        "format": 1,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "source_commit": source_commit(),
        "target": {"python": target_python, "local": args.local},
        "wheels": [{key: value for key, value in row.items() if key != "path"} for row in wheels],
        **records,
        "entries": entries_to_json(entries),
    }
    manifest["kit_id"] = hashlib.sha256(json.dumps(manifest["entries"], sort_keys=True).encode()).hexdigest()[:16]
    return manifest


def make_plan(kit_id: str, transfers: list[dict], prefix: str, sizes: dict) -> dict:
    """Which transfer carries what; ``carry`` are the paths to send with one copy of the tree."""
    carried = [
        {**t, "carry": [f"{prefix}/manifest.json", f"{prefix}/plan.json", f"{prefix}/{t['name']}"]} for t in transfers
    ]
    return {"kit_id": kit_id, **sizes, "metadata_reserve_bytes": METADATA_RESERVE, "transfers": carried}


def build(args) -> dict:
    kit = args.out.resolve()
    prefix = carry_prefix(kit)
    budget, piece_bytes, tree = transfer_budget(args.transfer_mib, args.piece_mib)
    prepare_kit_folder(kit)
    staging = kit / "staging"
    staging.mkdir()
    with tempfile.TemporaryDirectory() as scratch:
        wheels, sources, records = gather_sources(args, Path(scratch))
        print(f"gpu_kit: cutting {len(sources)} files into pieces of at most {piece_bytes / MIB:.1f} MiB", flush=True)
        entries = [cut_into_pieces(path, dest, kind, staging, piece_bytes) for path, dest, kind in sources]
    transfers = plan_transfers(entries, budget)
    move_into_transfers(staging, kit, entries)
    staging.rmdir()
    manifest = make_manifest(args, wheels, records, entries)
    sizes = {"transfer_limit_bytes": args.transfer_mib * MIB, "working_tree_bytes": tree, "budget_bytes": budget}
    plan = make_plan(manifest["kit_id"], transfers, prefix, {**sizes, "piece_bytes": piece_bytes})
    write_json(kit / "manifest.json", manifest)
    write_json(kit / "plan.json", plan)
    if (kit / "manifest.json").stat().st_size + (kit / "plan.json").stat().st_size > METADATA_RESERVE:
        raise KitError("manifest.json and plan.json outgrew their reserve in a transfer; raise METADATA_RESERVE")
    print_build_summary(kit, manifest, plan)
    return manifest


def print_build_summary(kit: Path, manifest: dict, plan: dict) -> None:
    total = sum(t["bytes"] for t in plan["transfers"])
    print(
        f"gpu_kit: kit {manifest['kit_id']} in {kit}: {len(manifest['wheels'])} wheels, "
        f"{len(manifest['entries'])} files, {total / MIB:.1f} MiB in {len(plan['transfers'])} transfers "
        f"(each <= {plan['budget_bytes'] / MIB:.1f} MiB + the {plan['working_tree_bytes'] / MIB:.1f} MiB working tree)"
    )
    for transfer in plan["transfers"]:
        print(f"  {transfer['name']}: {transfer['bytes'] / MIB:5.1f} MiB, carry {' '.join(transfer['carry'])}")


# ---------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help="write the kit (here, where PyPI is reachable)")
    make.add_argument(
        "--out", type=Path, default=PROJECT_ROOT / "gpu-kit", help="kit folder (default: gpu-kit/, git-ignored)"
    )
    make.add_argument(
        "--python-version", default=kw.DEFAULT_PYTHON, help="target CPython (default 3.12, the GPU image's)"
    )
    make.add_argument(
        "--platform",
        action="append",
        help="target wheel platform tag (repeat; default: manylinux x86-64, glibc <= 2.39)",
    )
    make.add_argument(
        "--local",
        action="store_true",
        help="target the running interpreter and treat its packages as the image (tests)",
    )
    make.add_argument(
        "--image-packages",
        type=Path,
        default=None,
        help="the target's packages, left out of the kit (default: scripts/gpu_image_packages.txt)",
    )
    make.add_argument(
        "--extra",
        action="append",
        default=None,
        help="project extras to ship (repeat; default: gpu-cu13 and serve, none with --local)",
    )
    make.add_argument(
        "--requirement", action="append", default=[], help="ship these requirements instead of the project's (repeat)"
    )
    make.add_argument(
        "--also", action="append", default=[], help="ship this package even though the image has it (repeat)"
    )
    make.add_argument(
        "--no-dependency-wheels", action="store_true", help="only the project's wheel (no pip resolution, no network)"
    )
    make.add_argument(
        "--model", type=Path, default=None, help="model folder to ship (default: the converted default model)"
    )
    make.add_argument("--teacher", type=Path, default=None, help="also ship this teacher model folder")
    make.add_argument(
        "--data-root", type=Path, default=None, help="development data (default: $INSTEMB_DATA_ROOT or ../shared/data)"
    )
    make.add_argument("--no-data", action="store_true", help="ship no benchmark data")
    make.add_argument("--piece-mib", type=int, default=60, help="largest piece (default 60 MiB)")
    make.add_argument(
        "--transfer-mib", type=int, default=64, help="largest transfer, working tree included (default 64 MiB)"
    )
    unpack = commands.add_parser("install", help="check, join and install a kit (on the GPU machine)")
    unpack.add_argument("kit", type=Path)
    unpack.add_argument("--work", type=Path, default=None, help="unpack folder (default: KIT/unpacked)")
    check = commands.add_parser("smoke", help="embed one query with the installed kit; JSON out")
    check.add_argument("--device", default="auto")
    check.add_argument("--out", type=Path, default=None)
    describe = commands.add_parser("environment", help="device, torch and CUDA versions; JSON out")
    describe.add_argument("--out", type=Path, default=None)
    return top


def emit(value: dict, out: Path | None) -> None:
    if out is not None:
        write_json(out, value)
    print(json.dumps(value, default=str))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "build":
            build(args)
        elif args.command == "install":
            kit = args.kit.resolve()
            emit(kit_install.install(kit, (args.work or kit / "unpacked").resolve()), None)
        elif args.command == "smoke":
            emit(kit_install.smoke(args.device), args.out)
        else:
            emit(kit_install.environment(), args.out)
    except KitError as error:
        print(f"gpu_kit: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
