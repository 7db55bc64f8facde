"""The geometry recipe's terms and pieces: the teacher's embeddings, the student's, the head.

``compute_terms`` gives the weighted terms of one step (the loss functions: losses/geometry.py
and losses/retrieval.py); ``term_weights`` names them and their weights once. The objective that
runs them is objective.py.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from ...datasets.embedding_items import EmbeddingItem
from ...encoder.modules.forward import States
from ...encoder.modules.layer_split import run_top
from ...encoder.modules.projection import Projection
from ...losses.geometry import dense_cosine, group_infonce, relational_kl
from ...paths import instemb_home
from ..common_args import RunConfig
from ..objective import weighted_sum
from ..prefix_cache import PrefixCache, input_key, pooled_embeddings
from ..student import optimizer_with_head
from .contrast import contrast_term


def term_weights(config: RunConfig) -> dict[str, float]:
    """The geometry recipe's terms and their weights: the one place they are named."""
    g = config.geometry
    return {
        "dense": g.dense_weight,
        "relational": g.relational_weight,
        "group": g.group_weight,
        "anchor": g.anchor_weight,
        "contrast": g.contrast_weight,
    }


def teacher_embeddings(config: RunConfig, items: list[EmbeddingItem], log=print) -> tuple[torch.Tensor, dict]:
    """[N, teacher dim] L2-normalised teacher embeddings of the items, and the teacher's identity."""
    from ...teachers import load_teacher, teacher_text
    from ...teachers.cache import cached_embeddings

    g = config.geometry
    teacher = load_teacher(g.teacher_encoder)
    folder = Path(g.teacher_embedding_dir) if g.teacher_embedding_dir else instemb_home() / "teacher_embeddings"
    texts = [teacher_text(item.text, item.instruction) for item in items]
    started = time.perf_counter()
    vectors = cached_embeddings(teacher, texts, folder)
    log(f"teacher {teacher.name}: {len(texts)} embeddings ready in {time.perf_counter() - started:.0f} s")
    identity = {"name": teacher.name, "fingerprint": teacher.fingerprint, "dimension": teacher.dimension}
    return torch.as_tensor(vectors, dtype=torch.float32), identity


def student_embeddings(encoder, cache: PrefixCache, items: list[EmbeddingItem], indices: list[int]) -> torch.Tensor:
    """The student's (projected, un-normalised) embeddings of ``items[indices]`` from cached prefixes."""
    batch = cache.batch([items[i].student_input for i in indices], encoder.device)
    hidden = run_top(encoder.model, batch["hidden"], batch["attention_mask"], batch["position_ids"], cache.split)
    return encoder.embed_states(States(hidden, batch["attention_mask"]))


@torch.no_grad()
def fit_head(encoder, cache: PrefixCache, items, targets: torch.Tensor, config: RunConfig, log=print) -> Projection:
    """The projection head at the ridge map from pooled student embeddings to the teacher's."""
    g = config.geometry
    head = Projection(encoder.hidden_size, targets.shape[1], bias=g.head_bias)
    bare = encoder.with_projection(None)
    # A seeded sample of the whole file (a file made by concatenation keeps its later sources in
    # the fit), then sorted by length so each batch pads little (the fit does not depend on order).
    sample = random.Random(config.training.seed).sample(range(len(items)), min(g.head_fit_items, len(items)))
    chosen = sorted(sample, key=lambda i: cache.index[item_key(items[i])][2])
    pooled = torch.cat(
        [
            student_embeddings(bare, cache, items, chosen[start : start + 64]).float().cpu()
            for start in range(0, len(chosen), 64)
        ]
    )
    mean_cosine = head.fit_ridge(pooled, targets[chosen], g.head_ridge)
    log(f"projection head: ridge fit on {len(chosen)} items, mean cosine to the teacher {mean_cosine:.3f}")
    return head.to(encoder.device)


def shipped_head(head: Projection, config: RunConfig) -> Projection:
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
    config: RunConfig,
    anchors: torch.Tensor | None = None,
    contrast_records: list | None = None,
) -> dict:
    """The weighted terms of one step. The teacher terms compare the head's map with the teacher;
    the ranking terms (group, contrast) rank with the embedding that ships (``shipped_head``);
    the anchor holds the pooled embedding."""
    g, weights = config.geometry, term_weights(config)
    pooled = pooled_embeddings(encoder, cache, [items[i].student_input for i in batch])
    student = head.teacher_space(pooled)
    teacher = targets[batch].to(student.device)
    terms: dict[str, torch.Tensor] = {}
    if weights["dense"] > 0:
        terms["dense"] = dense_cosine(student, teacher)
    if weights["relational"] > 0:
        terms["relational"] = relational_kl(student, teacher, g.relational_temperature)
    if weights["group"] > 0:
        terms["group"] = _group_term(shipped(pooled), [items[i] for i in batch], g.group_temperature)
    if weights["anchor"] > 0 and anchors is not None:
        terms["anchor"] = relational_kl(pooled.float(), anchors[batch].to(pooled.device), g.anchor_temperature)
    if weights["contrast"] > 0 and contrast_records:
        embed = lambda inputs: shipped(pooled_embeddings(encoder, cache, inputs))  # noqa: E731
        terms["contrast"] = contrast_term(embed, contrast_records, g.contrast_temperature)
    terms["loss"] = weighted_sum(terms, weights)
    return terms


def _group_term(student: torch.Tensor, batch_items: list[EmbeddingItem], temperature: float) -> torch.Tensor:
    passage_rows = [row for row, item in enumerate(batch_items) if item.role == "passage"]
    row_of_id = {batch_items[row].id: position for position, row in enumerate(passage_rows)}
    query_rows = [row for row, item in enumerate(batch_items) if item.role == "query" and item.positive in row_of_id]
    if not query_rows or len(passage_rows) < 2:
        return student.sum() * 0.0
    positives = torch.tensor([row_of_id[batch_items[row].positive] for row in query_rows], device=student.device)
    return group_infonce(student[query_rows], student[passage_rows], positives, temperature)


def build_optimizer(parts, head: Projection, config: RunConfig):
    return optimizer_with_head(parts, head, config.training, config.geometry.head_learning_rate)


def prepare_prefix_cache(
    config: RunConfig, encoder, items: list[EmbeddingItem], log=print, extra_inputs: list | None = None
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


def item_key(item: EmbeddingItem) -> str:
    return input_key(*item.student_input)
