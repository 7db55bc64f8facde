"""Execute every tutorial notebook, so CI proves they run as shipped.

Notebooks are stored without outputs and run here with nbclient on a python3 kernel started
from this interpreter (jupyter_client swaps the spec's "python" for sys.executable). They run
in a temporary folder; the repository root is put on PYTHONPATH so `import instemb_rag` works
from a plain checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120  # one cell; each notebook is meant to finish in < 60 s on a laptop CPU


def test_notebooks_are_stored_without_outputs():
    assert NOTEBOOKS, "notebooks/ holds no notebooks"
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        dirty = [
            i
            for i, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and (cell.outputs or cell.execution_count)
        ]
        assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"
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
