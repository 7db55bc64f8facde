"""What a query imports (issue 60: a lean cold start). ``Index.open`` + ``Index.search`` under an
instruction, on a FAISS index of an instruction-effect model (the default's arrangement: an LLM and
a sentence encoder, built tiny here), run in a fresh process, imports none of the packages that
only other paths need: LlamaIndex, Ray, Qdrant, FastAPI, pandas, scikit-learn, and
sentence-transformers (its sentence encoder runs on transformers alone:
teachers/st_folder.py). The shipped default's load is checked the same way (slow).
Found with ``python -X importtime``; each of these cost from 0.3 to 10 s of a query's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import index_cli_args
from testing import minilm_or_skip
from typer.testing import CliRunner

from instemb_rag.cli import app

# Top-level packages a query must not import (unless its index needs them: a Qdrant index, say).
NOT_ON_THE_QUERY_PATH = ("llama_index", "ray", "qdrant_client", "fastapi", "pandas", "sklearn", "sentence_transformers")
DOCS = {
    "tents/light.md": "a light tent . packed size 30 cm . weight 1 kg .",
    "stove.txt": "the stove is light . fuel gas burner .",
}

QUERY_SCRIPT = """
import json, sys
from instemb_rag.index import Index
with Index.open(sys.argv[1], device="cpu") as index:
    hits = index.search("which tent is light ?", instruction="focus on weight", k=2)
print(json.dumps({"hits": [hit.source for hit in hits], "modules": sorted(sys.modules)}))
"""

LOAD_DEFAULT_SCRIPT = """
import json, sys
from instemb_rag.encoder import load_model
encoder = load_model(None, device="cpu")
encoder.encode_queries(["which tent is light?"], "focus on weight")
print(json.dumps({"modules": sorted(sys.modules)}))
"""


def imported_by(script: str, *args: str) -> dict:
    """Run ``script`` in a fresh interpreter; its JSON line (the modules it left in sys.modules)."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def heavy_packages(modules: list[str]) -> list[str]:
    return sorted({name.split(".")[0] for name in modules} & set(NOT_ON_THE_QUERY_PATH))


@pytest.fixture(scope="module")
def effect_index(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> Path:
    from instemb_rag.encoder.load import untrained_effect

    root = tmp_path_factory.mktemp("query_imports")
    untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2).save(root / "model")
    for relative, text in DOCS.items():
        (root / "docs" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / relative).write_text(text)
    result = CliRunner().invoke(
        app, index_cli_args(root / "docs", root / "index", root / "model", "--chunk-overlap", "8")
    )
    assert result.exit_code == 0, result.output
    return root / "index"


def test_a_query_imports_none_of_the_packages_other_paths_need(effect_index):
    found = imported_by(QUERY_SCRIPT, str(effect_index))
    assert sorted(found["hits"]) == sorted(DOCS)  # the query ran, through both parts
    assert heavy_packages(found["modules"]) == []
    assert "transformers.models.bert.modeling_bert" in found["modules"]  # the sentence encoder, by class


def test_the_check_sees_a_package_that_is_imported():
    script = "import json, sys, pandas; print(json.dumps({'modules': sorted(sys.modules)}))"
    assert heavy_packages(imported_by(script)["modules"]) == ["pandas"]


@pytest.mark.slow
def test_loading_the_default_imports_none_of_them():
    minilm_or_skip()
    assert heavy_packages(imported_by(LOAD_DEFAULT_SCRIPT)["modules"]) == []
