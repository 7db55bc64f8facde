"""Alias kept for compatibility (issue 68 names round 2): a sentence-transformers folder run
without the library is teachers/st_folder.py; ``sentence_encoder`` names the model part
(encoder/modules/sentence_encoder.py) only."""

from .st_folder import SentenceEncoderModel, UnsupportedSentenceFolder, read_pipeline

__all__ = ["SentenceEncoderModel", "UnsupportedSentenceFolder", "read_pipeline"]
