"""The reader recipe (issue 67): a cross-encoder over (instruction + query, candidate), trained listwise."""

from .args import ReaderTrainingArguments
from .run import train_reader

__all__ = ["ReaderTrainingArguments", "train_reader"]
