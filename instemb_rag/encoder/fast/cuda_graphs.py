"""The CUDA path of ``encode_pooled``: one template call per batch, shape buckets run as CUDA graphs.

On a GPU a small model's query is launch-bound: eager PyTorch launches about a thousand kernels a
forward and the GPU idles between them (issue 57). Here a call

1. builds every input's ids with one tokenizer call for the texts and one for the distinct
   instructions (``PromptTemplate.build_ids_batch``; the ids equal ``build_ids``'),
2. cuts them into batches (batch_plan.py): graph buckets (static batch x length) for what fits
   them, eager batches chosen by tokens for longer inputs,
3. runs each batch through ``static_outputs``, the forward without a host read (backbone under a
   shared causal mask, look-ahead vectors by gather, pooling, projection): a bucket's forward is
   captured once as a CUDA graph on its first use (its inputs are static buffers, padded rows
   and positions masked out of the pooling) and replayed after, one launch per forward,
4. copies each batch's ids in with one host-to-device copy and all results out with one
   device-to-host copy.

Right padding only: a valid position attends to earlier positions only, all of them valid, so
the padding needs no mask inside the backbone, and pooling reads the rows' own mask. The
embeddings equal the eager path's within the dtype's rounding (tests/encoder/fast/test_cuda_graphs.py).

It runs on CUDA only (``encode_on_cuda`` answers None elsewhere, and the CPU path is the one it
always was); ``set_cuda_options(encoder, graphs=False)`` or ``INSTEMB_CUDA_GRAPHS=0`` keeps the
batching and drops the graphs, ``enabled=False`` / ``INSTEMB_CUDA_FAST=0`` drops the whole path.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Sequence

import torch

from ..modules.forward import causal_mask, run_backbone_static
from .batch_plan import CudaOptions, PlannedBatch, cuda_options, plan_batches

__all__ = ["CudaRunner", "describe_cuda_path", "encode_fast", "encode_on_cuda", "fast_path_applies", "static_outputs"]

log = logging.getLogger(__name__)


def static_outputs(encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[pooled | embedding] as float32 [B, hidden + dimension] of right-padded rows already on the
    device: the capturable forward (no host read, no CPU tensor, no shape read back)."""
    hidden = run_backbone_static(encoder.model, encoder.lookahead.vectors, input_ids, mask)
    pooled = encoder.pooling(hidden, attention_mask, encoder.lookahead_length)
    return torch.cat([pooled.float(), encoder.project(pooled).float()], dim=-1)


def fast_path_applies(encoder) -> bool:
    """The CUDA path runs this encoder: on CUDA, switched on, no live adapter (training), and a
    backbone without a sliding window shorter than the encoder's inputs (its mask is built here)."""
    if encoder.device.type != "cuda" or not cuda_options(encoder).enabled or encoder.adapter is not None:
        return False
    config = encoder.model.config
    window = getattr(config, "sliding_window", None) if getattr(config, "use_sliding_window", True) else None
    return not window or window >= encoder.max_length


def describe_cuda_path(encoder) -> str | None:
    """One line for the load message: what the CUDA path does and what its first use costs (an
    encoder of parts: its query LLM's); None where it does not run (the CPU)."""
    from .compiled import llm_parts

    encoder = llm_parts(encoder)[-1]
    if not fast_path_applies(encoder):
        return None
    options = cuda_options(encoder)
    if not options.graphs:
        return f"CUDA graphs off; batches of up to {options.batch_tokens} tokens"
    return (
        f"queries run as CUDA graphs in shape buckets (batch {'/'.join(map(str, options.graph_batches))} x length "
        f"{'/'.join(map(str, options.graph_lengths))}); each is captured on its first use (three forward passes, "
        "its time is logged); INSTEMB_CUDA_GRAPHS=0 turns them off"
    )


class _Bucket:
    """One captured shape: static input buffer [ids; mask], the graph, its static output."""

    def __init__(self, runner: CudaRunner, rows: int, length: int):
        device = runner.encoder.device
        self.inputs = torch.zeros((2, rows, length), dtype=torch.long, device=device)
        self.graph = None
        if not runner.capture:  # CPU tests (or a capture that failed): the same static buffers, run eagerly
            return
        try:
            self._capture(runner, device)
        except RuntimeError as error:  # a backbone that syncs with the host: eager from here on, said once
            self.graph = None
            runner.capture = False
            runner.capture_error = str(error).splitlines()[0] if str(error) else type(error).__name__
            warnings.warn(
                f"CUDA graph capture failed ({runner.capture_error}); this encoder runs eagerly.", stacklevel=2
            )

    def _capture(self, runner: CudaRunner, device: torch.device) -> None:
        stream = torch.cuda.Stream(device=device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm-up off the capture: lazy inits, cuBLAS workspaces, compilation
            for _ in range(2):
                runner.forward(self.inputs[0], self.inputs[1])
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=runner.pool, capture_error_mode="thread_local"):
            self.output = runner.forward(self.inputs[0], self.inputs[1])
        self.graph = graph
        runner.pool = graph.pool()  # buckets share one memory pool: they never run at once

    def run(self, runner: CudaRunner, host: torch.Tensor) -> torch.Tensor:
        self.inputs.copy_(host, non_blocking=True)  # the one host-to-device copy of this batch
        if self.graph is None:
            return runner.forward(self.inputs[0], self.inputs[1])
        self.graph.replay()
        return self.output.clone()  # the next replay overwrites the static output


class CudaRunner:
    """An encoder's buckets and masks; one lock, so threads (the server's worker, a search) never
    share the static buffers at once. Weights moved or replaced drop the captured graphs."""

    def __init__(self, encoder, capture: bool = True):
        self.encoder = encoder
        self.capture = capture
        self.lock = threading.Lock()
        self.buckets: dict[tuple[int, int], _Bucket] = {}
        self.masks: dict[int, torch.Tensor] = {}
        self.capture_seconds: dict[str, float] = {}
        self.capture_error: str | None = None
        self.pool = None
        self.signature = self._signature()

    def __deepcopy__(self, memo) -> None:
        """A copy of the encoder (the trainer's frozen LLM) starts without graphs: it makes its own."""
        return None

    def _signature(self) -> tuple:
        embedding = self.encoder.model.get_input_embeddings().weight
        return (id(self.encoder.model), embedding.data_ptr(), self.encoder.lookahead.vectors.data_ptr())

    def check_weights(self) -> None:
        if self._signature() != self.signature:
            self.buckets.clear()
            self.pool = None
            self.signature = self._signature()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep_mask: bool = True) -> torch.Tensor:
        """``static_outputs`` under the causal mask of this width (kept for bucket widths only:
        eager batches come in every width)."""
        width = input_ids.shape[1]
        mask = self.masks.get(width)
        if mask is None:
            mask = causal_mask(width, input_ids.device)
            if keep_mask:
                self.masks[width] = mask
        return static_outputs(self.encoder, input_ids, attention_mask, mask)

    def bucket(self, shape: tuple[int, int]) -> _Bucket:
        if shape not in self.buckets:
            started = time.perf_counter()
            self.buckets[shape] = _Bucket(self, *shape)
            seconds = time.perf_counter() - started
            self.capture_seconds[f"{shape[0]}x{shape[1]}"] = round(seconds, 4)
            if self.capture:
                log.info("CUDA graph for batch %d x length %d captured in %.2f s", *shape, seconds)
        return self.buckets[shape]

    def run(self, batch: PlannedBatch, id_lists: list[list[int]], pad_id: int) -> torch.Tensor:
        """[rows, hidden + dimension] on the device for one planned batch (rows in its order)."""
        rows, width = batch.bucket if batch.bucket is not None else (len(batch.rows), batch.width)
        host = _host_inputs([id_lists[i] for i in batch.rows], rows, width, pad_id)
        if self.encoder.device.type == "cuda":
            # Pinned, so the copy waits for nothing: the host prepares and launches the next batch
            # while the device runs this one (a copy from pageable memory syncs the stream first).
            host = host.pin_memory()
        if batch.bucket is not None:
            return self.bucket(batch.bucket).run(self, host)[: len(batch.rows)]
        inputs = host.to(self.encoder.device, non_blocking=True)  # the one host-to-device copy of this batch
        return self.forward(inputs[0], inputs[1], keep_mask=False)


def _host_inputs(id_lists: list[list[int]], rows: int, width: int, pad_id: int) -> torch.Tensor:
    """[2, rows, width] long on the CPU: right-padded ids, then the mask (extra rows all padding)."""
    lengths = torch.tensor([len(ids) for ids in id_lists] + [0] * (rows - len(id_lists)))
    padded = [ids + [pad_id] * (width - len(ids)) for ids in id_lists] + [[pad_id] * width] * (rows - len(id_lists))
    ids = torch.tensor(padded, dtype=torch.long)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return torch.stack([ids, mask])


_RUNNERS = threading.Lock()


def runner_of(encoder) -> CudaRunner:
    """The encoder's runner (made once; a view of it, another encoder, has its own)."""
    with _RUNNERS:
        runner = encoder.__dict__.get("_cuda_runner")
        if runner is None:
            runner = encoder.__dict__["_cuda_runner"] = CudaRunner(encoder)
        return runner


def _progress(enabled: bool, total: int):
    """advance(n) for the "embedding" bar (advance(None) closes it); a no-op when not shown, so a
    single query pays nothing for it."""
    if not enabled:
        return lambda count: None
    from ...progress import counting_progress

    bar = counting_progress("embedding")
    bar.start()
    task = bar.add_task("embed", total=total)

    def advance(count: int | None) -> None:
        if count is None:
            bar.stop()
        else:
            bar.advance(task, count)

    return advance


def encode_on_cuda(
    encoder, texts: Sequence[str], instructions: Sequence[str | None], show_progress: bool = False
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``encode_pooled``'s result through the CUDA path, or None where it does not apply (the CPU)."""
    if not fast_path_applies(encoder):
        return None
    return encode_fast(encoder, texts, instructions, show_progress, runner_of(encoder), cuda_options(encoder))


def encode_fast(
    encoder,
    texts: Sequence[str],
    instructions: Sequence[str | None],
    show_progress: bool,
    runner: CudaRunner,
    options: CudaOptions,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(pooled [N, hidden], embeddings [N, dimension]) float32 on the CPU, in input order."""
    id_lists = encoder.template.build_ids_batch(
        encoder.tokenizer, list(texts), list(instructions), encoder.lookahead_length, encoder.max_length
    )
    pad_id = encoder.tokenizer.pad_token_id if encoder.tokenizer.pad_token_id is not None else 0
    planned = plan_batches([len(ids) for ids in id_lists], options, graphs=options.graphs)
    advance = _progress(show_progress, len(id_lists))
    try:
        with runner.lock:
            runner.check_weights()
            outputs = []
            for batch in planned:
                outputs.append(runner.run(batch, id_lists, pad_id))
                advance(len(batch.rows))
            merged = torch.cat(outputs).cpu()  # the one device-to-host copy
    finally:
        advance(None)
    order = torch.tensor([row for batch in planned for row in batch.rows])
    result = torch.empty_like(merged)
    result[order] = merged
    hidden = encoder.hidden_size
    return result[:, :hidden].contiguous(), result[:, hidden:].contiguous()
