"""The effect recipe's arguments (the ``effect`` section of a training config)."""

from __future__ import annotations

from dataclasses import dataclass

from ...knobs import INSTRUCTION_STRENGTH


@dataclass
class EffectArguments:
    """The instruction-effect query side (training/effect/, issue 56); off while texts_file is None.

    Nothing below the effect map trains: every query's LLM vectors under its instruction and under
    the reference instruction, the sentence encoder's vector of "instruction + query", and both
    document vectors of every passage in both spaces are cached once (training/effect/vectors.py). The map starts
    as the identity at gain 1: step 0 is exactly the untrained arrangement at ``instruction_strength``.
    """

    texts_file: str | None = None  # embedding items: queries (with instructions) and passages
    documents_llm: str = "default"  # the symmetric LLM (its documents' and queries' vectors); default: shipped
    sentence_encoder: str = "minilm"  # the sentence encoder: an installed teacher or a folder
    embedding_dir: str | None = None  # the cached vectors; None = $INSTEMB_HOME/teacher_embeddings
    max_queries: int | None = None
    validation_share: float = 0.1  # queries held out of training, for the run's own validation metric
    rank: int = 32  # the low-rank part of h
    instruction_strength: float = INSTRUCTION_STRENGTH.default  # the saved model's own (knobs.py: one default)
    temperature: float = 0.05
    bank_negatives: int = 1024
    map_learning_rate: float = 1.0e-3
    # Issue 61: train the LLM's query side too (training/effect/query_llm.py). The query LLM is the
    # documents' LLM with its LoRA going on training in the top ``query_layers`` layers (the rest of
    # the model's LoRA layers frozen, their states cached by the frozen-prefix cache); documents
    # stay D(d), M(d) as indexed. The LLM's learning rate is training.learning_rate.
    query_llm: bool = False
    query_layers: int = 2
    negatives_file: str | None = None  # query id -> extra hard negatives of that query (the traps)
    keep_weight: float = 0.0  # generic instructions: their contribution held flat over the candidates
    prefix_cache_dir: str | None = None  # None = $INSTEMB_HOME/prefix_cache
    # A query with hard negatives (a group, its traps) ranks its positive among those alone (first
    # in group, as the facet harness scores): a bank of same-domain passages ("Review of this
    # laptop") is a decision no instruction can make. Plain queries keep the bank.
    group_negatives_only: bool = False
    # The instruction contrast: a query's positive scored under its own instruction against under a
    # sibling's (same text and subject, another positive); 0 = off (training/effect/query_llm.py).
    contrast_weight: float = 0.0

    @property
    def knobs(self) -> dict[str, float]:
        """The trained model's own query-time knobs, as its encoder takes them (by name)."""
        return {INSTRUCTION_STRENGTH.name: self.instruction_strength}

    def checks(self, config) -> list[tuple[bool, str]]:
        """The config checks of this recipe (TrainConfig.validate runs them)."""
        e = self
        if e.texts_file is None:
            return []
        return [
            (
                config.geometry.teacher_encoder is None
                and config.two_tower.sentence_encoder is None
                and config.two_spaces.texts_file is None,
                "effect, two_spaces, two_tower and geometry are four recipes: set one of them",
            ),
            (e.temperature > 0 and e.bank_negatives >= 0, "effect.temperature must be > 0, bank_negatives >= 0"),
            (0 <= e.rank, "effect.rank must be >= 0"),
            (
                0 < e.instruction_strength <= INSTRUCTION_STRENGTH.high,
                f"effect.instruction_strength must lie in (0, {INSTRUCTION_STRENGTH.high:g}]",
            ),
            (0 <= e.validation_share < 0.5, "effect.validation_share must lie in [0, 0.5)"),
            (not e.query_llm or e.query_layers > 0, "effect.query_layers must be > 0 with effect.query_llm"),
            (e.keep_weight >= 0 and e.contrast_weight >= 0, "effect.keep_weight and contrast_weight must be >= 0"),
        ]
