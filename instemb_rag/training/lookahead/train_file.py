"""The look-ahead run's records file and the checks it must pass against the run's config.

The records and their builders are the data layer's (instemb_rag/datasets/); what a run asks of
them (a built file under the output folder, hard negatives that a loss reads, distill_sets that
name sets present) is the trainer's.
"""

from __future__ import annotations

from pathlib import Path

from ...datasets.builders import build_data_folder
from ...datasets.records import RecordFile, TrainingRecord
from ...errors import InstEmbError
from ..common_args import RunConfig


def resolve_train_file(config: RunConfig) -> Path:
    """The records file: ``data.train_file``, or records built from ``data.build_sets`` once."""
    data = config.data
    if data.train_file:
        return Path(data.train_file)
    build_dir = Path(data.build_dir or Path(config.training.output_dir) / "data")
    train_file = build_dir / "train.jsonl"
    if not train_file.is_file():
        build_data_folder(
            build_dir, data.data_root, data.build_sets, data.heldout_fraction, data.data_seed, data.max_per_set
        )
    return train_file


def check_hard_negatives_have_a_loss(
    records: RecordFile | list[TrainingRecord], config: RunConfig, train_file: Path
) -> None:
    """Hard negatives act through the retrieval term only; refuse to drop them silently."""
    carrying = (
        records.negative_carriers
        if isinstance(records, RecordFile)
        else sum(1 for r in records if r.negative_instruction or r.negative_outputs)
    )
    if carrying and config.training.retrieval_weight <= 0:
        raise InstEmbError(
            f"{train_file}: {carrying} records carry negative_instruction or negative_outputs, which only the "
            "retrieval loss reads, but training.retrieval_weight is 0. Set --set retrieval_weight=1.0 "
            "(or drop those fields)."
        )


def check_distill_sets_are_present(records: RecordFile, config: RunConfig, train_file: Path) -> None:
    """A distill_sets name no record carries would silently switch distillation off for it."""
    missing = sorted(set(config.training.distill_sets or ()) - set(records.source_sets))
    if missing:
        raise InstEmbError(
            f"{train_file}: training.distill_sets names {missing}, but no record's source starts with that "
            f"set name (the sets here: {sorted(records.source_sets)}). Fix the names or drop them."
        )
