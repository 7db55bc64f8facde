"""The objective registry: which recipe a config trains (training/objective.py says what one is).

The first entry whose ``selects(config)`` holds is the run's objective; the look-ahead objective
is last and selects every config. A new recipe adds its subpackage's objective here, before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .args import TrainConfig
from .effect.objective import EffectObjective
from .effect.query_llm import EffectLLMObjective
from .geometry.objective import GeometryObjective
from .lookahead.objective import LookaheadObjective
from .objective import Objective
from .two_spaces.objective import TwoSpacesObjective
from .two_tower.objective import TwoTowerObjective


@dataclass(frozen=True)
class Entry:
    objective: type[Objective]
    selects: Callable[[TrainConfig], bool]


OBJECTIVES: list[Entry] = [
    # the instruction-effect query side with its LLM training (issue 61): effect.query_llm set
    Entry(EffectLLMObjective, lambda config: config.effect.texts_file is not None and config.effect.query_llm),
    # the instruction-effect query side (issue 56): effect.texts_file set
    Entry(EffectObjective, lambda config: config.effect.texts_file is not None),
    # the query side of a two-space encoder (issue 50): two_spaces.texts_file set
    Entry(TwoSpacesObjective, lambda config: config.two_spaces.texts_file is not None),
    # InstEmb queries into a sentence encoder's document space (issue 44): two_tower.sentence_encoder set
    Entry(TwoTowerObjective, lambda config: config.two_tower.sentence_encoder is not None),
    # a sentence encoder's geometry into the student's (issue 33): geometry.teacher_encoder set
    Entry(GeometryObjective, lambda config: config.geometry.teacher_encoder is not None),
    # look-ahead distillation + multi-view contrastive + retrieval: the default recipe
    Entry(LookaheadObjective, lambda config: True),
]


def objective_for(config: TrainConfig) -> type[Objective]:
    return next(entry.objective for entry in OBJECTIVES if entry.selects(config))
