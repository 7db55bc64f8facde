"""The built wheel carries the whole default model: installed outside the source tree, it
embeds exactly as the checkout does (a wheel without default_checkpoint/lora/ used to load
a degraded model silently)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest

from instemb_rag.encoder.model import SHIPPED_CHECKPOINT

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TEXT = "The Ridgeline 2 tent weighs 1.9 kg; its fly is 70D ripstop nylon with taped seams."
INSTRUCTION = "focus on durability"
NOT_SOURCES = (
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    "runs",
    ".instemb",
    "notebooks",
    "benchmarks",
    "integrations",
)
EMBED_SCRIPT = f"""
import json, instemb_rag
from instemb_rag import InstEmbEncoder
encoder = InstEmbEncoder.from_pretrained(device="cpu")
vector = encoder.encode_queries([{TEXT!r}], {INSTRUCTION!r})[0]
print(json.dumps({{"module": instemb_rag.__file__, "fingerprint": encoder.fingerprint, "vector": vector.tolist()}}))
"""


def non_library_modules(names) -> list[str]:
    """The wheel's Python files that are not the library: test code (test modules, conftest, the
    test helpers of tests/testing.py) and the research/, benchmarks/ and scripts/ folders.
    instemb_rag/tools/ still ships: the offline GPU kit installs this wheel and its benchmarks
    import tools/baselines from it (docs/ARCHITECTURE.md, tools/)."""
    flagged = []
    for name in names:
        parts = name.split("/")
        if not name.endswith(".py"):
            continue
        if (
            parts[0] in ("tests", "research", "benchmarks", "scripts")
            or parts[-1] in ("testing.py", "conftest.py")
            or parts[-1].startswith("test_")
        ):
            flagged.append(name)
    return sorted(flagged)


def build_wheel(tmp_path: Path) -> Path:
    # From a copy of the sources, so leftovers of earlier builds (build/) cannot reach the wheel.
    source = tmp_path / "source"
    shutil.copytree(PROJECT_ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(wheels),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("instemb_rag-*.whl")
    return wheel


def install_outside_the_checkout(wheel: Path, venv: Path) -> Path:
    """A fresh venv holding only the wheel; the dependencies come from this interpreter's
    site-packages through a .pth line (its .pth files, the editable install among them, are not run)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_installed_wheel_embeds_exactly_as_the_checkout(tmp_path, default_encoder):
    wheel = build_wheel(tmp_path)
    packed = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(
        f"instemb_rag/default_checkpoint/{path.relative_to(SHIPPED_CHECKPOINT).as_posix()}"
        for path in SHIPPED_CHECKPOINT.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    assert "instemb_rag/default_checkpoint/lora/adapter_model.safetensors" in shipped
    assert [name for name in shipped if name not in packed] == [], "the wheel lacks files of the default checkpoint"
    assert non_library_modules(packed) == [], "the wheel carries test or research modules"
    assert "instemb_rag/encoder/model.py" in packed and "instemb_rag/cli/__main__.py" in packed

    venv = tmp_path / "venv"
    python = install_outside_the_checkout(wheel, venv)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    run = subprocess.run(
        [str(python), "-c", EMBED_SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    installed = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(installed["module"]).resolve().is_relative_to(venv.resolve()), installed["module"]

    expected = default_encoder.encode_queries([TEXT], INSTRUCTION)[0]
    assert installed["fingerprint"] == default_encoder.fingerprint
    np.testing.assert_allclose(np.array(installed["vector"], dtype=np.float32), expected, rtol=0, atol=1e-6)

    help_run = subprocess.run(
        [str(venv / "bin" / "instemb-rag"), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_run.returncode == 0 and "index" in help_run.stdout, help_run.stderr[-2000:]
