"""The geometry objective (``GeometryObjective``), plugged into the one trainer loop (trainer.py).

A run (``geometry.teacher_encoder`` set in the config; objectives.py selects this objective):

1. reads the embedding items (instemb_rag/datasets/embedding_items.py) and embeds each with the
   teacher, cached on disk by teacher fingerprint and text (queries as ``instruction + " " +
   query``, how a sentence encoder reads an instruction);
2. loads the student (an LLM folder's LoRA goes on training live, training/continuation.py),
   freezes all but the top K layers and the final norm, and fills the frozen-prefix cache
   (training/prefix_cache.py): the states entering layer N - K, once per distinct input;
3. starts the projection head (encoder/modules/projection.py) at the closed-form ridge map from
   the student's pooled embeddings to the teacher's, unless it resumes;
4. each step runs the top K layers on cached states, pools, projects, and adds the weighted
   terms of terms.py; the loop checkpoints (encoder + head + trainer state) every ``save_steps``.

Two optional terms keep what the starting LLM learned from labels while the head learns
the teacher's space: the anchor (its pooled similarity rows, anchor.py) and the
instruction-contrast records (contrast.py), both ranked on the blend that ships
(``geometry.train_input_weight``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...datasets.embedding_items import read_items
from ...encoder.modules.projection import Projection
from ...hashing import file_sha256
from ..batch_order import BatchOrder
from ..common_args import RunConfig
from ..objective import Objective, Prepared, StepResult
from ..prefix_cache import pooled_embeddings
from ..state import latest_checkpoint
from ..student import load_student, make_trainable
from .anchor import anchor_targets
from .contrast import ContrastBatches, load_contrast_order
from .terms import (
    build_optimizer,
    compute_terms,
    fit_head,
    item_key,
    prepare_prefix_cache,
    shipped_head,
    teacher_embeddings,
    term_weights,
)

__all__ = ["GeometryObjective"]


class GeometryObjective(Objective):
    name = "geometry"
    logged_lr_group = 0

    @staticmethod
    def term_weights(config: RunConfig) -> dict[str, float]:
        return term_weights(config)

    def prepare(self) -> Prepared:
        config, device, log = self.config, self.device, self.log
        t, g = config.training, config.geometry
        output_dir = Path(t.output_dir)
        items = read_items(g.texts_file, g.max_items)
        targets, teacher_identity = teacher_embeddings(config, items, log)

        encoder = load_student(config, device)
        parts = make_trainable(encoder, config)
        encoder.eval()  # no dropout layers; eval keeps the fingerprint cache semantics simple
        contrast = _contrast_batches(config)
        cache = prepare_prefix_cache(config, encoder, items, log, contrast.inputs() if contrast else None)
        lengths = [cache.index[item_key(item)][2] for item in items]
        order = BatchOrder.items(items, lengths, t.batch_size, t.seed)
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
        run_info = {"device": str(device), "items": len(items), "prefix_cache": str(cache.folder), **data_info}
        self.encoder, self.cache, self.items, self.targets, self.order = encoder, cache, items, targets, order
        self.anchors, self.contrast, self.head = anchors, contrast, head
        self.shipped = shipped_head(head, config)  # a view sharing the head's weights
        return Prepared(encoder, parts, optimizer, scheduler, data_info, run_info)

    def resumed(self, start_step: int) -> None:
        steps, per_epoch = self.config.training.max_steps, self.order.per_epoch
        self.log(f"training steps {start_step}..{steps} ({steps / per_epoch:.1f} epochs of {per_epoch} batches)")

    def step(self, step: int) -> StepResult:
        batch = self.order.step(step)
        records = self.contrast.step(step) if self.contrast is not None else None
        terms = compute_terms(
            self.encoder,
            self.head,
            self.shipped,
            self.cache,
            self.items,
            batch,
            self.targets,
            self.config,
            self.anchors,
            records,
        )
        terms["loss"].backward()
        return StepResult({name: float(value.detach()) for name, value in terms.items()}, {"batch": len(batch)})


def _contrast_batches(config: RunConfig) -> ContrastBatches | None:
    g = config.geometry
    if g.contrast_file is None:
        return None
    return load_contrast_order(
        g.contrast_file, g.contrast_sets, g.contrast_max_per_set, g.contrast_batch_size, config.training.seed
    )


def _anchors(encoder, cache, items, lengths, data_info, output_dir: Path, log) -> torch.Tensor:
    """The starting LLM's pooled embeddings of every item (before any step or head)."""
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
