"""Execute every tutorial notebook, so CI proves they run as shipped.

Notebooks are stored with their outputs (a reader sees what each step prints without running
it; `python scripts/execute_notebooks.py` refreshes them) and are executed again here with
nbclient on a python3 kernel started from this interpreter (jupyter_client swaps the spec's
"python" for sys.executable). They run in a temporary folder; the repository root is put on
PYTHONPATH so `import instemb_rag` works from a plain checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
# One cell; each notebook is meant to finish in < 60 s on a laptop CPU. The limit only catches a
# hung cell: CI and development machines are shared, and a cell that embeds the sample documents
# with the default model took over 120 s there under load.
CELL_TIMEOUT_S = 300


def test_notebooks_are_stored_with_their_outputs():
    assert NOTEBOOKS, "notebooks/ holds no notebooks"
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        counts = [cell.execution_count for cell in code]
        assert counts == list(range(1, len(code) + 1)), (
            f"{path.name}: cells were not all executed, in order, in one run (execution counts {counts}); "
            "run `python scripts/execute_notebooks.py` before committing"
        )
        assert any(cell.outputs for cell in code), f"{path.name} is stored without outputs"
        failed = [i for i, cell in enumerate(code) for output in cell.outputs if output.output_type == "error"]
        assert not failed, f"{path.name}: code cells {failed} stored an error"
        kinds = {cell.cell_type for cell in notebook.cells}
        assert kinds == {"markdown", "code"}, f"{path.name} should explain its steps in markdown"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", python_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError (with the cell and traceback) on failure
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors


@pytest.mark.slow
def test_llamaindex_app_cells_run_as_a_script_without_resource_warnings(tmp_path):
    """The LlamaIndex notebook's app path (its cells tagged `app`) as a plain script, with
    ResourceWarnings as errors: nothing it opens (model, index folder, threads) is left open."""
    notebook = nbformat.read(REPO_ROOT / "notebooks" / "02_llamaindex_app.ipynb", as_version=4)
    cells = [
        cell.source for cell in notebook.cells if cell.cell_type == "code" and "app" in cell.metadata.get("tags", [])
    ]
    assert len(cells) >= 3, "the app cells lost their `app` tag"
    script = tmp_path / "app.py"
    script.write_text("\n\n".join(cells) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-X", "dev", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "ResourceWarning" not in completed.stderr, completed.stderr[-4000:]
    assert "ana " in completed.stdout and "dev " in completed.stdout  # every user was served
