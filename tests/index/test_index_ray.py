"""`instemb-rag index --ray` on a real two-node Ray cluster (a head and a second node started
with `ray start` on 127.0.0.1, one CPU each) with the tiny model: the distributed index equals
the single-process one (chunk ids exactly, vectors within 1e-4), follows the same incremental
rules, and a run whose encoder actor is killed mid-run is completed by the next run.
Skipped where the `ray` extra is not installed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install 'instemb-rag[ray]')")

from helpers import index_cli_args  # noqa: E402
from testing import WORDS, LocalRayCluster  # noqa: E402

from instemb_rag.cli.common import ExitCode, exit_code_for  # noqa: E402
from instemb_rag.errors import ModelNotFoundError  # noqa: E402
from instemb_rag.index import Indexer, IndexOptions  # noqa: E402
from instemb_rag.index.catalog import Catalog  # noqa: E402
from instemb_rag.index.options import RayOptions  # noqa: E402

pytestmark = pytest.mark.ray
PROJECT_ROOT = Path(__file__).resolve().parents[1]
CHUNK = {"chunk_size": 16, "chunk_overlap": 4}  # several chunks per file from short texts
ACTOR_CPUS = 0.75  # two actors cannot share a 1-CPU node: one lands on each node


def write_corpus(folder: Path, files: int, words: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    vocabulary = [w for w in WORDS if w != "."]
    for n in range(files):
        sentences = [" ".join(rng.choice(vocabulary, 7)) + " ." for _ in range(words // 8)]
        path = folder / f"part{n % 3}" / f"doc{n:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(" ".join(sentences))
    return folder


def catalog_rows(index_dir: Path):
    catalog = Catalog.open(index_dir)
    try:
        rows = catalog.connection.execute("SELECT id, path, position, text FROM chunks ORDER BY id").fetchall()
        ids, vectors = catalog.vectors()
        generations = (catalog.generation, catalog.store_generation)
    finally:
        catalog.close()
    return rows, ids, vectors, generations


def assert_same_index(distributed: Path, single: Path) -> None:
    rows, ids, vectors, (generation, store_generation) = catalog_rows(distributed)
    expected_rows, expected_ids, expected_vectors, _ = catalog_rows(single)
    assert rows == expected_rows  # chunk ids, sources, positions and texts: exactly
    assert np.array_equal(ids, expected_ids)
    assert np.abs(vectors - expected_vectors).max() < 1e-4
    assert store_generation == generation


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalRayCluster(tmp_path_factory.mktemp("ray_cluster"), nodes=2, cpus_per_node=1) as running:
        saved = {key: os.environ.get(key) for key in running.env}
        os.environ.update(running.env)  # the in-process drivers of these tests
        try:
            yield running
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run_local(encoder, docs: Path, index_dir: Path, store: str = "faiss"):
    from instemb_rag.index import StoreOptions

    return Indexer(encoder, IndexOptions(index_dir=index_dir, stores=StoreOptions(store=store), **CHUNK)).run(docs)


def run_distributed(encoder, model_dir: Path, docs: Path, index_dir: Path, address: str, store: str = "faiss"):
    from instemb_rag.index import StoreOptions

    ray_options = RayOptions(
        address=address,
        workers=2,
        cpus_per_worker=ACTOR_CPUS,
        files_per_task=2,
        encoder_kwargs={"path": str(model_dir), "device": "cpu"},
    )
    options = IndexOptions(
        index_dir=index_dir, stores=StoreOptions(store=store), batch_size=4, ray=ray_options, **CHUNK
    )
    return Indexer(encoder, options).run(docs)


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_distributed_index_equals_single_process_incrementally(cluster, tiny_model_dir, tmp_path, store):
    from instemb_rag import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    docs = write_corpus(tmp_path / "docs", files=8, words=48)
    single, distributed = tmp_path / "single", tmp_path / "distributed"
    run_local(encoder, docs, single, store)
    report = run_distributed(encoder, tiny_model_dir, docs, distributed, cluster.address, store)
    assert len(report.indexed) == 8 and report.chunks_added > 16
    assert_same_index(distributed, single)
    if store != "faiss":
        return  # the driver writes both stores through the same calls: the incremental run once is enough

    # the same incremental rules: one file changed, one deleted, one added, the rest untouched
    (docs / "part0" / "doc000.md").write_text("the tent is durable nylon . good in rain and wind .")
    (docs / "part1" / "doc001.md").unlink()
    (docs / "part2" / "new.md").write_text("a warm camp night with a good stove .")
    (docs / "part2" / "empty.md").write_text("   ")
    run_local(encoder, docs, single, store)
    update = run_distributed(encoder, tiny_model_dir, docs, distributed, cluster.address, store)
    assert sorted(update.indexed) == ["part0/doc000.md", "part2/new.md"]
    assert update.removed == ["part1/doc001.md"] and update.unchanged == 6
    assert [item.path for item in update.skipped] == ["part2/empty.md"]
    assert_same_index(distributed, single)


def index_command(docs: Path, index_dir: Path, model_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "instemb_rag.cli",
        *index_cli_args(docs, index_dir, model_dir, "--chunk-size", "16", "--chunk-overlap", "4", *extra),
    ]


def test_killed_worker_then_rerun_completes_the_index(cluster, tiny_model_dir, tmp_path):
    docs = write_corpus(tmp_path / "docs", files=24, words=96, seed=1)
    distributed, single = tmp_path / "distributed", tmp_path / "single"
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), **cluster.env)
    ray_args = (
        "--ray",
        cluster.address,
        "--ray-workers",
        "2",
        "--ray-cpus-per-worker",
        str(ACTOR_CPUS),
        "--batch-size",
        "2",
    )
    first = subprocess.Popen(
        index_command(docs, distributed, tiny_model_dir, *ray_args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    killed = None
    deadline = time.monotonic() + 240
    while killed is None and first.poll() is None and time.monotonic() < deadline:
        actors = cluster.worker_pids("EmbedChunks")
        if actors and committed_files(distributed) >= 1:  # mid-run: some files are in, more to come
            killed = actors[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.2)
    output, _ = first.communicate(timeout=300)
    assert killed is not None, f"the run ended before an encoder actor could be killed:\n{output.decode()[-3000:]}"
    # Ray may restart the actor and finish, or the run may fail: either way the next run completes.
    second = subprocess.run(
        index_command(docs, distributed, tiny_model_dir, *ray_args),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    local = subprocess.run(
        index_command(docs, single, tiny_model_dir), env=env, capture_output=True, text=True, timeout=300
    )
    assert local.returncode == 0, local.stdout + local.stderr
    assert_same_index(distributed, single)


def committed_files(index_dir: Path) -> int:
    if not (index_dir / "catalog.sqlite").is_file():
        return 0
    try:
        catalog = Catalog.open(index_dir, read_only=True)
        try:
            return len(catalog.file_hashes())
        finally:
            catalog.close()
    except Exception:  # the run is creating it
        return 0


def test_a_worker_that_keeps_dying_ends_the_run_with_its_exit_code_and_one_line(tiny_model_dir, tmp_path):
    """Every encoder actor is SIGKILLed on its first batch (as the OOM killer would): Ray's
    default was to restart it and retry forever; the run must stop with exit code 6 and one line."""
    docs = write_corpus(tmp_path / "docs", files=3, words=48)
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), INSTEMB_CRASH_AT="embed_batch:1", RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run(
        index_command(docs, tmp_path / "index", tiny_model_dir, "--ray", "--ray-workers", "1"),
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert run.returncode == ExitCode.RAY_WORKER, run.stdout[-2000:] + run.stderr[-3000:]
    assert len(errors) == 1 and "A Ray worker failed: The actor is dead" in errors[0], run.stderr[-3000:]
    assert "run the same command again" in errors[0]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "to opt out" not in run.stderr  # Ray's token-auth notice for the local runtime


def test_an_error_raised_in_a_worker_comes_back_as_that_error(tiny_model_dir, tmp_path):
    """The model folder is missing on the workers' side (here: another path than the driver's):
    the worker's ModelNotFoundError reaches the user as itself (exit code 5), in one line."""
    from instemb_rag import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    docs = write_corpus(tmp_path / "docs", files=2, words=32)
    missing = tmp_path / "not-on-this-node"
    ray_options = RayOptions(address="local", workers=1, encoder_kwargs={"path": str(missing), "device": "cpu"})
    with pytest.raises(ModelNotFoundError) as raised:
        Indexer(encoder, IndexOptions(index_dir=tmp_path / "index", ray=ray_options, **CHUNK)).run(docs)
    message = str(raised.value)
    assert message.startswith("A Ray worker failed: Model folder not found: ") and str(missing) in message
    assert "\n" not in message
    assert exit_code_for(raised.value) == ExitCode.MODEL
