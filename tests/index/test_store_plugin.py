"""A vector store is a plugin (issue 68 item 3): a store defined and registered here, in the test,
works through `instemb-rag index` and `instemb-rag query` without any product file naming it. Its
setting is an `index` option in its own help panel, recorded in the manifest; it answers the same
hits and scores as FAISS's exact (flat) index over the same documents."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import index_cli_args
from testing import TENT_DOCS
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index.stores.registry import (
    StoreRegistration,
    StoreSetting,
    register_store,
    registered_stores,
    unregister_store,
)

runner = CliRunner()
VECTORS_FILE = "numpy-store.npz"


class NumpyStore:
    """A ``VectorStore`` (index/stores/base.py) in one .npz file beside the catalog: the catalog's
    vectors of one generation, at the dtype the ``numpy_dtype`` setting names, searched exactly."""

    searches = 0  # how many searches this store answered (not the catalog's exact fallback)

    def __init__(self, index_dir: Path, catalog, dtype: str, dimension: int):
        self.path = Path(index_dir) / VECTORS_FILE
        self.catalog = catalog
        self.dtype = dtype
        self.dimension = dimension
        self.fallback_reason = None

    @classmethod
    def open(cls, index_dir, catalog, options, dimension, for_search=False):
        return cls(index_dir, catalog, options.numpy_dtype, dimension)

    @classmethod
    def wipe(cls, index_dir, options, dimension, drop_server_collection):
        (Path(index_dir) / VECTORS_FILE).unlink(missing_ok=True)

    def describe(self) -> dict:
        return {"numpy_dtype": self.dtype}

    def ensure_empty(self) -> None:
        pass

    def repair(self) -> str | None:
        return None  # finish() writes the final generation whole

    def apply(self, removed, added, vectors, payloads) -> None:
        pass

    def sync(self) -> None:
        pass

    def finish(self, previous: dict | None) -> None:
        ids, vectors = self.catalog.vectors(dimension=self.dimension)
        np.savez(self.path, ids=ids, vectors=vectors.astype(self.dtype), generation=self.catalog.generation)
        self.catalog.set_store_generation(self.catalog.generation)

    def search(self, vector, k, sources):
        saved = np.load(self.path)
        if int(saved["generation"]) != self.catalog.generation:
            self.fallback_reason = "the numpy store lags the catalog"
            return None
        ids, vectors = saved["ids"], saved["vectors"].astype(np.float32)
        if sources is not None:
            keep = np.isin(ids, self.catalog.ids_of_sources(sources))
            ids, vectors = ids[keep], vectors[keep]
        scores = vectors @ np.asarray(vector, np.float32)
        best = np.argsort(-scores)[:k]
        NumpyStore.searches += 1
        return [(int(ids[n]), float(scores[n])) for n in best]

    def place_on_gpu(self, device: int) -> str | None:
        return None

    def close(self) -> None:
        pass


NUMPY_STORE = StoreRegistration(
    name="numpy",
    store_class=NumpyStore,
    summary="numpy: an .npz file searched exactly (a test's store)",
    settings=(
        StoreSetting(
            "numpy_dtype", "--numpy-dtype", "dtype of the stored vectors.", default="float32", panel="NumPy store"
        ),
    ),
)


@pytest.fixture()
def numpy_store():
    register_store(NUMPY_STORE)
    try:
        yield NUMPY_STORE
    finally:
        unregister_store("numpy")


@pytest.fixture()
def docs(tmp_path) -> Path:
    for relative, text in TENT_DOCS.items():
        (tmp_path / "docs" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / relative).write_text(text)
    return tmp_path / "docs"


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200", "INSTEMB_NO_DAEMON": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def query_json(index_dir: Path, model: Path, *extra: str) -> list[tuple[str, float]]:
    output = cli(
        "query", "light tent", "-i", "focus on weight", "--index-dir", str(index_dir), "-m", str(model), "-k", "4",
        "--json", *extra,
    )  # fmt: skip
    return [(hit["source"], hit["score"]) for hit in json.loads(output)["hits"]]


def test_a_store_registered_in_the_test_works_through_index_and_query(numpy_store, docs, tmp_path, tiny_model_dir):
    help_text = cli("index", "--help")
    assert "--store <faiss|qdrant|numpy>" in help_text, help_text
    panel = help_text[help_text.index("NumPy store:") :]
    assert "--numpy-dtype" in panel and "Qdrant server:" in help_text.split("NumPy store:")[0]

    numpy_dir, faiss_dir = tmp_path / "numpy-index", tmp_path / "faiss-index"
    cli(*index_cli_args(docs, numpy_dir, tiny_model_dir, "--store", "numpy", "--numpy-dtype", "float64"))
    cli(*index_cli_args(docs, faiss_dir, tiny_model_dir, "--store", "faiss"))
    manifest = json.loads((numpy_dir / "manifest.json").read_text())
    assert (manifest["store"], manifest["store_options"]) == ("numpy", {"numpy_dtype": "float64"})
    assert np.load(numpy_dir / VECTORS_FILE)["vectors"].dtype == np.float64

    searched = NumpyStore.searches
    from_numpy, from_faiss = query_json(numpy_dir, tiny_model_dir), query_json(faiss_dir, tiny_model_dir)
    assert NumpyStore.searches > searched  # the test's store answered, not the catalog's exact fallback
    assert [source for source, _ in from_numpy] == [source for source, _ in from_faiss]
    assert [score for _, score in from_numpy] == pytest.approx([score for _, score in from_faiss], abs=1e-5)
    filtered = query_json(numpy_dir, tiny_model_dir, "--filter", "source=tents/*")
    assert {source for source, _ in filtered} == {"tents/ridge.md", "tents/light.md"}

    # an existing index keeps its store: asking for another is refused, as for the built-in ones
    refused = runner.invoke(app, index_cli_args(docs, numpy_dir, tiny_model_dir, "--store", "faiss"))
    assert refused.exit_code != 0 and "uses --store numpy" in " ".join(refused.output.split())


def test_a_rebuild_wipes_the_files_of_every_registered_store(numpy_store, docs, tmp_path, tiny_model_dir):
    index_dir = tmp_path / "index"
    cli(*index_cli_args(docs, index_dir, tiny_model_dir, "--store", "numpy"))
    assert (index_dir / VECTORS_FILE).is_file()
    cli(*index_cli_args(docs, index_dir, tiny_model_dir, "--store", "faiss", "--rebuild"))
    assert not (index_dir / VECTORS_FILE).exists()
    assert json.loads((index_dir / "manifest.json").read_text())["store"] == "faiss"


def test_a_store_unregistered_leaves_the_built_in_ones(numpy_store):
    assert list(registered_stores()) == ["faiss", "qdrant", "numpy"]
    with pytest.raises(ValueError, match="registered already"):
        register_store(StoreRegistration("numpy", NumpyStore, "another numpy"))
    with pytest.raises(ValueError, match="--numpy-dtype.*is taken"):
        register_store(StoreRegistration("numpy2", NumpyStore, "x", settings=NUMPY_STORE.settings))
    unregister_store("numpy")
    try:
        from instemb_rag.index.options import StoreOptions

        assert list(registered_stores()) == ["faiss", "qdrant"]
        assert not hasattr(StoreOptions(), "numpy_dtype")
    finally:
        register_store(NUMPY_STORE)  # for the fixture to unregister
