"""Optional dependencies (instemb_rag/extras.py): what the command line does not need lives in extras
(`eval`: ranx, bm25s, scipy; `train`: matplotlib), and a command that needs a missing one says which
extra to install, instead of an ImportError traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from instemb_rag.extras import MissingExtraError

ROOT = Path(__file__).resolve().parents[1]


def test_the_metrics_name_the_eval_extra_when_ranx_is_missing(monkeypatch):
    from instemb_rag.eval.metrics import retrieval_metrics

    monkeypatch.setitem(sys.modules, "ranx", None)  # `import ranx` raises ImportError
    with pytest.raises(
        MissingExtraError, match=r"IR metrics .* needs ranx, from the eval extra: pip install 'instemb-rag\[eval\]'"
    ):
        retrieval_metrics({"q": {"d": 1}}, {"q": {"d": 1.0}})


def test_the_loss_curve_is_skipped_with_a_note_without_matplotlib(monkeypatch, tmp_path, capsys):
    from instemb_rag.training.run_files import MetricsLog

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    log = MetricsLog(tmp_path, resume_step=0)
    log.add({"step": 1, "loss": 1.0})
    assert log.plot() is None and log.plot() is None
    said = capsys.readouterr().err
    assert said.count("is not drawn: matplotlib is not installed") == 1 and "metrics.jsonl" in said


def test_the_command_line_install_leaves_the_research_dependencies_out():
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for research_only in ("ranx", "bm25s", "matplotlib", "sentence-transformers", "scikit-learn"):
        assert research_only not in core, research_only
    assert {"ranx>=0.3.20", "bm25s>=0.3"} <= set(project["optional-dependencies"]["eval"])


def test_another_package_names_its_own_extra(monkeypatch):
    from instemb_rag.extras import require

    monkeypatch.setitem(sys.modules, "llama_index.vector_stores.faiss", None)
    with pytest.raises(MissingExtraError, match=r"needs llama_index\.vector_stores\.faiss, .*'app\[faiss\]'\.$"):
        require("llama_index.vector_stores.faiss", "faiss", "The FAISS vector store", package="app")
