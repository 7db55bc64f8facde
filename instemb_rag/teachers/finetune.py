"""Teach a sentence-encoder teacher the facet skill before it teaches the student.

A stock sentence encoder reading "instruction + query" matches words; fine-tuned for minutes on
facet groups (a subject's passages, one per aspect, one instruction per aspect) it learns that
the instruction picks the passage. Each example is one instruction of one group: the query read
as the teacher reads it (``teacher_text``), its aspect's passage the positive, the group's other
passages hard negatives, every other passage of the batch an in-batch negative (InfoNCE).

Only the top ``trainable_layers`` transformer layers train (the lower ones keep the general
geometry). The result is a sentence-transformers folder with safetensors weights, written aside
and renamed into place, plus ``instemb-finetune.json`` saying what it was trained on; it loads as
a teacher by its path (``geometry.teacher_encoder: runs/teachers/...``).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..datasets.facet_groups import FacetGroup, load_facet_groups
from ..hashing import file_sha256
from .errors import TeacherError
from .teacher import load_teacher, teacher_text

METADATA_NAME = "instemb-finetune.json"
_LAYER_INDEX = re.compile(r"\.layer\.(\d+)\.")


@dataclass(frozen=True)
class FinetuneOptions:
    steps: int = 200
    batch_size: int = 16
    learning_rate: float = 3e-5
    temperature: float = 0.05
    trainable_layers: int = 3
    hard_negatives: int = 2  # of the group's other passages, per example
    max_seq_length: int = 256
    seed: int = 0


@dataclass(frozen=True)
class FacetExample:
    query: str  # instruction pasted before the query, as the teacher reads it
    positive: str
    negatives: tuple[str, ...]  # the same subject's other passages


def facet_examples(groups: Sequence[FacetGroup]) -> list[FacetExample]:
    examples = []
    for group in groups:
        for instruction in group.instructions:
            target = group.passages[group.target_of(instruction)]
            others = tuple(p.text for p in group.passages if p.id != target.id)
            examples.append(FacetExample(teacher_text(group.query, instruction.text), target.text, others))
    return examples


def _freeze_below_top(model, trainable_layers: int) -> int:
    """Freeze every parameter but the top ``trainable_layers`` transformer layers'; returns how
    many parameters train."""
    names = [name for name, _ in model.named_parameters()]
    depths = [int(match.group(1)) for name in names if (match := _LAYER_INDEX.search(name))]
    if not depths:
        raise TeacherError("cannot find the teacher's transformer layers (no parameter named '*.layer.N.*').")
    lowest = max(depths) + 1 - trainable_layers
    trained = 0
    for name, parameter in model.named_parameters():
        match = _LAYER_INDEX.search(name)
        parameter.requires_grad = bool(match) and int(match.group(1)) >= lowest
        trained += parameter.numel() if parameter.requires_grad else 0
    return trained


def _batch_loss(model, batch: list[FacetExample], options: FinetuneOptions, rng: random.Random):
    """InfoNCE of each query over the batch's distinct passages (positives and hard negatives)."""
    import torch
    import torch.nn.functional as F

    passages: dict[str, int] = {}
    for example in batch:
        negatives = rng.sample(example.negatives, min(options.hard_negatives, len(example.negatives)))
        for text in (example.positive, *negatives):
            passages.setdefault(text, len(passages))
    labels = torch.tensor([passages[example.positive] for example in batch])

    def embed(texts: list[str]):
        # sentence-transformers 6 names it preprocess (tokenize is its deprecated alias); some
        # entries of the features are not tensors (e.g. the text kind)
        prepare = getattr(model, "preprocess", None) or model.tokenize
        features = {
            key: value.to(model.device) if hasattr(value, "to") else value for key, value in prepare(texts).items()
        }
        return F.normalize(model(features)["sentence_embedding"], dim=-1)

    logits = embed([example.query for example in batch]) @ embed(list(passages)).T / options.temperature
    return F.cross_entropy(logits, labels.to(logits.device))


def _batches(examples: list[FacetExample], options: FinetuneOptions):
    """Seeded epochs of shuffled examples, cut into batches, for as many steps as asked."""
    rng = random.Random(options.seed)
    order: list[int] = []
    for _ in range(options.steps):
        if len(order) < options.batch_size:
            order += rng.sample(range(len(examples)), len(examples))
        yield [examples[i] for i in order[: options.batch_size]]
        del order[: options.batch_size]


def finetune_teacher(
    base: str | Path,
    groups_files: Sequence[str | Path],
    out: str | Path,
    options: FinetuneOptions = FinetuneOptions(),
    log: Callable[[str], None] = print,
) -> Path:
    """Fine-tune ``base`` (an installed teacher's name or a folder) on the groups; returns ``out``."""
    import torch

    if options.steps < 1 or options.batch_size < 2 or options.trainable_layers < 1:
        raise TeacherError("finetune needs steps >= 1, batch_size >= 2 and trainable_layers >= 1.")
    groups = [group for path in groups_files for group in load_facet_groups(path)]
    examples = facet_examples(groups)
    teacher = load_teacher(base, for_training=True)  # a SentenceTransformer: its training API and save
    model = teacher.model
    model.max_seq_length = options.max_seq_length
    torch.manual_seed(options.seed)
    trained = _freeze_below_top(model, options.trainable_layers)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=options.learning_rate)
    log(f"fine-tuning {teacher.name}: {len(examples)} examples from {len(groups)} groups, {trained:,} parameters train")
    model.train()
    rng, started, losses = random.Random(options.seed + 1), time.perf_counter(), []
    for step, batch in enumerate(_batches(examples, options), start=1):
        loss = _batch_loss(model, batch, options, rng)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == options.steps:
            recent = losses[-25:]
            log(
                f"step {step}/{options.steps}: loss {sum(recent) / len(recent):.3f} ({time.perf_counter() - started:.0f} s)"
            )
    model.eval()
    metadata = {
        "base": teacher.name,
        "base_fingerprint": teacher.fingerprint,
        "groups": [{"path": str(path), "sha256": file_sha256(path)} for path in groups_files],
        "examples": len(examples),
        "options": asdict(options),
        "first_loss": sum(losses[:25]) / len(losses[:25]),
        "last_loss": sum(losses[-25:]) / len(losses[-25:]),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return _save(model, Path(out), metadata)


def _save(model, out: Path, metadata: dict) -> Path:
    """Write aside, then swap into place: an interrupted save never leaves a half teacher at ``out``."""
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save(str(staging), safe_serialization=True)
    (staging / METADATA_NAME).write_text(json.dumps(metadata, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return out
