"""`instemb-rag index PATH --ray [ADDRESS]`: embedding on a Ray cluster (the `ray` extra).

Only *where chunks are embedded* differs from the single-process path (indexer.py): the driver
plans the run (content hashes against the catalog), then a Ray Data pipeline

    from_items(files to embed)
      -> map_batches(read_and_split)            tasks: LlamaIndex readers + the encoder's tokenizer
      -> map_batches(EmbedChunks, actor pool)   each actor loads the encoder once (num_gpus=1 per
                                                actor where the cluster has GPUs, CPU actors otherwise)

streams the vectors back, and the driver commits them file by file through the same catalog
and VectorStore code as the local path (``Indexer._commit_files``), syncing the store after
each group of files, so a killed run (driver or worker) leaves a store the next run completes.

Sinks: a store is written by the driver from the workers' outputs (FAISS, the embedded Qdrant
shard), unless its registration has the workers write it (stores/registry.py ``worker_writer``,
the open store's ``worker_sink``): a Qdrant server/cluster (``--qdrant-url``) is written by them in
batches, with point id = the chunk's content-derived id (catalog.content_chunk_id), so a
retried batch overwrites itself; the driver only deletes stale points, and the store is
marked as lagging the catalog for the whole run, so a kill leaves it to ``repair()``.

The encoder is never shipped: each actor loads it from the model reference and options
(``encoder.load_model``, where every reference is resolved), and checks that it gets the
driver's fingerprint.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
from collections.abc import Iterator, Sequence

import numpy as np

from ..encoder.protocol import LocalEncoder
from ..errors import FingerprintMismatchError
from ..net import unreachable_reason
from .catalog import Catalog, content_chunk_id
from .crash import crash_point
from .documents import Chunk, ChunkSplitter, chunking_tokenizer
from .errors import BadInputError, RayWorkerError
from .options import IndexOptions, RayOptions
from .ray_failures import (
    RAY_AUTH_HINT,
    RAY_AUTH_LOGGER,
    bounded_worker_retries,
    no_opt_out_notice,
    quiet_ray_data_console,
    worker_failure,
)
from .run_shared import EMBED_GROUP_CHUNKS, EmbeddedFile, FileTask, IndexReport, chunk_file, file_outcome

CHUNK_TASK_CPUS = 0.25  # reading + splitting is light next to embedding
CONNECT_TIMEOUT_S = 5.0
DEFAULT_RAY_PORT = 6379
DEFAULT_CLIENT_PORT = 10001
LOCAL = "local"


class RayUnreachableError(BadInputError):
    """The Ray address given cannot be reached (exit code 2, like any bad option)."""


# ---------------------------------------------------------------------- connecting
def split_address(address: str) -> tuple[str, int]:
    """(host, port) of a Ray address: HOST:PORT (GCS, default 6379) or ray://HOST:PORT (client, 10001)."""
    client = address.startswith("ray://")
    rest = address[len("ray://") :] if client else address
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    host = host.strip("[]")
    try:
        number = int(port) if port else (DEFAULT_CLIENT_PORT if client else DEFAULT_RAY_PORT)
    except ValueError:
        raise RayUnreachableError(
            f"--ray {address!r} is not a Ray address: use auto, HOST:PORT or ray://HOST:PORT."
        ) from None
    if not host:
        raise RayUnreachableError(f"--ray {address!r} is not a Ray address: use auto, HOST:PORT or ray://HOST:PORT.")
    return host, number


def check_ray_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A TCP connection to the head's GCS (or Ray client server) within ``timeout`` seconds, so a
    wrong address fails now instead of after Ray's own reconnection attempts."""
    host, port = split_address(address)
    reason = unreachable_reason(host, port, timeout)
    if reason is not None:
        raise RayUnreachableError(
            f"Cannot reach the Ray cluster at {address} ({host}:{port}: {reason}). Check that the "
            "head node is running (`ray status` on it), that this is its GCS address (`ray start --head` prints "
            "it; default port 6379, ray:// uses the client server port 10001) and that the port is open from "
            "this machine."
        )


def connect_ray(options: RayOptions) -> bool:
    """Start or join Ray; True when this call started it (and ``close`` shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    quiet_ray_data_console()
    # Ray 2.5x turns token authentication on for a new local runtime (the token goes to
    # ~/.ray/auth_token) and warns "set RAY_AUTH_MODE=disabled to opt out": the runtime lives for
    # this run only and the token is the safe default, so there is nothing to act on. Joining a
    # cluster, the mode must match the cluster's instead (RAY_AUTH_HINT, docs/scale-out.md).
    logging.getLogger(RAY_AUTH_LOGGER).addFilter(no_opt_out_notice)
    address = options.address
    if address in (None, "", LOCAL):
        workers = options.workers or 1
        cpus = max(os.cpu_count() or 1, math.ceil(workers * options.cpus_per_worker + CHUNK_TASK_CPUS))
        # address="local": a new runtime even where `ray start` left a cluster on this machine
        # (address=None would join that one, and then refuse num_cpus)
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
        return True
    check_ray_reachable(resolve_auto(address) if address == "auto" else address)
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, TimeoutError) as error:
        raise RayUnreachableError(
            f"Cannot join the Ray cluster at {address}: {error}. Check the address, that this machine runs the "
            f"same Ray and Python versions as the cluster, and {RAY_AUTH_HINT}"
        ) from error
    return True


def resolve_auto(address: str = "auto") -> str:
    """The address ``auto`` stands for: $RAY_ADDRESS, else the cluster `ray start` last started on
    this machine (the file Ray itself reads for address="auto")."""
    import tempfile

    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    current = os.path.join(tempfile.gettempdir(), "ray", "ray_current_cluster")
    try:
        with open(current, encoding="utf-8") as stream:
            found = stream.read().strip()
    except OSError:
        found = ""
    if not found:
        raise RayUnreachableError(
            "--ray auto found no running Ray cluster on this machine (no $RAY_ADDRESS, no "
            f"{current}). Start one (`ray start --head`), give its address (--ray HOST:PORT or "
            "ray://HOST:PORT), or pass --ray alone for a local runtime."
        )
    return found


def pool_size(options: RayOptions, gpus: float, cpus: float) -> int:
    if options.workers:
        return options.workers
    if gpus and (options.gpus_per_worker or 1):
        return max(1, int(gpus // (options.gpus_per_worker or 1)))
    return max(1, int((cpus - CHUNK_TASK_CPUS) // options.cpus_per_worker))


# ---------------------------------------------------------------------- the pipeline's stages
def read_and_split(batch: dict, tokenizer, chunk_size: int, chunk_overlap: int) -> dict:
    """Ray Data stage 1 (tasks): each file -> its chunks, one row per chunk; a file without
    chunks gives one row with ``count`` 0 and the reason (the driver records the skip)."""
    from pathlib import Path

    from .documents import ChunkSplitter

    splitter = ChunkSplitter(tokenizer, chunk_size, chunk_overlap)
    rows: dict[str, list] = {
        key: [] for key in ("task", "source", "count", "position", "text", "extra", "reason", "transient")
    }
    for task, source, path in zip(batch["task"], batch["source"], batch["path"]):
        chunks, reason, transient = chunk_file(Path(path), splitter)
        for chunk in chunks or [None]:
            rows["task"].append(int(task))
            rows["source"].append(str(source))
            rows["count"].append(len(chunks))
            rows["position"].append(chunk.position if chunk else -1)
            rows["text"].append(chunk.text if chunk else "")
            rows["extra"].append(json.dumps(chunk.extra if chunk else {}))
            rows["reason"].append(reason or "")
            rows["transient"].append(bool(transient))
    return {
        key: np.array(values, dtype=object if key in ("source", "text", "extra", "reason") else None)
        for key, values in rows.items()
    }


class EmbedChunks:
    """Ray Data stage 2 (an actor pool): loads the encoder once per actor, embeds each batch of
    chunks and, with a sink (a store its workers write: a Qdrant server collection), upserts the
    points itself (content-derived ids)."""

    def __init__(self, encoder_kwargs: dict, fingerprint: str, batch_size: int, threads: int, sink: dict | None = None):
        import torch

        from ..encoder import load_model

        if threads:
            torch.set_num_threads(threads)
        options = dict(encoder_kwargs)
        self.encoder = load_model(options.pop("path", None), **options)
        if self.encoder.fingerprint != fingerprint:
            raise FingerprintMismatchError(
                f"The encoder loaded on Ray node {socket.gethostname()} from {encoder_kwargs.get('path') or 'default'} "
                f"has fingerprint {self.encoder.fingerprint}, the driver's has {fingerprint}: give every node the same "
                "model files (same path, or the shipped default)."
            )
        self.batch_size = batch_size
        self.sink = None
        if sink is not None:  # the store's own writer (stores/registry.py: its worker_writer)
            from .stores.registry import open_worker_writer

            self.sink = open_worker_writer(sink, self.encoder.dimension)

    def __call__(self, batch: dict) -> dict:
        crash_point("embed_batch")  # INSTEMB_CRASH_AT=embed_batch:N: this worker dies like an OOM-killed one
        counts = np.asarray(batch["count"])
        real = np.flatnonzero(counts > 0)
        vectors = np.zeros((len(counts), self.encoder.dimension), np.float32)
        if len(real):
            texts = [str(batch["text"][i]) for i in real]
            vectors[real] = self.encoder.encode_documents(texts, batch_size=self.batch_size)
            if self.sink is not None:
                self._write(batch, real, vectors[real])
        return {**batch, "vector": vectors}

    def _write(self, batch: dict, rows: np.ndarray, vectors: np.ndarray) -> None:
        ids, payloads = [], []
        for i in rows:
            source, position = str(batch["source"][i]), int(batch["position"][i])
            ids.append(content_chunk_id(source, position, str(batch["text"][i]), json.loads(batch["extra"][i])))
            payloads.append({"source": source, "position": position})
        self.sink.upsert(ids, vectors, payloads)


# ---------------------------------------------------------------------- the driver's side
class WorkerWrittenStore:
    """A store whose points the Ray workers write (its ``worker_sink``: a Qdrant server collection):
    the driver's ``apply`` deletes the stale points only (and writes the rare chunk whose id was
    salted), and the store stays marked as lagging the catalog until ``finish`` so that a kill
    leaves it to ``repair()``."""

    def __init__(self, store, catalog: Catalog):
        self.store = store
        self.catalog = catalog
        catalog.set_store_generation(-1)  # from now on the collection may be ahead of the catalog

    def apply(
        self, removed: Sequence[int], added: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]
    ) -> None:
        self.store.delete(sorted(set(removed) - set(added)))
        rows = self.catalog.rows(added)
        salted = [
            n
            for n, chunk_id in enumerate(added)
            if content_chunk_id(
                rows[chunk_id].source, rows[chunk_id].position, rows[chunk_id].text, rows[chunk_id].extra
            )
            != chunk_id
        ]
        if salted:  # a worker wrote these chunks under the id another chunk holds: put both right
            self.store.upsert([added[n] for n in salted], vectors[salted], [payloads[n] for n in salted])
            self.catalog.set_store_generation(-1)

    def sync(self) -> None:
        self.store.flush()

    def __getattr__(self, name):
        return getattr(self.store, name)


class RayEmbedding:
    """The indexer's embedding step on a Ray cluster (see the module docstring)."""

    def __init__(self, encoder: LocalEncoder, options: IndexOptions):
        self.encoder = encoder
        self.options = options
        self.ray_options: RayOptions = options.ray
        self.started = connect_ray(self.ray_options)
        self.sink = None

    def bind_store(self, store, catalog: Catalog):
        """The store the driver commits to: as it is, or, where the store has its workers write the
        points (its ``worker_sink``, stores/registry.py), wrapped as a ``WorkerWrittenStore``."""
        from .stores.registry import worker_sink

        self.sink = worker_sink(store, self.options.stores)
        return store if self.sink is None else WorkerWrittenStore(store, catalog)

    def _dataset(self, tasks: list[FileTask]):
        import ray
        from ray.data import ActorPoolStrategy, DataContext

        context = DataContext.get_current()
        context.enable_progress_bars = False  # the command draws its own bar
        options = self.ray_options
        resources = ray.cluster_resources()
        gpus = float(resources.get("GPU", 0))
        gpus_per_worker = options.gpus_per_worker if options.gpus_per_worker is not None else (1.0 if gpus else 0.0)
        workers = pool_size(options, gpus if gpus_per_worker else 0.0, float(resources.get("CPU", 1)))
        items = [{"task": n, "source": task.source, "path": str(task.path)} for n, task in enumerate(tasks)]
        files_per_task = max(1, options.files_per_task)
        dataset = ray.data.from_items(items, override_num_blocks=max(1, math.ceil(len(items) / files_per_task)))
        dataset = dataset.map_batches(
            read_and_split,
            batch_size=files_per_task,
            batch_format="numpy",
            num_cpus=CHUNK_TASK_CPUS,
            fn_kwargs={
                "tokenizer": chunking_tokenizer(self.encoder),
                "chunk_size": self.options.chunk_size,
                "chunk_overlap": self.options.chunk_overlap,
            },
        )
        threads = 0 if gpus_per_worker else max(1, int(options.cpus_per_worker))
        with bounded_worker_retries() as retries:
            return dataset.map_batches(
                EmbedChunks,
                batch_size=self.options.batch_size * 4,
                batch_format="numpy",
                compute=ActorPoolStrategy(size=workers),
                num_gpus=gpus_per_worker,
                num_cpus=options.cpus_per_worker,
                **retries,
                fn_constructor_kwargs={
                    "encoder_kwargs": options.encoder_kwargs,
                    "fingerprint": self.encoder.fingerprint,
                    "batch_size": self.options.batch_size,
                    "threads": threads,
                    "sink": self.sink,
                },
            )

    def embedded(self, tasks: list[FileTask], report: IndexReport, progress) -> Iterator[list[EmbeddedFile]]:
        progress.start(None)  # chunk counts are known only as the readers finish
        arriving: dict[int, list] = {}
        group: list[EmbeddedFile] = []
        group_chunks = 0
        for batch in self._batches(tasks):
            for i in range(len(batch["task"])):
                number, count = int(batch["task"][i]), int(batch["count"][i])
                task = tasks[number]
                if count == 0:
                    item = file_outcome(
                        task,
                        [],
                        batch["reason"][i] or None,
                        bool(batch["transient"][i]),
                        report,
                        dimension=self.encoder.dimension,
                    )
                else:
                    rows = arriving.setdefault(number, [])
                    rows.append(
                        (
                            int(batch["position"][i]),
                            str(batch["text"][i]),
                            json.loads(batch["extra"][i]),
                            np.asarray(batch["vector"][i], np.float32),
                        )
                    )
                    if len(rows) < count:
                        continue
                    rows = sorted(arriving.pop(number), key=lambda row: row[0])
                    chunks = [Chunk(position, text, extra) for position, text, extra, _ in rows]
                    item = file_outcome(task, chunks, None, False, report, np.stack([row[3] for row in rows]))
                if item is None:
                    continue
                group.append(item)
                group_chunks += len(item.chunks)
                if group_chunks >= EMBED_GROUP_CHUNKS:
                    yield group
                    group, group_chunks = [], 0
        if group:
            yield group

    def _batches(self, tasks: list[FileTask]) -> Iterator[dict]:
        """The pipeline's output batches; a failure inside Ray becomes the one-line cause."""
        batches = iter(self._dataset(tasks).iter_batches(batch_size=None, batch_format="numpy"))
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except Exception as error:
                if not type(error).__module__.startswith("ray."):
                    raise
                raise worker_failure(error) from None
            yield batch

    def done(self, store) -> None: ...

    def close(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False


__all__ = [
    "ChunkSplitter",
    "EmbedChunks",
    "RayEmbedding",
    "RayOptions",
    "RayUnreachableError",
    "RayWorkerError",
    "WorkerWrittenStore",
    "check_ray_reachable",
    "connect_ray",
    "read_and_split",
]
