"""Fast paths that give the same embeddings as the plain encoder with less compute."""

from .shared_prefix import encode_instructions

__all__ = ["encode_instructions"]
