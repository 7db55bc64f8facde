"""The sentence encoder's import path before issue 62 gave each concept one name: the part is
``SentenceEncoder`` in modules/sentence_encoder.py. These older names stay importable for code
written against them; the package itself uses the new ones."""

from .sentence_encoder import SENTENCE_ENCODER_DIR as TOWER_DIR
from .sentence_encoder import SentenceEncoder as DocumentTower

__all__ = ["TOWER_DIR", "DocumentTower"]
