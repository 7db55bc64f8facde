"""Geometry distillation: a sentence encoder's embedding space into the student's, over cached prefixes.

A run (``geometry.teacher_encoder`` set in the config; ``instemb-rag train`` dispatches here):

1. reads the items (datasets/embedding_items.py) and embeds each with the teacher, cached on disk
   by teacher fingerprint and text (queries as ``instruction + " " + query``, how a sentence
   encoder reads an instruction);
2. loads the student (a checkpoint's LoRA goes on training live, training/continuation.py),
   freezes all but the top K layers and the final norm, and fills the frozen-prefix cache
   (training/prefix_cache.py): the states entering layer N - K, once per distinct input;
3. starts the projection head (models/projection.py) at the closed-form ridge map from the
   student's pooled embeddings to the teacher's, unless it resumes;
4. trains: each step runs the top K layers on cached states, pools, projects, and adds the
   weighted terms of losses/geometry.py; checkpoints (encoder + head + trainer state) every
   ``save_steps``, resumable with ``--resume`` at the same step, batch for batch.

Two optional terms keep what the starting checkpoint learned from labels while the head learns
the teacher's space: the anchor (its pooled similarity rows, training/geometry_anchor.py) and the
instruction-contrast records (training/geometry_contrast.py), both ranked on the blend that
ships (``geometry.train_input_weight``).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import torch

from ..datasets.embedding_items import DistillItem, read_items
from ..encoder.modules.forward import States
from ..encoder.modules.layer_split import run_top
from ..encoder.modules.projection import Projection
from ..losses.geometry import dense_cosine, group_infonce, relational_kl
from ..paths import instemb_home
from .args import TrainConfig
from .geometry_anchor import anchor_targets
from .geometry_contrast import ContrastOrder, contrast_term, load_contrast_order
from .geometry_data import GeometryOrder
from .prefix_cache import PrefixCache, input_key
from .run_files import FINAL_DIR, MetricsLog, prune_checkpoints, resume_step, save_checkpoint, write_run_info
from .state import latest_checkpoint
from .student import load_student, make_trainable
from .trainer import training_progress as _progress

TERMS = ("dense", "relational", "group", "anchor", "contrast")


def teacher_embeddings(config: TrainConfig, items: list[DistillItem], log=print) -> tuple[torch.Tensor, dict]:
    """[N, teacher dim] L2-normalised teacher embeddings of the items, and the teacher's identity."""
    from ..teachers import load_teacher, teacher_text
    from ..teachers.cache import cached_embeddings

    g = config.geometry
    teacher = load_teacher(g.teacher_encoder)
    folder = Path(g.teacher_embedding_dir) if g.teacher_embedding_dir else instemb_home() / "teacher_embeddings"
    texts = [teacher_text(item.text, item.instruction) for item in items]
    started = time.perf_counter()
    vectors = cached_embeddings(teacher, texts, folder)
    log(f"teacher {teacher.name}: {len(texts)} embeddings ready in {time.perf_counter() - started:.0f} s")
    identity = {"name": teacher.name, "fingerprint": teacher.fingerprint, "dimension": teacher.dimension}
    return torch.as_tensor(vectors, dtype=torch.float32), identity


def pooled_embeddings(encoder, cache: PrefixCache, inputs: list[tuple[str, str | None]]) -> torch.Tensor:
    """The student's pooled (un-projected) embeddings of cached inputs: the top K layers, then pooling."""
    batch = cache.batch(inputs, encoder.device)
    hidden = run_top(encoder.model, batch["hidden"], batch["attention_mask"], batch["position_ids"], cache.split)
    return encoder.pooling(hidden, batch["attention_mask"], encoder.lookahead_length)


def student_embeddings(encoder, cache: PrefixCache, items: list[DistillItem], indices: list[int]) -> torch.Tensor:
    """The student's (projected, un-normalised) embeddings of ``items[indices]`` from cached prefixes."""
    batch = cache.batch([items[i].student_input for i in indices], encoder.device)
    hidden = run_top(encoder.model, batch["hidden"], batch["attention_mask"], batch["position_ids"], cache.split)
    return encoder.embed_states(States(hidden, batch["attention_mask"]))


@torch.no_grad()
def fit_head(encoder, cache: PrefixCache, items, targets: torch.Tensor, config: TrainConfig, log=print) -> Projection:
    """The projection head at the ridge map from pooled student embeddings to the teacher's."""
    g = config.geometry
    head = Projection(encoder.hidden_size, targets.shape[1], bias=g.head_bias)
    bare = encoder.with_projection(None)
    # A seeded sample of the whole file (a file made by concatenation keeps its later sources in
    # the fit), then sorted by length so each batch pads little (the fit does not depend on order).
    sample = random.Random(config.training.seed).sample(range(len(items)), min(g.head_fit_items, len(items)))
    chosen = sorted(sample, key=lambda i: cache.index[_key(items[i])][2])
    pooled = torch.cat(
        [
            student_embeddings(bare, cache, items, chosen[start : start + 64]).float().cpu()
            for start in range(0, len(chosen), 64)
        ]
    )
    mean_cosine = head.fit_ridge(pooled, targets[chosen], g.head_ridge)
    log(f"projection head: ridge fit on {len(chosen)} items, mean cosine to the teacher {mean_cosine:.3f}")
    return head.to(encoder.device)


def shipped_head(head: Projection, config: TrainConfig) -> Projection:
    """The embedding that ships during training: the head blended with the pooled embedding at
    ``train_input_weight``. A view sharing the head's weights, so one is built per run."""
    weight = config.geometry.train_input_weight
    return head.with_input_weight(weight) if weight > 0 else head


def compute_terms(
    encoder,
    head: Projection,
    shipped: Projection,
    cache,
    items,
    batch: list[int],
    targets: torch.Tensor,
    config: TrainConfig,
    anchors: torch.Tensor | None = None,
    contrast_records: list | None = None,
) -> dict:
    """The weighted terms of one step. The teacher terms compare the head's map with the teacher;
    the ranking terms (group, contrast) rank with the embedding that ships (``shipped_head``);
    the anchor holds the pooled embedding."""
    g = config.geometry
    pooled = pooled_embeddings(encoder, cache, [items[i].student_input for i in batch])
    student = head.teacher_space(pooled)
    teacher = targets[batch].to(student.device)
    terms: dict[str, torch.Tensor] = {}
    if g.dense_weight > 0:
        terms["dense"] = dense_cosine(student, teacher)
    if g.relational_weight > 0:
        terms["relational"] = relational_kl(student, teacher, g.relational_temperature)
    if g.group_weight > 0:
        terms["group"] = _group_term(shipped(pooled), [items[i] for i in batch], g.group_temperature)
    if g.anchor_weight > 0 and anchors is not None:
        terms["anchor"] = relational_kl(pooled.float(), anchors[batch].to(pooled.device), g.anchor_temperature)
    if g.contrast_weight > 0 and contrast_records:
        embed = lambda inputs: shipped(pooled_embeddings(encoder, cache, inputs))  # noqa: E731
        terms["contrast"] = contrast_term(embed, contrast_records, g.contrast_temperature)
    terms["loss"] = sum(getattr(g, f"{name}_weight") * value for name, value in terms.items())
    return terms


def _group_term(student: torch.Tensor, batch_items: list[DistillItem], temperature: float) -> torch.Tensor:
    passage_rows = [row for row, item in enumerate(batch_items) if item.role == "passage"]
    row_of_id = {batch_items[row].id: position for position, row in enumerate(passage_rows)}
    query_rows = [row for row, item in enumerate(batch_items) if item.role == "query" and item.positive in row_of_id]
    if not query_rows or len(passage_rows) < 2:
        return student.sum() * 0.0
    positives = torch.tensor([row_of_id[batch_items[row].positive] for row in query_rows], device=student.device)
    return group_infonce(student[query_rows], student[passage_rows], positives, temperature)


def build_optimizer(parts, head: Projection, config: TrainConfig):
    from transformers import get_linear_schedule_with_warmup

    t, g = config.training, config.geometry
    backbone = [p for name, p in parts.named.items() if not name.startswith("projection.")]
    groups = [{"params": backbone, "lr": t.learning_rate, "weight_decay": t.weight_decay}]
    groups.append({"params": list(head.parameters()), "lr": g.head_learning_rate, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups)
    return optimizer, get_linear_schedule_with_warmup(optimizer, t.warmup_steps, t.max_steps)


def prepare_prefix_cache(
    config: TrainConfig, encoder, items: list[DistillItem], log=print, extra_inputs: list | None = None
) -> PrefixCache:
    g, m = config.geometry, config.model
    root = Path(g.prefix_cache_dir) if g.prefix_cache_dir else instemb_home() / "prefix_cache"
    cache = PrefixCache(root, encoder, m.trainable_top_layers, getattr(torch, g.prefix_cache_dtype))
    others = cache.describe_other_caches()
    if others and not cache.index:
        log(
            f"prefix cache: {len(others)} other cache(s) under {root} belong to another model, K or length; building {cache.key}"
        )
    started = time.perf_counter()
    cache.build([item.student_input for item in items] + list(extra_inputs or []), log=log)
    log(f"prefix cache ready ({len(cache.index)} inputs, {time.perf_counter() - started:.0f} s this run)")
    return cache


def train_geometry(config: TrainConfig, log=print) -> Path:
    """Train and return the final checkpoint folder (``<output_dir>/final``)."""
    from ..hashing import file_sha256

    t, g = config.training, config.geometry
    output_dir = Path(t.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(t.seed)
    device = torch.device("cuda" if t.device in ("auto", "cuda") and torch.cuda.is_available() else "cpu")
    items = read_items(g.texts_file, g.max_items)
    targets, teacher_identity = teacher_embeddings(config, items, log)

    encoder = load_student(config, device)
    parts = make_trainable(encoder, config)
    encoder.eval()  # no dropout layers; eval keeps the fingerprint cache semantics simple
    contrast = _contrast_order(config)
    cache = prepare_prefix_cache(config, encoder, items, log, contrast.inputs() if contrast else None)
    lengths = [cache.index[_key(item)][2] for item in items]
    order = GeometryOrder(items, lengths, t.batch_size, t.seed)
    data_info = {
        "texts_file": str(g.texts_file),
        "data_sha256": file_sha256(g.texts_file),
        "items": len(items),
        "seed": t.seed,
        "batches_per_epoch": order.per_epoch,
        "teacher": teacher_identity,
    }
    if contrast is not None:
        data_info["contrast"] = {
            "file": str(g.contrast_file),
            "sha256": file_sha256(g.contrast_file),
            "records": len(contrast.records),
            "batches_per_epoch": contrast.per_epoch,
        }
    anchors = _anchors(encoder, cache, items, lengths, data_info, output_dir, log) if g.anchor_weight > 0 else None
    resuming = t.resume and latest_checkpoint(output_dir) is not None
    head = Projection(encoder.hidden_size, targets.shape[1], bias=g.head_bias).to(device)
    if not resuming:
        head = fit_head(encoder, cache, items, targets, config, log)
    encoder = encoder.with_projection(head)
    parts.named.update({f"projection.{name}": p for name, p in head.named_parameters()})
    optimizer, scheduler = build_optimizer(parts, head, config)
    start_step = resume_step(config, parts, optimizer, scheduler, data_info)
    metrics = MetricsLog(output_dir, start_step)
    (output_dir / "train_config.json").write_text(json.dumps(config.to_dict(), indent=2))
    run_info = {"device": str(device), "items": len(items), "prefix_cache": str(cache.folder), **data_info}
    write_run_info(output_dir / "run_info.json", run_info, resumed_at=start_step)
    encoder.training_info = {"config": config.to_dict(), "data": data_info}
    log(
        f"training steps {start_step}..{t.max_steps} ({t.max_steps / order.per_epoch:.1f} epochs of {order.per_epoch} batches)"
    )
    batches = Batches(items, targets, order, anchors, contrast, head, config)
    _loop(encoder, parts, optimizer, scheduler, cache, batches, config, start_step, metrics, data_info)
    encoder.training_info = {**encoder.training_info, "steps": t.max_steps}
    final = output_dir / FINAL_DIR
    save_checkpoint(final, encoder, parts, config)
    metrics.plot()
    return final


def _key(item: DistillItem) -> str:
    return input_key(*item.student_input)


def _contrast_order(config: TrainConfig) -> ContrastOrder | None:
    g = config.geometry
    if g.contrast_file is None:
        return None
    return load_contrast_order(
        g.contrast_file, g.contrast_sets, g.contrast_max_per_set, g.contrast_batch_size, config.training.seed
    )


def _anchors(encoder, cache, items, lengths, data_info, output_dir: Path, log) -> torch.Tensor:
    """The starting checkpoint's pooled embeddings of every item (before any step or head)."""
    by_length = sorted(range(len(items)), key=lengths.__getitem__)
    batches = [by_length[start : start + 64] for start in range(0, len(by_length), 64)]
    inputs_key = f"{data_info['data_sha256']}:{len(items)}"
    return anchor_targets(
        output_dir,
        inputs_key,
        lambda batch: pooled_embeddings(encoder, cache, [items[i].student_input for i in batch]),
        (len(items), encoder.hidden_size),
        batches,
        log,
    )


class Batches:
    """What one step reads: the items' batch (with teacher and anchor targets) and the contrast records."""

    def __init__(self, items, targets, order: GeometryOrder, anchors, contrast: ContrastOrder | None, head, config):
        self.items, self.targets, self.order, self.anchors, self.contrast = items, targets, order, anchors, contrast
        self.head, self.shipped = head, shipped_head(head, config)  # the view shares the head's weights

    def terms(self, encoder, cache, step: int, config: TrainConfig) -> tuple[list[int], dict]:
        batch = self.order.step(step)
        records = self.contrast.step(step) if self.contrast is not None else None
        return batch, compute_terms(
            encoder, self.head, self.shipped, cache, self.items, batch, self.targets, config, self.anchors, records
        )


def _loop(encoder, parts, optimizer, scheduler, cache, batches: Batches, config, start_step, metrics, data_info):
    t = config.training
    params = list(parts.named.values())
    started = time.perf_counter() - (metrics.rows[-1]["elapsed_s"] if metrics.rows else 0.0)
    with _progress(t.show_progress) as bar:
        task = bar.add_task("train", total=t.max_steps, completed=start_step, loss="-")
        for step in range(start_step, t.max_steps):
            optimizer.zero_grad(set_to_none=True)
            batch, terms = batches.terms(encoder, cache, step, config)
            terms["loss"].backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, t.max_grad_norm)
            optimizer.step()
            scheduler.step()
            done = step + 1
            bar.update(task, completed=done, loss=f"{float(terms['loss'].detach()):.4f}")
            if done % t.logging_steps == 0 or done == t.max_steps:
                metrics.add(
                    {
                        "step": done,
                        **{name: round(float(value.detach()), 6) for name, value in terms.items()},
                        "grad_norm": round(float(grad_norm), 4),
                        "lr": scheduler.get_last_lr()[0],
                        "batch": len(batch),
                        "elapsed_s": round(time.perf_counter() - started, 2),
                    }
                )
            if done % t.save_steps == 0 or done == t.max_steps:
                info = {"step": done, **data_info}
                save_checkpoint(
                    output_dir_of(config) / f"checkpoint-{done}", encoder, parts, config, optimizer, scheduler, info
                )
                prune_checkpoints(output_dir_of(config), t.save_total_limit)
                metrics.plot()


def output_dir_of(config: TrainConfig) -> Path:
    return Path(config.training.output_dir)
