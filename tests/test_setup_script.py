"""scripts/setup.sh's choice of torch build (issue 55): the package index's by default,
PyTorch's CPU-only build with INSTEMB_TORCH=cpu, any index with TORCH_INDEX_URL; and no pip call at
all where torch (e.g. the CPU build) is already at hand and nothing changed. The script runs on a
copy of the checkout's layout with a stand-in .venv/bin/python that records what it is asked."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INTEGRATION = Path("integrations/llama-index-embeddings-instemb/pyproject.toml")
# Records every call; `-c "import torch"` succeeds only where FAKE_TORCH=1.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [ "$1" = "-c" ]; then [ "${FAKE_TORCH:-0}" = 1 ]; exit; fi
exit 0
"""


@pytest.fixture()
def checkout(tmp_path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / INTEGRATION).parent.mkdir(parents=True)
    shutil.copy(ROOT / INTEGRATION, tmp_path / INTEGRATION)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def setup(checkout: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = checkout / "calls.log"
    log.unlink(missing_ok=True)
    clean = {key: value for key, value in os.environ.items() if key not in {"INSTEMB_TORCH", "TORCH_INDEX_URL"}}
    done = subprocess.run(
        ["bash", str(checkout / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        env={**clean, "FAKE_LOG": str(log), **env},
        timeout=60,
    )
    return done, (log.read_text().splitlines() if log.exists() else [])


def torch_install(calls: list[str]) -> str:
    [line] = [line for line in calls if " install torch==" in line]
    return line


def test_default_takes_torch_from_the_package_index(checkout):
    done, calls = setup(checkout)
    assert done.returncode == 0, done.stderr
    assert "--index-url" not in torch_install(calls) and torch_install(calls).endswith("install torch==2.13.0")


def test_instemb_torch_cpu_takes_the_cpu_only_build(checkout):
    done, calls = setup(checkout, INSTEMB_TORCH="cpu")
    assert done.returncode == 0, done.stderr
    assert torch_install(calls).endswith(f"install torch==2.13.0 --index-url {CPU_INDEX}")
    assert not any("--index-url" in line for line in calls if " install torch==" not in line)  # torch only


def test_torch_index_url_names_any_index(checkout):
    done, calls = setup(checkout, TORCH_INDEX_URL="https://example.org/simple")
    assert done.returncode == 0, done.stderr
    assert torch_install(calls).endswith("install torch==2.13.0 --index-url https://example.org/simple")


def test_an_unknown_choice_is_refused_before_anything_installs(checkout):
    done, calls = setup(checkout, INSTEMB_TORCH="rocm")
    assert done.returncode == 2 and "INSTEMB_TORCH=cpu" in done.stderr
    assert not any(" install " in line for line in calls)


def test_torch_at_hand_and_nothing_changed_means_no_pip_call(checkout):
    assert setup(checkout, INSTEMB_TORCH="cpu")[0].returncode == 0  # the first run writes the stamp
    for env in ({}, {"INSTEMB_TORCH": "cpu"}):
        done, calls = setup(checkout, FAKE_TORCH="1", **env)
        assert done.returncode == 0, done.stderr
        assert not any("pip" in line for line in calls), calls
