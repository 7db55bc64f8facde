"""Alias kept for compatibility (issue 68 names round 2): the two-tower recipe's loss terms are in
losses/two_tower.py."""

from .two_tower import bank_infonce, correction_norm

__all__ = ["bank_infonce", "correction_norm"]
