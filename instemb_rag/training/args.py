"""The training config, ``TrainConfig``: dataclasses (Tevatron style), loaded from YAML/JSON and
overridden by flags.

A config file has one section per dataclass: ``model``, ``data`` and ``training``, which every
recipe reads (common_args.py), and each recipe's own (``geometry``, ``two_tower`` and
``two_spaces`` here, ``effect`` in effect/args.py). TrainConfig composes them and runs their
checks, so it stands above the recipes; they are typed by ``common_args.RunConfig`` and never
import it. Overrides are ``key=value`` pairs where ``key`` is ``section.field`` or a bare field
name (read as the first section's that has it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..choices import ParallelMode, values
from ..errors import InstEmbError
from .common_args import VIEW_NAMES, DataArguments, ModelArguments, TrainingArguments
from .effect.args import EffectArguments
from .renamed_keys import RENAMED_KEYS, renamed, renamed_sections

__all__ = [
    "VIEW_NAMES",
    "DataArguments",
    "GeometryArguments",
    "ModelArguments",
    "TrainConfig",
    "TrainingArguments",
    "config_from_dict",
    "load_config",
    "parse_set_option",
]


@dataclass
class GeometryArguments:
    """Distilling a sentence encoder's geometry (training/geometry.py); off while teacher_encoder is None.

    The student trains its top ``model.trainable_top_layers`` layers (LoRA or full) and a projection
    head into the teacher's space, over the frozen-prefix cache, on the items of ``texts_file``
    (queries with instructions and passages; datasets/geometry_texts.py builds it).
    """

    teacher_encoder: str | None = None  # "minilm", "mpnet" (instemb-rag teachers install) or a local folder
    texts_file: str | None = None  # distillation items (JSONL: id, role, text, instruction, group, positive)
    max_items: int | None = None  # the first N items of texts_file (None = all)
    prefix_cache_dir: str | None = None  # None = $INSTEMB_HOME/prefix_cache
    prefix_cache_dtype: str = "float16"  # "float32": cached steps equal uncached ones to rounding (2x the bytes)
    teacher_embedding_dir: str | None = None  # None = $INSTEMB_HOME/teacher_embeddings
    dense_weight: float = 1.0  # 1 - cosine to the teacher's embedding of the same text
    relational_weight: float = 0.0  # KL between the batch's similarity distributions, both directions
    relational_temperature: float = 0.05
    group_weight: float = 0.0  # InfoNCE query -> its positive passage, the group's other passages in the batch
    group_temperature: float = 0.05
    head_learning_rate: float = 1e-3
    head_bias: bool = True
    head_ridge: float = 0.01  # the closed-form start of the head (ridge regression)
    head_fit_items: int = 4000
    # Anchor: KL between the batch's similarity rows of the student's pooled embedding and those of
    # the starting LLM (computed once, training/geometry_anchor.py): the pooled geometry
    # the blend keeps stays the one the starting LLM learned from its labels.
    anchor_weight: float = 0.0
    anchor_temperature: float = 0.05
    # Instruction-contrast records (datasets/records.py format, e.g. an instruction-steering run's
    # data/train.jsonl) ranked with losses/retrieval.py on the embedding that ships
    # (training/geometry_contrast.py): the labels a sentence-encoder teacher cannot give (stance,
    # negation), the query under its negative instruction as a hard negative.
    contrast_file: str | None = None
    contrast_sets: list[str] | None = None  # the record sets to read (source up to ":"); None = every set
    contrast_max_per_set: int | None = None  # a seeded sample of whole groups, per set
    contrast_batch_size: int = 8  # records a step, beside training.batch_size items
    contrast_weight: float = 0.0
    contrast_temperature: float = 0.05
    # The blend the group and contrast terms rank with: cosine = w * pooled + (1 - w) * head
    # (models/projection.py); export the checkpoint with the same --head-input-weight.
    train_input_weight: float = 0.0


@dataclass
class TwoTowerArguments:
    """The two-tower recipe (training/two_tower/); off while sentence encoder is None.

    Documents are the document sentence encoder's (a frozen sentence encoder's) vectors, cached on disk; a
    query's embedding is that sentence encoder's own vector of "instruction + query" (the anchor) plus the
    LLM's correction through a head that starts at zero, normalised. Only short queries run
    through the LLM, on the frozen-prefix cache.
    """

    sentence_encoder: str | None = None  # "minilm" (instemb-rag teachers install) or a sentence-transformers folder
    texts_file: str | None = None  # embedding items (datasets/embedding_items.py): queries with positives, passages
    max_queries: int | None = None  # the first N queries with a positive (None = all)
    prefix_cache_dir: str | None = None  # None = $INSTEMB_HOME/prefix_cache
    embedding_dir: str | None = (
        None  # the document sentence encoder's cached vectors; None = $INSTEMB_HOME/teacher_embeddings
    )
    # InfoNCE: the query against its positive passage, every passage of the batch's groups (a
    # subject's other aspects, a claim's other stance: the hard negatives) and a fresh seeded
    # sample of the cached passages (the free negative bank).
    infonce_weight: float = 1.0
    temperature: float = 0.05
    bank_negatives: int = 1024
    # The correction's squared norm: how far the query may move from its anchor.
    anchor_weight: float = 0.1
    head_learning_rate: float = 1e-3


QueryTowerArguments = TwoTowerArguments  # alias kept for compatibility (issue 68 names round 2)


@dataclass
class TwoSpacesArguments:
    """The query side of a two-space encoder (training/two_spaces/); off while texts_file is None.

    Documents are cached in two spaces: the frozen documents' LLM (``documents_llm``) and the
    sentence encoder (``sentence_encoder``). A query runs once through the student (the documents'
    LLM with its LoRA going on training: the query-side adapter) on the frozen-prefix cache: DAAP
    gives the LLM-space vector, a head from the same pooled state corrects the sentence encoder's anchor, a gate sets
    the LLM space's weight. Every query-side part starts where the untrained two-space model is.
    """

    texts_file: str | None = None  # embedding items (datasets/embedding_items.py): queries with positives, passages
    documents_llm: str = "default"  # the symmetric encoder whose document space is the LLM space
    sentence_encoder: str = "minilm"  # the sentence encoder: an installed teacher or a folder
    max_queries: int | None = None
    prefix_cache_dir: str | None = None  # None = $INSTEMB_HOME/prefix_cache
    embedding_dir: str | None = None  # the cached vectors of both spaces; None = $INSTEMB_HOME/teacher_embeddings
    temperature: float = 0.05
    bank_negatives: int = 1024
    anchor_weight: float = 0.1  # the sentence encoder correction's squared norm
    initial_llm_weight: float = 0.5  # the weight at step 0 (the gate's starting bias)
    gate: bool = True  # a per-query weight; False keeps initial_llm_weight for every query
    head_learning_rate: float = 1.0e-3


@dataclass
class TrainConfig:
    model: ModelArguments = field(default_factory=ModelArguments)
    data: DataArguments = field(default_factory=DataArguments)
    training: TrainingArguments = field(default_factory=TrainingArguments)
    geometry: GeometryArguments = field(default_factory=GeometryArguments)
    two_tower: TwoTowerArguments = field(default_factory=TwoTowerArguments)
    two_spaces: TwoSpacesArguments = field(default_factory=TwoSpacesArguments)
    effect: EffectArguments = field(default_factory=EffectArguments)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> TrainConfig:
        t, m = self.training, self.model
        checks = [
            (t.distill_loss in ("mse", "kl"), f"training.distill_loss must be 'mse' or 'kl', got '{t.distill_loss}'"),
            (set(t.views) <= set(VIEW_NAMES), f"training.views must be drawn from {list(VIEW_NAMES)}, got {t.views}"),
            (
                t.contrastive_weight == 0 or len(set(t.views)) >= 2,
                "training.views needs at least two views for the contrastive loss (or contrastive_weight: 0)",
            ),
            (
                t.save_dtype in ("float32", "bfloat16", "float16"),
                "training.save_dtype must be float32, bfloat16 or float16",
            ),
            (
                t.max_steps >= 1 and t.batch_size >= 1 and t.gradient_accumulation_steps >= 1,
                "training.max_steps, batch_size and gradient_accumulation_steps must be >= 1",
            ),
            (t.batch_size >= 2 or t.contrastive_weight == 0, "the contrastive loss needs batch_size >= 2"),
            (
                t.retrieval_weight >= 0 and t.retrieval_temperature > 0,
                "training.retrieval_weight must be >= 0 and retrieval_temperature > 0",
            ),
            (
                t.negative_memory >= 0 and (t.negative_memory == 0 or t.retrieval_weight > 0),
                "training.negative_memory must be >= 0, and it feeds the retrieval loss only: "
                "set training.retrieval_weight > 0 or negative_memory to 0",
            ),
            (
                t.distill_sets is None or (len(t.distill_sets) > 0 and t.distill_weight > 0),
                "training.distill_sets names the records the distillation term reads: give at least one "
                "set and distill_weight > 0 (or leave distill_sets unset to distil every record)",
            ),
            (m.lookahead_length >= 1, "model.lookahead_length must be >= 1 for distillation"),
            (
                m.train_lookahead or m.trainable_top_layers > 0 or m.train_final_norm,
                "nothing to train: set model.train_lookahead, trainable_top_layers or train_final_norm",
            ),
            (m.trainable_top_layers >= 0, "model.trainable_top_layers must be >= 0"),
            (0 <= t.view_dropout < 1, "training.view_dropout must be in [0, 1)"),
            (t.parallel in values(ParallelMode), f"training.parallel must be one of {list(values(ParallelMode))}"),
            (not m.lora_all_layers or m.lora_rank > 0, "model.lora_all_layers needs model.lora_rank > 0"),
        ]
        checks += self._frozen_prefix_checks()
        checks += self._geometry_checks()
        checks += self._two_tower_checks()
        checks += self._two_spaces_checks()
        checks += self.effect.checks(self)
        for ok, message in checks:
            if not ok:
                raise InstEmbError(f"Invalid training config: {message}.")
        return self

    def _frozen_prefix_checks(self) -> list[tuple[bool, str]]:
        m = self.model
        if not m.frozen_prefix:
            return []
        return [
            (
                not m.train_lookahead,
                "model.frozen_prefix caches states that the look-ahead vectors shape; with "
                "model.train_lookahead: true they change every step and no cached state would stay valid. "
                "Set model.train_lookahead: false (or model.frozen_prefix: false)",
            ),
            (
                not m.lora_all_layers,
                "model.frozen_prefix needs frozen layers below the trainable top ones, but "
                "model.lora_all_layers puts LoRA on every layer. Drop lora_all_layers (or frozen_prefix)",
            ),
            (
                m.trainable_top_layers >= 1,
                "model.frozen_prefix runs the top model.trainable_top_layers layers on cached states: "
                "set trainable_top_layers >= 1 (and below the model's layer count)",
            ),
            (
                m.frozen_prefix_dtype in ("float16", "float32"),
                "model.frozen_prefix_dtype must be float16 or float32",
            ),
        ]

    def _two_tower_checks(self) -> list[tuple[bool, str]]:
        q, m = self.two_tower, self.model
        if q.sentence_encoder is None:
            return []
        return [
            (q.texts_file is not None, "two_tower.texts_file is required with two_tower.sentence_encoder"),
            (self.geometry.teacher_encoder is None, "two_tower and geometry are two recipes: set one of them"),
            (
                not m.train_lookahead,
                "the two-tower recipe keeps the look-ahead vectors frozen (the frozen-prefix cache)",
            ),
            (
                m.trainable_top_layers > 0 and not m.lora_all_layers,
                "the two-tower recipe needs model.trainable_top_layers > 0",
            ),
            (
                q.infonce_weight > 0 and q.anchor_weight >= 0,
                "two_tower.infonce_weight must be > 0, anchor_weight >= 0",
            ),
            (q.temperature > 0 and q.bank_negatives >= 0, "two_tower.temperature must be > 0, bank_negatives >= 0"),
        ]

    def _two_spaces_checks(self) -> list[tuple[bool, str]]:
        s, m = self.two_spaces, self.model
        if s.texts_file is None:
            return []
        return [
            (
                self.geometry.teacher_encoder is None and self.two_tower.sentence_encoder is None,
                "two_spaces, two_tower and geometry are three recipes: set one of them",
            ),
            (not m.train_lookahead, "two_spaces keeps the look-ahead vectors frozen (the frozen-prefix cache)"),
            (m.trainable_top_layers > 0 and not m.lora_all_layers, "two_spaces needs model.trainable_top_layers > 0"),
            (s.temperature > 0 and s.bank_negatives >= 0, "two_spaces.temperature must be > 0, bank_negatives >= 0"),
            (0 < s.initial_llm_weight < 1, "two_spaces.initial_llm_weight must lie strictly between 0 and 1"),
            (s.anchor_weight >= 0, "two_spaces.anchor_weight must be >= 0"),
        ]

    def _geometry_checks(self) -> list[tuple[bool, str]]:
        g, m = self.geometry, self.model
        if g.teacher_encoder is None:
            return []
        return [
            (g.texts_file is not None, "geometry.texts_file is required with geometry.teacher_encoder"),
            (
                not m.train_lookahead,
                "geometry distillation keeps the look-ahead vectors frozen (the frozen-prefix cache "
                "depends on them): set model.train_lookahead: false",
            ),
            (
                min(g.dense_weight, g.relational_weight, g.group_weight) >= 0
                and g.dense_weight + g.relational_weight + g.group_weight > 0,
                "geometry.dense_weight, relational_weight and group_weight must be >= 0, one of them > 0",
            ),
            (
                g.prefix_cache_dtype in ("float16", "float32"),
                "geometry.prefix_cache_dtype must be float16 or float32",
            ),
            (
                g.relational_temperature > 0 and g.group_temperature > 0,
                "geometry temperatures must be > 0",
            ),
            (m.trainable_top_layers > 0 and not m.lora_all_layers, "geometry needs model.trainable_top_layers > 0"),
            (
                min(g.anchor_weight, g.contrast_weight) >= 0
                and g.anchor_temperature > 0
                and g.contrast_temperature > 0,
                "geometry.anchor_weight and contrast_weight must be >= 0, their temperatures > 0",
            ),
            (
                (g.contrast_weight > 0) == (g.contrast_file is not None),
                "geometry.contrast_file and contrast_weight go together: name the records file and give "
                "contrast_weight > 0, or leave both unset",
            ),
            (g.contrast_batch_size >= 2, "geometry.contrast_batch_size must be >= 2 (records rank against each other)"),
            (0.0 <= g.train_input_weight < 1.0, "geometry.train_input_weight must lie in [0, 1)"),
        ]


def _section_of(key: str) -> tuple[str, str]:
    for section, renames in RENAMED_KEYS.items():
        if key in renames:
            return section, key
    if "." in key:
        section, name = key.split(".", 1)
        return section, name
    owners = [
        s.name
        for s in dataclasses.fields(TrainConfig)
        if key in {f.name for f in dataclasses.fields(s.default_factory)}
    ]  # type: ignore[misc]
    if not owners:
        raise InstEmbError(
            f"Unknown training option '{key}'. See instemb_rag/training/common_args.py (model, data, "
            "training), args.py and effect/args.py (the recipes' own) for the fields."
        )
    return owners[0], key


def _build_section(cls, values: dict, source: str):
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise InstEmbError(f"{source}: unknown option(s) {unknown} for {cls.__name__}; known: {sorted(known)}.")
    return cls(**values)


def config_from_dict(raw: dict, source: str = "config") -> TrainConfig:
    sections = {s.name: s.default_factory for s in dataclasses.fields(TrainConfig)}  # type: ignore[misc]
    raw = renamed_sections(raw, source)
    unknown = sorted(set(raw) - set(sections))
    if unknown:
        raise InstEmbError(
            f"{source}: unknown section(s) {unknown}; use 'model', 'data', 'training', 'geometry', 'two_tower', 'two_spaces' and 'effect'."
        )
    built = {
        name: _build_section(cls, renamed(name, raw.get(name) or {}, source), f"{source} [{name}]")
        for name, cls in sections.items()
    }
    return TrainConfig(**built).validate()


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read a YAML or JSON config (or start from defaults) and apply ``overrides``."""
    raw: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise InstEmbError(f"Training config {path} not found.")
        try:
            raw = (json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())) or {}
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise InstEmbError(f"Training config {path} cannot be parsed: {exc}") from exc
        if not isinstance(raw, dict):
            raise InstEmbError(f"Training config {path} must be a mapping with model/data/training sections.")
    for key, value in (overrides or {}).items():
        section, name = _section_of(key)
        raw.setdefault(section, {})
        raw[section] = dict(raw[section] or {})
        raw[section][name] = value
    return config_from_dict(raw, str(path) if path else "config")


def parse_set_option(item: str) -> tuple[str, Any]:
    """``key=value`` with the value read as YAML (numbers, booleans, lists, null)."""
    if "=" not in item:
        raise InstEmbError(f"--set expects key=value, got '{item}'.")
    key, value = item.split("=", 1)
    return key.strip(), yaml.safe_load(value)
