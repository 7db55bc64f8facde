"""The InstEmb distillation trainer: ``train(config) -> final checkpoint folder``.

One optimizer step = ``gradient_accumulation_steps`` micro-batches of ``batch_size`` records.
Per micro-batch the student runs:

    1. ``[x; s]``                 look-ahead states (distillation) and the |x| state (view 1)
    2. ``x`` with embedding dropout  view 2 (Llama has no dropout layers, so the SimCSE-style
                                   second mask is dropout on the input embeddings); the
                                   look-ahead slots are left out because a causal model's
                                   |x| state cannot see them
    3. ``y`` as input text        view 4 (InputLast of the answer)

View 3 and the distillation targets come from the teacher cache (see teacher_cache.py).
With ``model.frozen_prefix`` these passes run only the top K layers on cached states of the
frozen layers below (cached_student.py; view 2's dropout then acts on those states).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import checkpoint
from ..checkpoint import is_checkpoint
from ..choices import ParallelMode
from ..errors import InstEmbError
from ..losses import (
    instruction_retrieval_loss,
    kl_distillation_loss,
    mse_distillation_loss,
    multiview_supcon_loss,
)
from ..models.lora import apply_lora, plain_parameters
from . import distributed
from .args import TrainConfig
from .builders import build_data_folder
from .cached_student import prepare_student
from .continuation import attach_starting_adapter, check_continuation, starting_checkpoint
from .cpu_threads import set_training_threads
from .data_order import DataOrder, record_lengths
from .distributed import SINGLE_PROCESS, DistributedEnv, MicroBatchShard, local_indices, sum_over_ranks
from .negative_memory import NegativeMemory
from .records import RecordFile, TrainingRecord, open_records, source_set
from .state import latest_checkpoint, read_trainer_state, write_trainer_state
from .student import FullStudent, StudentPass, StudentRunner, needs_output_pass
from .teacher_cache import (
    TeacherCache,
    TeacherTargets,
    autocast_for,
    cache_key_fields,
    compute_teacher_targets,
    file_digest,
)

SAVE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
FINAL_DIR = "final"


# ---------------------------------------------------------------------------- data
def resolve_train_file(config: TrainConfig) -> Path:
    """The records file: ``data.train_file``, or records built from ``data.build_sets`` once."""
    data = config.data
    if data.train_file:
        return Path(data.train_file)
    build_dir = Path(data.build_dir or Path(config.training.output_dir) / "data")
    train_file = build_dir / "train.jsonl"
    if not train_file.is_file():
        build_data_folder(
            build_dir, data.data_root, data.build_sets, data.heldout_fraction, data.data_seed, data.max_per_set
        )
    return train_file


# ---------------------------------------------------------------------------- model
def load_student(config: TrainConfig, device: torch.device):
    """Float32 master weights (bf16 only inside autocast), on ``device``.

    A starting checkpoint's LoRA adapter is not merged: it runs live through peft from the
    start (the teacher included) and goes on training as an adapter (continuation.py).
    """
    from ..encoder import InstEmbEncoder, load_checkpoint

    model_args = config.model
    reference = model_args.model_name_or_path
    if reference and is_checkpoint(reference):
        encoder = load_checkpoint(reference, device="cpu", max_length=model_args.max_length, merge_lora=False)
        start = starting_checkpoint(reference)
        top = _trained_layers(len(decoder_layers(encoder.model)), model_args)
        check_continuation(
            start, model_args.lora_rank, model_args.lora_alpha, list(model_args.lora_target_modules), top
        )
        if encoder.lookahead.length != model_args.lookahead_length:
            raise InstEmbError(
                f"{reference} has {encoder.lookahead.length} look-ahead vectors but the config asks for "
                f"model.lookahead_length={model_args.lookahead_length}; make them equal."
            )
        attach_starting_adapter(
            encoder,
            start,
            top,
            model_args.lora_rank,
            model_args.lora_alpha,
            model_args.lora_dropout,
            list(model_args.lora_target_modules),
        )
    else:
        encoder = InstEmbEncoder.from_backbone(
            reference,
            lookahead_length=model_args.lookahead_length,
            pooling=model_args.pooling,
            max_length=model_args.max_length,
            device="cpu",
        )
    return encoder.to(device)


def teacher_identity(config: TrainConfig, encoder) -> str:
    """The teacher is the initial weights: the backbone, plus a checkpoint's files if we start from one."""
    reference = config.model.model_name_or_path
    identity = encoder.backbone.fingerprint
    if reference and is_checkpoint(reference):
        for path in sorted(Path(reference).rglob("*.safetensors")):
            if path.name != "lookahead.safetensors":
                identity += ":" + file_digest(path)[:16]
    return identity


@dataclass
class TrainableParts:
    named: dict[str, torch.nn.Parameter]  # every trainable tensor (for trainer state)
    adapted_names: list[str]  # plain backbone tensors written to adapted.safetensors
    peft_model: object | None  # set when LoRA is on


def decoder_layers(model) -> torch.nn.ModuleList:
    return model.base_model.layers


def _top_layers(layer_count: int, trainable_top_layers: int) -> list[int]:
    return list(range(max(0, layer_count - trainable_top_layers), layer_count))


def _trained_layers(layer_count: int, model_args) -> list[int]:
    """The decoder layers that train: the top ones, or every one for LoRA on all layers."""
    if model_args.lora_all_layers and model_args.lora_rank > 0:
        return list(range(layer_count))
    return _top_layers(layer_count, model_args.trainable_top_layers)


def enable_gradient_checkpointing(encoder) -> None:
    """Recompute decoder layers in backward (non-reentrant, so frozen inputs need no requires_grad)."""
    encoder.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def make_trainable(encoder, config: TrainConfig) -> TrainableParts:
    """Freeze the backbone, then open the top layers (fully or through LoRA) and the final norm."""
    model_args = config.model
    model = encoder.model
    for param in model.parameters():
        param.requires_grad_(False)
    layer_count = len(decoder_layers(model))
    top = _trained_layers(layer_count, model_args)
    start = starting_checkpoint(model_args.model_name_or_path)
    peft_model = encoder.adapter  # the starting checkpoint's adapter, attached live by load_student
    if model_args.lora_rank > 0 and top:
        if peft_model is None:
            peft_model = apply_lora(
                model,
                top,
                model_args.lora_rank,
                model_args.lora_alpha,
                model_args.lora_dropout,
                model_args.lora_target_modules,
            )
            encoder.attach_adapter(peft_model)
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.requires_grad_(True)
    elif top:
        for index in top:
            for param in decoder_layers(model)[index].parameters():
                param.requires_grad_(True)
    if model_args.train_final_norm:
        model.base_model.norm.weight.requires_grad_(True)
    # Frozen look-ahead vectors (training on from a checkpoint that has them) mean no input of the
    # frozen lower layers needs a gradient, so backward stops at the first trainable layer.
    encoder.lookahead.vectors.requires_grad_(model_args.train_lookahead)
    named = {f"lookahead.{n}": p for n, p in encoder.lookahead.named_parameters() if p.requires_grad}
    backbone_named = {n: p for n, p in model.named_parameters() if p.requires_grad}
    named.update({f"model.{n}": p for n, p in backbone_named.items()})
    adapted = [n for n in backbone_named if "lora_" not in n]
    # What the starting checkpoint adapted is written again even where this run leaves it alone.
    adapted += [n for n in (start.adapted_names if start else []) if n not in adapted]
    return TrainableParts(named, adapted, peft_model)


def refuse_sharded_adapted_tensors(encoder, parts: TrainableParts) -> None:
    """Rank 0 writes checkpoints alone, so every tensor it writes must be whole on it: a tensor a
    starting checkpoint adapted in a layer this run freezes (and FSDP shards) cannot be."""
    params = plain_parameters(encoder.model)
    missing = [name for name in parts.adapted_names if name not in params]
    if missing:
        raise InstEmbError(f"The starting checkpoint adapted {missing[0]}, which this model lacks.")
    sharded = [name for name in parts.adapted_names if distributed.is_sharded(params[name])]
    if sharded:
        raise InstEmbError(
            f"training.parallel=fsdp shards {sharded[0]}, which the starting checkpoint adapted and "
            "this run freezes; train that layer too (model.trainable_top_layers) or use ddp."
        )


def build_optimizer(encoder, parts: TrainableParts, config: TrainConfig):
    from transformers import get_linear_schedule_with_warmup

    t = config.training
    backbone = [p for n, p in parts.named.items() if not n.startswith("lookahead.")]
    groups = []
    if encoder.lookahead.vectors.requires_grad:
        groups.append({"params": [encoder.lookahead.vectors], "lr": t.lookahead_learning_rate, "weight_decay": 0.0})
    if backbone:
        groups.append({"params": backbone, "lr": t.learning_rate, "weight_decay": t.weight_decay})
    optimizer = torch.optim.AdamW(groups)
    scheduler = get_linear_schedule_with_warmup(optimizer, t.warmup_steps, t.max_steps)
    return optimizer, scheduler


# ---------------------------------------------------------------------------- losses
def shared_targets(records: list[TrainingRecord], device) -> torch.Tensor:
    """[N, N] True where two records have the same output or the same query: not negatives."""
    outputs = [" ".join(r.output.split()).lower() for r in records]
    queries = [(r.text, r.instruction) for r in records]
    same = [
        [outputs[i] == outputs[j] or queries[i] == queries[j] for j in range(len(records))] for i in range(len(records))
    ]
    return torch.tensor(same, dtype=torch.bool, device=device)


def _contrastive_term(
    student: StudentRunner,
    records,
    query_pass: StudentPass,
    output_pass: StudentPass | None,
    targets: TeacherTargets,
    shared: torch.Tensor,
    config: TrainConfig,
    shard: MicroBatchShard,
) -> torch.Tensor:
    """The paper's multi-view SupCon (eq. 3) over the chosen views, at the last input token,
    over the whole micro-batch (the views of every rank's slice, gathered)."""
    t = config.training
    views = []
    for view in t.views:
        if view == "student_input":
            views.append(query_pass.at_input_last())
        elif view == "student_input_dropout":
            views.append(student.input_last_with_dropout(records, t.view_dropout))
        elif view == "teacher_input":
            views.append(targets.anchor)
        elif view == "student_output":
            views.append(output_pass.at_input_last())
    local_views = torch.stack([v.float() for v in views], dim=1)
    return multiview_supcon_loss(shard.gather(local_views), t.temperature, shared=shared)


def _retrieval_term(
    encoder,
    student: StudentRunner,
    records,
    query_pass: StudentPass,
    output_pass: StudentPass,
    shared: torch.Tensor,
    config: TrainConfig,
    shard: MicroBatchShard,
    memory: NegativeMemory | None = None,
) -> torch.Tensor:
    """Ranking on the pooled embeddings, with both kinds of hard negative (losses/retrieval.py)
    and, where kept, the memory of earlier documents; this micro-batch's documents join it after."""
    flipped = [(r.text, r.negative_instruction) for r in records if r.negative_instruction]
    extra_outputs = [(text, None) for r in records for text in r.negative_outputs]

    def pooled(pairs):
        return student.forward(pairs).pooled(encoder)

    stand_in = [(records[0].text, None)]
    negative_queries = shard.rows_of_pass(
        pooled, flipped, any(r.negative_instruction for r in shard.batch_records), stand_in
    )
    negative_outputs = shard.rows_of_pass(
        pooled, extra_outputs, any(r.negative_outputs for r in shard.batch_records), stand_in
    )
    documents = shard.gather(output_pass.pooled(encoder))
    device = documents.device
    remembered = memory.negatives(device) if memory is not None else None
    loss = instruction_retrieval_loss(
        shard.gather(query_pass.pooled(encoder)),
        documents,
        shared,
        config.training.retrieval_temperature,
        negative_outputs,
        negative_queries,
        remembered,
        memory.excluded(shard.batch_records, device) if remembered is not None else None,
    )
    if memory is not None:
        memory.push(documents, shard.batch_records)  # every rank gathered the same rows
    return loss


def distilled_positions(
    records: list[TrainingRecord], mask: torch.Tensor, distill_sets: list[str] | None
) -> torch.Tensor:
    """The look-ahead positions [B, L] the distillation term reads: every valid one, or with
    ``distill_sets`` only those of records built from these sets (a micro-batch with none of them
    gives a zero term)."""
    if distill_sets is None:
        return mask
    chosen = torch.tensor([source_set(record) in distill_sets for record in records], device=mask.device)
    return mask & chosen[:, None]


def compute_losses(
    encoder,
    records: list[TrainingRecord],
    targets: TeacherTargets | None,
    config: TrainConfig,
    shard: MicroBatchShard | None = None,
    memory: NegativeMemory | None = None,
    student: StudentRunner | None = None,
) -> dict:
    """Distillation + multi-view contrastive + pooled retrieval loss of one micro-batch; returns the terms.

    Under data parallelism ``records`` are this rank's slice of ``shard.batch_records``: the
    contrastive and retrieval terms are the micro-batch's (gathered views), the distillation
    term is this rank's share of the micro-batch mean (distributed.py). ``student`` runs the
    student's passes: the whole model (default), or the top layers on cached prefix states."""
    t = config.training
    shard = shard or MicroBatchShard.whole(records)
    student = student or FullStudent(encoder)
    query_pass = student.forward([(r.text, r.instruction) for r in records])
    rows = torch.arange(query_pass.hidden.shape[0], device=query_pass.hidden.device)
    student_lookahead = query_pass.hidden[rows[:, None], query_pass.lookahead_idx]  # [B, L, d]
    # Outputs are embedded as documents are at search time: no instruction, look-ahead slots. A
    # causal model's state at their last token does not see the slots, so the same pass gives
    # the SupCon output view (InputLast of y) and the pooled document embedding.
    output_pass = student.forward([(r.output, None) for r in records]) if needs_output_pass(config) else None
    shared = shared_targets(shard.batch_records, query_pass.hidden.device)
    terms: dict[str, torch.Tensor] = {}
    if t.distill_weight > 0:
        mask = distilled_positions(records, targets.mask, t.distill_sets)
        if t.distill_loss == "kl":
            head = encoder.model.get_output_embeddings()
            with torch.no_grad():
                teacher_logits = head(targets.lookahead.to(student_lookahead.dtype))
            distill = kl_distillation_loss(head(student_lookahead), teacher_logits, mask, t.kl_temperature)
        else:
            distill = mse_distillation_loss(student_lookahead, targets.lookahead, mask, t.mse_normalize_by_dim)
        terms["distill"] = shard.global_mean(distill, mask.sum())
    if t.contrastive_weight > 0:
        terms["contrastive"] = _contrastive_term(
            student, records, query_pass, output_pass, targets, shared, config, shard
        )
    if t.retrieval_weight > 0:
        terms["retrieval"] = _retrieval_term(
            encoder, student, records, query_pass, output_pass, shared, config, shard, memory
        )
    total = sum(
        (getattr(t, f"{name}_weight") * value for name, value in terms.items()),
        torch.zeros((), device=query_pass.hidden.device),
    )
    return {"loss": total, **terms}


# ---------------------------------------------------------------------------- saving
def save_checkpoint(
    folder: Path,
    encoder,
    parts: TrainableParts,
    config: TrainConfig,
    optimizer=None,
    scheduler=None,
    info: dict | None = None,
    memory: NegativeMemory | None = None,
) -> None:
    """An encoder checkpoint folder (loadable by InstEmbEncoder.from_pretrained), plus the
    trainer state (and the negative memory) when ``optimizer`` is given; written atomically as one folder."""
    saved = encoder.with_options(max_length=config.model.inference_max_length)  # the saved encoder's setting

    def trainer_state(staging: Path) -> None:
        if optimizer is not None:
            write_trainer_state(staging, parts.named, optimizer, scheduler, info or {})
            if memory is not None:
                memory.save(staging)

    checkpoint.save(
        saved, folder, trained=parts.adapted_names, dtype=SAVE_DTYPES[config.training.save_dtype], also=trainer_state
    )


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    found = sorted(
        (int(p.name.split("-", 1)[1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit()
    )
    for _, folder in found[: max(0, len(found) - keep)]:
        shutil.rmtree(folder, ignore_errors=True)


class MetricsLog:
    """metrics.jsonl (one line per logged step) and loss_curve.png, rewound on resume."""

    def __init__(self, output_dir: Path, resume_step: int):
        self.path = output_dir / "metrics.jsonl"
        self.rows: list[dict] = []
        if resume_step and self.path.is_file():
            self.rows = [r for r in map(json.loads, self.path.read_text().splitlines()) if r["step"] <= resume_step]
        self._rewrite()

    def _rewrite(self) -> None:
        self.path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))

    def add(self, row: dict) -> None:
        self.rows.append(row)
        with open(self.path, "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def plot(self) -> Path | None:
        if not self.rows:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 3.5))
        steps = [r["step"] for r in self.rows]
        for key in ("loss", "distill", "contrastive"):
            if key in self.rows[0]:
                axis.plot(steps, [r[key] for r in self.rows], label=key)
        axis.set_xlabel("optimizer step")
        axis.set_ylabel("loss")
        axis.legend()
        axis.grid(alpha=0.3)
        figure.tight_layout()
        out = self.path.with_name("loss_curve.png")
        figure.savefig(out, dpi=100)
        plt.close(figure)
        return out


# ---------------------------------------------------------------------------- the loop
def _progress(enabled: bool):
    from rich.progress import TextColumn

    from ..progress import counting_progress

    return counting_progress("training", TextColumn("loss {task.fields[loss]}"), enabled=enabled)


def reads_teacher(config: TrainConfig) -> bool:
    """Whether any loss term reads the teacher: distillation, or SupCon's teacher_input view. A
    retrieval-only run (e.g. a fit diagnostic) then skips the teacher pass entirely."""
    t = config.training
    return t.distill_weight > 0 or (t.contrastive_weight > 0 and "teacher_input" in t.views)


def prepare_teacher(
    config: TrainConfig,
    encoder,
    records,
    order: DataOrder,
    run_info: dict,
    env: DistributedEnv = SINGLE_PROCESS,
):
    """(cache, None) with every target the run will need computed up front, or, without the
    cache, (None, a frozen copy of the initial model) to run at every step.

    Under data parallelism each rank computes and caches the targets of its own slices only
    (one cache folder per rank and world size, as ranks write at once), so the teacher pass is
    split over the ranks too."""
    t = config.training
    length = encoder.lookahead.length
    if not reads_teacher(config):
        run_info["teacher_cache"] = {
            "skipped": "no loss term reads the teacher (distill_weight 0, no teacher_input view)"
        }
        return None, None
    if not t.teacher_cache:
        teacher = copy.deepcopy(encoder).eval()
        for param in teacher.parameters():
            param.requires_grad_(False)
        return None, teacher
    key_fields = cache_key_fields(encoder, teacher_identity(config, encoder), length, t.distill_content_words)
    if env.enabled:
        key_fields["rank_shard"] = f"{env.rank}/{env.world_size}"
    folder = t.teacher_cache_dir or Path(t.output_dir) / "teacher_cache"
    needed = sorted(
        {i for step in range(t.max_steps) for batch in order.step(step) for i in local_indices(batch, env)[0]}
    )
    cache = TeacherCache(folder, key_fields, length, encoder.hidden_size)
    encoder.eval()
    started = time.perf_counter()
    cache.ensure(
        encoder,
        records,
        needed,
        batch_size=t.batch_size,
        bf16=t.bf16,
        show_progress=t.show_progress and env.is_main,
        strip_stopwords=t.distill_content_words,
    )
    run_info["teacher_cache"] = {
        "path": str(cache.path),
        "computed_records": cache.computed_last,
        "seconds": round(time.perf_counter() - started, 2),
    }
    return cache, None


def write_run_info(path: Path, run_info: dict, resumed_at: int) -> None:
    """run_info.json of this invocation, which says where it started: ``start_step``,
    ``started_at`` (UTC) and ``config_sha256`` (of the train_config.json written beside it, so a
    resume with other settings shows). A resumed run keeps every earlier invocation, oldest
    first, under ``sessions`` (each with the same fields: where the teacher targets were
    computed, on which device), so the history grows by one entry per resume."""
    from datetime import datetime, timezone

    config_file = path.parent / "train_config.json"
    invocation = {
        **run_info,
        "start_step": resumed_at,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config_sha256": file_digest(config_file) if config_file.is_file() else None,
    }
    sessions = []
    if resumed_at and path.is_file():
        earlier = json.loads(path.read_text())
        sessions = earlier.pop("sessions", []) + [earlier]
    info = {**invocation, "resumed_at_step": resumed_at, "sessions": sessions} if resumed_at else invocation
    path.write_text(json.dumps(info, indent=2))


def resume_step(
    config: TrainConfig,
    parts: TrainableParts,
    optimizer,
    scheduler,
    data_info: dict,
    memory: NegativeMemory | None = None,
) -> int:
    """Restore the latest checkpoint's trainer state and negative memory (when resuming) and return its step."""
    last = latest_checkpoint(Path(config.training.output_dir)) if config.training.resume else None
    if last is None:
        return 0
    state = read_trainer_state(last, parts.named, optimizer, scheduler)
    if state.get("data_sha256") != data_info["data_sha256"] or state.get("seed") != data_info["seed"]:
        raise InstEmbError(
            f"Cannot resume from {last}: it was trained on other data or another seed. "
            "Use the same data and seed, or a new output_dir."
        )
    if memory is not None:
        memory.load(last)
    return int(state["step"])


# Terms whose per-rank values are shares of the micro-batch's value (summed over ranks to report it);
# the others are computed from gathered tensors and are the same on every rank.
RANK_SHARED_TERMS = ("distill",)


def _reported_terms(terms: dict, config: TrainConfig, env: DistributedEnv, device) -> dict[str, float]:
    """The micro-batch's loss terms as one process would compute them."""
    reported = {
        name: (sum_over_ranks(value.detach(), env, device) if name in RANK_SHARED_TERMS else float(value.detach()))
        for name, value in terms.items()
        if name != "loss"
    }
    if env.enabled:
        loss = sum(getattr(config.training, f"{name}_weight") * value for name, value in reported.items())
    else:
        loss = float(terms["loss"].detach())
    return {"loss": loss, **reported}


def run_step(
    encoder,
    config: TrainConfig,
    records,
    micro_batches: list[list[int]],
    cache,
    teacher,
    env: DistributedEnv = SINGLE_PROCESS,
    memory: NegativeMemory | None = None,
    student: StudentRunner | None = None,
) -> tuple[dict, int]:
    """Forward/backward over the micro-batches of one optimizer step (this rank's slice of each);
    returns the mean terms and input tokens of the whole step. ``student``: see compute_losses."""
    t = config.training
    length = encoder.lookahead.length
    sums: dict[str, float] = {}
    tokens = 0
    for chunk in micro_batches:
        local, contributes = local_indices(chunk, env)
        chunk_records = [records[i] for i in local]
        shard = MicroBatchShard(
            [records[i] for i in chunk] if env.enabled else chunk_records, chunk_records, contributes, env
        )
        if cache is not None:
            targets = cache.targets.select(local, encoder.device)
        elif teacher is None:  # no loss term reads the teacher (reads_teacher)
            targets = None
        else:
            targets = compute_teacher_targets(
                teacher, chunk_records, length, t.batch_size, t.bf16, t.distill_content_words
            )
            targets = targets.select(range(len(local)), encoder.device)
        with autocast_for(encoder.device, t.bf16):
            terms = compute_losses(encoder, chunk_records, targets, config, shard, memory, student)
        if terms["loss"].requires_grad:  # a rank the micro-batch did not reach may hold no graph
            (terms["loss"] / len(micro_batches)).backward()
        for name, value in _reported_terms(terms, config, env, encoder.device).items():
            sums[name] = sums.get(name, 0.0) + value / len(micro_batches)
        if contributes:
            tokens += sum(len(encoder.build_ids(r.text, r.instruction, length)) for r in chunk_records)
    return sums, int(sum_over_ranks(tokens, env, encoder.device))


def check_hard_negatives_have_a_loss(
    records: RecordFile | list[TrainingRecord], config: TrainConfig, train_file: Path
) -> None:
    """Hard negatives act through the retrieval term only; refuse to drop them silently."""
    carrying = (
        records.negative_carriers
        if isinstance(records, RecordFile)
        else sum(1 for r in records if r.negative_instruction or r.negative_outputs)
    )
    if carrying and config.training.retrieval_weight <= 0:
        raise InstEmbError(
            f"{train_file}: {carrying} records carry negative_instruction or negative_outputs, which only the "
            "retrieval loss reads, but training.retrieval_weight is 0. Set --set retrieval_weight=1.0 "
            "(or drop those fields)."
        )


def check_distill_sets_are_present(records: RecordFile, config: TrainConfig, train_file: Path) -> None:
    """A distill_sets name no record carries would silently switch distillation off for it."""
    missing = sorted(set(config.training.distill_sets or ()) - set(records.source_sets))
    if missing:
        raise InstEmbError(
            f"{train_file}: training.distill_sets names {missing}, but no record's source starts with that "
            f"set name (the sets here: {sorted(records.source_sets)}). Fix the names or drop them."
        )


def train(config: TrainConfig) -> Path:
    """Train and return the final checkpoint folder (``<output_dir>/final``).

    Launched by torchrun (RANK/WORLD_SIZE set), every rank runs this; see distributed.py."""
    config.validate()
    env, device, owns_group = distributed.start(config.training.device)
    try:
        final = _train(config, env, device)
        distributed.barrier(env)  # rank 0 may still be writing the final checkpoint
        return final
    finally:
        if owns_group:
            distributed.finish(env)


def _train(config: TrainConfig, env: DistributedEnv, device: torch.device) -> Path:
    t = config.training
    output_dir = Path(t.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    distributed.check_batch_fits(t.batch_size, env)
    torch.manual_seed(t.seed)

    if env.is_main:  # only rank 0 builds the records; the others read them once it is done
        resolve_train_file(config)
    distributed.barrier(env)
    train_file = resolve_train_file(config)
    records = open_records(train_file)  # streamed: validated in one pass, read again by index
    check_hard_negatives_have_a_loss(records, config, train_file)
    check_distill_sets_are_present(records, config, train_file)
    per_step = t.batch_size * t.gradient_accumulation_steps
    lengths = record_lengths(records) if t.bucket_by_length else None
    order = DataOrder(records.groups, t.batch_size, t.gradient_accumulation_steps, t.seed, lengths)
    encoder = load_student(config, device)
    run_info: dict = {"device": str(device), "records": len(records), "world_size": env.world_size}
    run_info["torch_threads"] = set_training_threads(device.type) or torch.get_num_threads()
    cache, teacher = prepare_teacher(config, encoder, records, order, run_info, env)

    parts = make_trainable(encoder, config)
    if t.gradient_checkpointing:
        enable_gradient_checkpointing(encoder)
    student = prepare_student(config, encoder, records, order, run_info, env)  # None: full passes
    if t.parallel == ParallelMode.fsdp.value:
        run_info["fsdp_sharded_parameters"] = distributed.shard_frozen_weights(
            encoder.model, decoder_layers(encoder.model), env, device, t.bf16
        )
        refuse_sharded_adapted_tensors(encoder, parts)
    optimizer, scheduler = build_optimizer(encoder, parts, config)
    data_info = {
        "train_file": str(train_file),
        "data_sha256": file_digest(train_file),
        "records": len(records),
        "seed": t.seed,
        "examples_per_step": per_step,
    }
    memory = NegativeMemory(t.negative_memory, encoder.dimension) if t.negative_memory else None
    start_step = resume_step(config, parts, optimizer, scheduler, data_info, memory)
    distributed.barrier(env)  # every rank has read the checkpoint before rank 0 writes new ones
    distributed.broadcast_from_main(list(parts.named.values()), env)
    distributed.reseed_for_rank(t.seed, start_step, env)
    metrics = MetricsLog(output_dir, start_step) if env.is_main else None
    if env.is_main:
        (output_dir / "train_config.json").write_text(json.dumps(config.to_dict(), indent=2))
        write_run_info(output_dir / "run_info.json", run_info, resumed_at=start_step)
    encoder.training_info = {"config": config.to_dict(), "data": data_info}

    encoder.train()
    # A resumed run's clock goes on from the last logged step, so elapsed_s is the run's total.
    started = time.perf_counter() - (metrics.rows[-1]["elapsed_s"] if metrics is not None and metrics.rows else 0.0)
    with _progress(t.show_progress and env.is_main) as bar:
        task = bar.add_task("train", total=t.max_steps, completed=start_step, loss="-")
        for step in range(start_step, t.max_steps):
            optimizer.zero_grad(set_to_none=True)
            sums, tokens = run_step(encoder, config, records, order.step(step), cache, teacher, env, memory, student)
            distributed.sum_gradients(list(parts.named.values()), env)
            grad_norm = torch.nn.utils.clip_grad_norm_(list(parts.named.values()), t.max_grad_norm)
            optimizer.step()
            scheduler.step()
            done = step + 1
            distributed.simulate_failure_if_asked(done, env)
            bar.update(task, completed=done, loss=f"{sums['loss']:.4f}")
            if metrics is not None and (done % t.logging_steps == 0 or done == t.max_steps):
                metrics.add(
                    {
                        "step": done,
                        **{k: round(v, 6) for k, v in sums.items()},
                        "grad_norm": round(float(grad_norm), 4),
                        "lr": scheduler.get_last_lr()[-1],
                        "input_tokens": tokens,
                        "elapsed_s": round(time.perf_counter() - started, 2),
                    }
                )
            if env.is_main and done % t.save_steps == 0 and done < t.max_steps:
                save_checkpoint(
                    output_dir / f"checkpoint-{done}",
                    encoder,
                    parts,
                    config,
                    optimizer,
                    scheduler,
                    {"step": done, **data_info},
                    memory,
                )
                prune_checkpoints(output_dir, t.save_total_limit)
                metrics.plot()
    encoder.eval()
    encoder.training_info = {**encoder.training_info, "steps": t.max_steps}
    final = output_dir / FINAL_DIR
    if env.is_main:
        save_checkpoint(
            output_dir / f"checkpoint-{t.max_steps}",
            encoder,
            parts,
            config,
            optimizer,
            scheduler,
            {"step": t.max_steps, **data_info},
            memory,
        )
        prune_checkpoints(output_dir, t.save_total_limit)
        save_checkpoint(final, encoder, parts, config)
        metrics.plot()
    return final
