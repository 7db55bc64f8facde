"""The README's Python blocks run as written from the root of a fresh clone (slow: the default model).

The blocks run in order as one script, in a temporary folder laid out like a clone's root
(instemb_rag/ is this checkout's package), with ResourceWarnings as errors. A block that starts
with "# needs a running `instemb-rag serve`" is left out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

INTEGRATION = Path(__file__).resolve().parents[1]
REPO_ROOT = INTEGRATION.parents[1]


def readme_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", (INTEGRATION / "README.md").read_text(), flags=re.DOTALL)
    return [block for block in blocks if not block.startswith("# needs a running")]


def test_readme_blocks_run_as_written(tmp_path):
    blocks = readme_blocks()
    assert len(blocks) >= 2
    (tmp_path / "instemb_rag").symlink_to(REPO_ROOT / "instemb_rag", target_is_directory=True)
    script = tmp_path / "readme.py"
    script.write_text("\n\n".join(blocks))
    completed = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "ResourceWarning" not in completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("Focus on durability.") and "tents/" in completed.stdout
    assert lines[-1].startswith("['tents/") and "stoves/" not in lines[-1]  # the MetadataFilters held
