"""python -m instemb_rag.training.reader RECIPE.yaml [key=value ...]: train the reader (see run.py)."""

from __future__ import annotations

import sys

import yaml

from .args import ReaderTrainingArguments
from .run import train_reader


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m instemb_rag.training.reader RECIPE.yaml [key=value ...]")
    with open(argv[0], encoding="utf-8") as stream:
        values = (yaml.safe_load(stream) or {}).get("reader", {})
    for override in argv[1:]:
        key, _, value = override.partition("=")
        values[key] = yaml.safe_load(value)
    train_reader(ReaderTrainingArguments.from_mapping(values, argv[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
