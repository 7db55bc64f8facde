"""Data-parallel training under ``torchrun`` (and every launcher that sets its environment:
SLURM through ``srun torchrun``, Kubernetes' PyTorchJob, Ray Train's TorchTrainer).

One optimizer step is the same global batch whatever the world size: ``DataOrder`` yields the
step's micro-batches of ``training.batch_size`` records (the contrastive batch), and each rank
takes a contiguous slice of every micro-batch (``slice_bounds``). Every rank runs the student on
its slice only, then gathers the views, pooled embeddings and hard negatives of the whole
micro-batch (``gather_rows``: the local rows keep their autograd graph, the others are
constants). Each rank therefore computes the single-process loss value of the micro-batch, and
backward gives it exactly the part of the gradient that flows through its own rows; summing the
gradients over ranks (``sum_gradients``) gives the single-process gradient. Terms that are means
over the micro-batch's rows (distillation) are computed locally and rescaled to the global
mean (``MicroBatchShard.global_mean``), so their per-rank values also sum to the global one.

Why not ``torch.nn.parallel.DistributedDataParallel``: its reducer assumes one forward through
the wrapper per backward, while a training micro-batch runs several passes through the encoder's
submodules (query, output, dropout view, hard negatives) and needs a *sum* of the per-rank
gradients, not DDP's mean. Replicated weights plus one flattened all-reduce per optimizer step
is the same algorithm with fewer moving parts; with the frozen lower layers (and LoRA) the
trainable share is small, so there is little to overlap. FSDP (``training.parallel: fsdp``)
shards the decoder layers for models that do not fit one device (see ``shard_decoder_layers``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Sequence

import torch
import torch.distributed as dist

from ..errors import InstEmbError


# ---------------------------------------------------------------------------- environment
@dataclass(frozen=True)
class DistributedEnv:
    """Where this process sits: torchrun's RANK, WORLD_SIZE and LOCAL_RANK (all absent = one process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, metrics, reports and logs."""
        return self.rank == 0


SINGLE_PROCESS = DistributedEnv()


def detect_env(environ: dict[str, str] | None = None) -> DistributedEnv:
    environ = os.environ if environ is None else environ
    try:
        world_size = int(environ.get("WORLD_SIZE", "1"))
        rank = int(environ.get("RANK", "0"))
        local_rank = int(environ.get("LOCAL_RANK", str(rank)))
    except ValueError as exc:
        raise InstEmbError(f"RANK, WORLD_SIZE and LOCAL_RANK must be integers ({exc}).") from exc
    if world_size < 1 or not 0 <= rank < world_size:
        raise InstEmbError(f"RANK={rank} does not fit WORLD_SIZE={world_size}.")
    return DistributedEnv(rank, world_size, local_rank)


def start(device_request: str) -> tuple[DistributedEnv, torch.device, bool]:
    """Join the process group when launched by torchrun; return the env, this rank's device and
    whether this call created the group (a launcher such as Ray's TorchTrainer may have made it).

    CUDA ranks use NCCL and the GPU ``cuda:LOCAL_RANK``; CPU ranks use gloo."""
    from ..encoder.device import resolve_device

    env = detect_env()
    device = resolve_device(device_request)
    if not env.enabled:
        return env, device, False
    if device.type == "cuda":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise InstEmbError(f"Distributed training runs on cuda or cpu, not {device.type}.")
    if dist.is_initialized():
        return env, device, False
    backend = "nccl" if device.type == "cuda" else "gloo"
    # A long timeout: rank 0 may build the data set, or one rank compute more teacher targets, while others wait.
    dist.init_process_group(backend, rank=env.rank, world_size=env.world_size, timeout=timedelta(hours=2))
    return env, device, True


def check_batch_fits(batch_size: int, env: DistributedEnv) -> None:
    """training.batch_size is the global micro-batch; every rank needs at least one of its records."""
    if batch_size < env.world_size:
        raise InstEmbError(
            f"training.batch_size={batch_size} is the micro-batch of all {env.world_size} ranks together "
            f"(the contrastive batch); make it at least the world size, e.g. {8 * env.world_size}."
        )


def finish(env: DistributedEnv) -> None:
    if env.enabled and dist.is_initialized():
        dist.destroy_process_group()


def barrier(env: DistributedEnv) -> None:
    if env.enabled:
        dist.barrier()


# ---------------------------------------------------------------------------- the global batch
def slice_bounds(size: int, rank: int, world_size: int) -> tuple[int, int]:
    """This rank's contiguous [start, stop) of ``size`` rows; the first ``size % world`` ranks take one more."""
    base, extra = divmod(size, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def local_indices(micro_batch: Sequence[int], env: DistributedEnv) -> tuple[list[int], bool]:
    """The record indices this rank runs, and whether they count.

    A micro-batch with fewer records than ranks (the end of an epoch) leaves some ranks without
    rows; those run the batch's last record so every rank goes through the same collectives,
    and contribute no rows to the gathers and nothing to the gradient."""
    start, stop = slice_bounds(len(micro_batch), env.rank, env.world_size)
    if start == stop:
        return [micro_batch[-1]], False
    return list(micro_batch[start:stop]), True


class _GatherRows(torch.autograd.Function):
    """All-gather along dim 0 with per-rank row counts; backward returns the local rows' gradient.

    Every rank computes the same loss from the gathered tensor, so the gradient of its own copy
    with respect to its own rows is already the full one: no communication in backward."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, sizes: list[int], rank: int) -> torch.Tensor:
        ctx.start, ctx.stop = sum(sizes[:rank]), sum(sizes[: rank + 1])
        width = max(sizes)
        padded = local.new_zeros((width, *local.shape[1:]))
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        return torch.cat([part[:count] for part, count in zip(parts, sizes)])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad[ctx.start : ctx.stop], None, None


def gather_rows(local: torch.Tensor, env: DistributedEnv) -> torch.Tensor:
    """Concatenate every rank's rows in rank order (variable row counts allowed)."""
    if not env.enabled:
        return local
    count = torch.tensor([local.shape[0]], dtype=torch.long, device=local.device)
    counts = [torch.zeros_like(count) for _ in range(env.world_size)]
    dist.all_gather(counts, count)
    return _GatherRows.apply(local, [int(c) for c in counts], env.rank)


def sum_over_ranks(value: float | torch.Tensor, env: DistributedEnv, device: torch.device | str = "cpu") -> float:
    """A number summed over ranks (no gradient)."""
    if not env.enabled:
        return float(value)
    total = torch.as_tensor(float(value), dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return float(total)


@dataclass
class MicroBatchShard:
    """One micro-batch as a rank sees it: all its records, the slice this rank runs, and the
    collectives that turn local tensors into the micro-batch's tensors."""

    batch_records: list  # every record of the micro-batch (the ``shared`` masks need them all)
    local_records: list  # the records this rank runs the student on
    contributes: bool = True  # False: a stand-in slice on a rank the micro-batch did not reach
    env: DistributedEnv = field(default_factory=lambda: SINGLE_PROCESS)

    @classmethod
    def whole(cls, records: list) -> MicroBatchShard:
        return cls(list(records), list(records))

    def gather(self, local: torch.Tensor) -> torch.Tensor:
        """[b, ...] of this rank -> [B, ...] of the micro-batch (gradient to the local rows)."""
        if not self.env.enabled:
            return local
        return gather_rows(local if self.contributes else local[:0], self.env)

    def rows_of_pass(self, forward, items: list, anyone_has: bool, stand_in: list) -> torch.Tensor | None:
        """``forward(items)`` for extra rows (hard negatives) gathered over the micro-batch; None when
        no rank has any. Under data parallelism a rank without items still runs ``forward`` on a
        stand-in and gathers none of its rows: FSDP's sharded layers gather their weights
        collectively, so every rank must run the same passes."""
        if not self.env.enabled:
            return forward(items) if items else None
        if not anyone_has:
            return None
        rows = forward(items) if items else forward(stand_in)[:0]
        return self.gather(rows)

    def global_mean(self, local_mean: torch.Tensor, local_weight: torch.Tensor) -> torch.Tensor:
        """This rank's share of a mean over the whole micro-batch: local mean x local weight / global
        weight, so the shares sum over ranks to the single-process mean (and so do their gradients)."""
        if not self.env.enabled:
            return local_mean
        weight = local_weight.detach().double() if self.contributes else torch.zeros((), dtype=torch.float64)
        total = weight.clone().to(local_mean.device)
        dist.all_reduce(total)
        return local_mean * (weight.to(local_mean.device) / total.clamp(min=1.0)).to(local_mean.dtype)


# ---------------------------------------------------------------------------- gradients and weights
def sum_gradients(params: Sequence[torch.nn.Parameter], env: DistributedEnv) -> None:
    """All-reduce (sum) the gradients of the replicated trainable parameters as one flat buffer.

    A parameter no rank gave a gradient keeps None (AdamW then leaves it alone, as one process
    would); one flag a parameter rides along in the buffer to tell."""
    if not env.enabled:
        return
    replicated = [p for p in params if not is_sharded(p)]
    if not replicated:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in replicated]
    flags = torch.tensor([float(p.grad is not None) for p in replicated], device=grads[0].device)
    flat = torch.cat([g.reshape(-1).float() for g in grads] + [flags])
    dist.all_reduce(flat)
    offset = 0
    for index, (param, grad) in enumerate(zip(replicated, grads)):
        size = grad.numel()
        had_gradient = bool(flat[flat.numel() - len(replicated) + index] > 0)
        param.grad = flat[offset : offset + size].view_as(param).to(param.dtype) if had_gradient else None
        offset += size


def broadcast_from_main(params: Sequence[torch.nn.Parameter], env: DistributedEnv) -> None:
    """Make every rank start from rank 0's trainable weights (random LoRA / look-ahead inits included)."""
    if not env.enabled:
        return
    with torch.no_grad():
        for param in params:
            if not is_sharded(param):
                dist.broadcast(param.data, src=0)


def reseed_for_rank(seed: int, step: int, env: DistributedEnv) -> None:
    """Rank 0 keeps the run's generator (saved in checkpoints); the others draw their own dropout
    masks from a seed of (seed, rank, step), so views are not correlated across ranks."""
    if env.rank > 0:
        torch.manual_seed(seed + 1_000_003 * env.rank + step)


# Fault injection for the resume tests: "RANK:STEP" makes that rank die (SIGKILL, as a lost node
# would) right after the optimizer step STEP, so the launcher tears the job down mid-run.
KILL_AFTER_STEP_ENV = "INSTEMB_TEST_KILL_RANK_AFTER_STEP"


def simulate_failure_if_asked(step: int, env: DistributedEnv) -> None:
    wanted = os.environ.get(KILL_AFTER_STEP_ENV)
    if wanted and wanted == f"{env.rank}:{step}":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


# ---------------------------------------------------------------------------- FSDP
# Parameters below this size stay replicated: sharding a norm saves nothing and costs a collective.
SHARD_MIN_PARAMS = 1 << 12


def _frozen_units(module: torch.nn.Module, tied: set[int], found: list[torch.nn.Module]) -> None:
    """The coarsest submodules whose parameters are all frozen, untied and large enough to shard;
    a module that holds trainable parameters (a top layer, a LoRA-wrapped projection) is searched
    further, so its frozen base weights are sharded and only the trainable parts stay replicated."""
    params = list(module.parameters())
    if not params:
        return
    frozen = not any(p.requires_grad for p in params)
    if frozen and not any(id(p) in tied for p in params):
        if sum(p.numel() for p in params) >= SHARD_MIN_PARAMS:
            found.append(module)
        return
    for child in module.children():
        _frozen_units(child, tied, found)


def shard_frozen_weights(
    model: torch.nn.Module,
    decoder_layers: Sequence[torch.nn.Module],
    env: DistributedEnv,
    device: torch.device,
    bf16: bool,
) -> int:
    """FSDP (``training.parallel: fsdp``): fully shard every frozen weight of the decoder layers and
    of untied embeddings / LM head over the ranks (gathered per layer for compute, in bf16 on CUDA,
    and freed again after use, in forward and backward). The trainable parameters (look-ahead
    vectors, LoRA, trained top layers, final norm) stay replicated, so checkpoints, the optimizer
    and gradient clipping are those of DDP. Returns how many parameters were sharded."""
    if not env.enabled:
        return 0
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    seen: dict[int, int] = {}
    for _, param in model.named_parameters(remove_duplicate=False):
        seen[id(param)] = seen.get(id(param), 0) + 1
    tied = {key for key, count in seen.items() if count > 1}
    units: list[torch.nn.Module] = []
    candidates = list(decoder_layers) + [model.get_input_embeddings(), model.get_output_embeddings()]
    for candidate in candidates:
        if candidate is not None:
            _frozen_units(candidate, tied, units)
    compute_dtype = torch.bfloat16 if (bf16 and device.type == "cuda") else None
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype)
    for unit in units:
        fully_shard(unit, mp_policy=policy, reshard_after_forward=True)
    return sum(p.numel() for unit in units for p in unit.parameters())


def is_sharded(tensor: torch.Tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - very old torch
        return False
    return isinstance(tensor, DTensor)


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a sharded (FSDP) parameter or state; a collective every rank must call."""
    return tensor.full_tensor() if is_sharded(tensor) else tensor
