"""The GPU kit on the GPU machine: check it against this Python, join it, install it, try it.

Run through ``scripts/gpu_kit.py install|smoke|environment`` (by ``benchmarks/gpu.sh --offline``).
Standard library only until the wheels are in: the image's Python runs it as it is. Wheels go
in with ``pip install --no-index --no-deps --target``, so pip never resolves anything and never
looks at, let alone replaces, the image's torch.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import kit_wheels as kw
from kit_pieces import KitError, entries_from_json, join_all, reset_folder, write_json

WORK_MARKER = ".gpu-kit-work"
SMOKE_QUERY = ("what is the packed size and weight of the tent", "focus on weight")


def read_manifest(kit: Path) -> dict:
    path = kit / "manifest.json"
    if not path.is_file():
        raise KitError(f"{path} not found: send the kit's manifest.json and plan.json with the first transfer")
    return json.loads(path.read_text())


def check_python(target: dict) -> None:
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if target["python"] != here:
        raise KitError(
            f"the kit holds wheels for Python {target['python']} but {sys.executable} is {here}: "
            f"rebuild it with `gpu_kit.py build --python-version {here}` or run gpu.sh with PYTHON=python{target['python']}"
        )


def check_image(manifest: dict) -> list[str]:
    """Fail naming the packages the kit leaves to the image and the image lacks; return version warnings."""
    shipped = {row["name"] for row in manifest["wheels"] if row["role"] == "install"}
    if shipped & kw.NEVER_SHIPPED:  # a hand-edited or foreign kit: the image's CUDA torch must stay
        raise KitError(
            f"the kit carries {', '.join(sorted(shipped & kw.NEVER_SHIPPED))}; rebuild it with gpu_kit.py build"
        )
    if kw.GPU_FAISS in shipped:
        shipped.add(kw.CPU_FAISS)  # the CUDA build provides the module faiss-cpu would
    missing, mismatched = kw.image_shortfalls({row["name"]: row["requires"] for row in manifest["wheels"]}, shipped)
    if missing:
        raise KitError(
            f"{sys.executable} lacks {', '.join(missing)}, which the kit leaves to the image: {missing_hint(missing)}"
        )
    return mismatched


def missing_hint(missing: list[str]) -> str:
    if set(missing) & kw.NEVER_SHIPPED or len(missing) > 5:
        return "this is not the image's Python; run gpu.sh with PYTHON set to the python3 that holds torch"
    return f"use an image that has them or rebuild the kit with `{' '.join('--also ' + name for name in missing)}`"


def pip_install(wheels: list[Path], site: Path, upgrade: bool = False) -> None:
    """Offline, no dependency resolution: the image's torch is never looked at, let alone replaced."""
    options = ["--quiet", "--no-index", "--no-deps", "--no-compile", "--target", str(site)]
    options += ["--upgrade"] if upgrade else []
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", *options, *map(str, wheels)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PIP_NO_INDEX": "1"})
    if done.returncode != 0:
        raise KitError(f"pip could not install the kit's wheels into {site}:\n{done.stderr[-2000:]}")


def faiss_import_error(site: Path) -> str | None:
    probe = [sys.executable, "-c", "import faiss"]
    done = subprocess.run(probe, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)})
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["(no message)"])[-1]


def ensure_faiss(manifest: dict, work: Path, site: Path) -> str | None:
    """If the CUDA faiss does not load here, install the CPU build instead and say why."""
    fallback = [row for row in manifest["wheels"] if row["role"] == "fallback"]
    if not fallback:
        return None
    error = faiss_import_error(site)
    if error is None:
        return "faiss: the CUDA build (faiss-gpu-cuvs) loads"
    pip_install([work / "wheels" / fallback[0]["file"]], site, upgrade=True)
    return f"faiss: the CUDA build failed to load ({error}); faiss-cpu installed instead, so FAISS runs on the CPU"


def write_env_file(manifest: dict, work: Path) -> Path:
    """Shell exports for gpu.sh: the installed wheels, the model cache, the data, the models."""
    lines = [
        f'export PYTHONPATH="{work / "site"}${{PYTHONPATH:+:$PYTHONPATH}}"',
        f'export INSTEMB_HOME="{work / "home"}"',
    ]
    if manifest["data"]["files"]:
        lines.append(f'export INSTEMB_DATA_ROOT="{work / "data"}"')
    if not manifest["model"]["default"]:
        lines.append(f'export INSTEMB_BENCH_MODEL="{work / manifest["model"]["dest"]}"')
    if manifest.get("teacher"):
        lines.append(f'export INSTEMB_GPU_TEACHER="{work / manifest["teacher"]["dest"]}"')
    path = work / "env.sh"
    path.write_text("\n".join(lines) + "\n")
    return path


def install(kit: Path, work: Path) -> dict:
    manifest = read_manifest(kit)
    check_python(manifest["target"])
    version_warnings = check_image(manifest)  # before the joining: a missing package fails in seconds
    stamp = work / "installed.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("kit_id") == manifest["kit_id"]:
        print(f"gpu_kit: kit {manifest['kit_id']} already installed in {work}")
        return json.loads(stamp.read_text())
    if work.exists() and any(work.iterdir()) and not (work / WORK_MARKER).exists():
        raise KitError(f"{work} exists and is not a kit's unpack folder; name a new one with --work")
    reset_folder(work)
    (work / WORK_MARKER).touch()
    entries = entries_from_json(manifest["entries"])
    print(f"gpu_kit: checking and joining {sum(len(e.pieces) for e in entries)} pieces into {work}", flush=True)
    join_all(kit, entries, work)
    site = work / "site"
    installed = [work / "wheels" / row["file"] for row in manifest["wheels"] if row["role"] == "install"]
    print(f"gpu_kit: pip install --no-index --no-deps --target {site} ({len(installed)} wheels)", flush=True)
    pip_install(installed, site)
    report = {
        "kit_id": manifest["kit_id"],
        "source_commit": manifest.get("source_commit"),
        "wheels": len(installed),
        "version_warnings": version_warnings,
        "faiss": ensure_faiss(manifest, work, site),
        "env_file": str(write_env_file(manifest, work)),
    }
    for line in report["version_warnings"]:
        print(f"gpu_kit: warning: {line}")
    if report["faiss"]:
        print(f"gpu_kit: {report['faiss']}")
    write_json(stamp, report)
    return report


def smoke(device: str) -> dict:
    """Embed one query with whatever model the kit installed (INSTEMB_BENCH_MODEL or the default)."""
    import numpy as np
    import torch

    import instemb_rag
    from instemb_rag import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(os.environ.get("INSTEMB_BENCH_MODEL") or None, device=device)
    vector = encoder.encode_queries([SMOKE_QUERY[0]], SMOKE_QUERY[1])[0]
    return {
        "module": instemb_rag.__file__,
        "device": str(encoder.device),
        "dimension": int(vector.shape[0]),
        "norm": float(np.linalg.norm(vector)),
        "fingerprint": encoder.fingerprint,
        "torch": torch.__version__,
        "torch_file": torch.__file__,
        "vector": [round(float(value), 7) for value in vector],
    }


def environment() -> dict:
    """The device and software the GPU table is labelled with."""
    import torch
    import transformers

    info = {
        "date": dt.datetime.now(dt.timezone.utc).date().isoformat(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        info["driver"] = subprocess.run(query, capture_output=True, text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        info["driver"] = None
    return info
