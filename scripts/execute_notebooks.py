"""Execute the tutorial notebooks and store them with their outputs: `python scripts/execute_notebooks.py [NAME ...]`.

Each notebook runs in a temporary folder on a python3 kernel started from this interpreter, with
the repository root on PYTHONPATH (as tests/test_notebooks.py runs them). Standard error
(library log lines with timestamps, progress-bar notices with this machine's paths) is left out
of what is stored, so the committed outputs are what the reader's code printed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat

REPO_ROOT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT_S = 600


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        client = nbclient.NotebookClient(
            notebook, kernel_name="python3", timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": folder}}
        )
        client.execute()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = [out for out in cell.outputs if not (out.output_type == "stream" and out.name == "stderr")]
    nbformat.write(notebook, path)


def main(names: list[str]) -> None:
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("MPLBACKEND", "Agg")
    paths = [REPO_ROOT / "notebooks" / name for name in names] or sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        started = time.monotonic()
        execute(path)
        print(f"{path.name}: executed in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
