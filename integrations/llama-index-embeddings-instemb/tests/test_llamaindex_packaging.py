"""The vector-store packages are extras; a missing one is named with its pip command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import faiss_vector_store, qdrant_vector_store

tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads TOML")

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_vector_stores_are_extras_not_requirements():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert not [name for name in project["dependencies"] if "vector-stores" in name]
    extras = project["optional-dependencies"]
    assert [name.split(">")[0] for name in extras["faiss"]] == ["llama-index-vector-stores-faiss"]
    assert [name.split(">")[0] for name in extras["qdrant"]] == ["llama-index-vector-stores-qdrant"]


@pytest.mark.parametrize("extra", ["faiss", "qdrant"])
def test_a_missing_extra_names_the_pip_command(extra, tiny_embed_model, monkeypatch):
    monkeypatch.setitem(sys.modules, f"llama_index.vector_stores.{extra}", None)  # as if not installed
    make = {"faiss": lambda: faiss_vector_store(tiny_embed_model), "qdrant": lambda: qdrant_vector_store("docs")}
    with pytest.raises(InstEmbError, match=rf"pip install 'llama-index-embeddings-instemb\[{extra}\]'"):
        make[extra]()


def test_the_store_helpers_build_working_stores(tiny_embed_model):
    store = faiss_vector_store(tiny_embed_model)
    assert store.client.d == tiny_embed_model.dimension and store.client.metric_type == 0  # inner product
    assert qdrant_vector_store("docs", location=":memory:").collection_name == "docs"
