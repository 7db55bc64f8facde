"""Alias kept for compatibility (issue 68 names round 2): the objective is
training/two_tower/objective.py ``TwoTowerObjective``."""

from ..two_tower.objective import TwoTowerObjective
from ..two_tower.objective import TwoTowerObjective as QueryTowerObjective  # older name

__all__ = ["QueryTowerObjective", "TwoTowerObjective"]
