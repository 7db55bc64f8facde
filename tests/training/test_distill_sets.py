"""training.distill_sets: the distillation term reads only the records built from the named sets."""

import pytest
import torch
from helpers import TINY_RECIPE, tiny_train_config

from instemb_rag.datasets.records import TrainingRecord, open_records, write_records
from instemb_rag.errors import InstEmbError
from instemb_rag.training.args import load_config
from instemb_rag.training.lookahead.frozen_llm import compute_llm_targets
from instemb_rag.training.lookahead.losses import compute_losses, distilled_positions
from instemb_rag.training.lookahead.train_file import check_distill_sets_are_present
from instemb_rag.training.student import load_student

RECORDS = [
    TrainingRecord(
        text="what is the packed size of the tent",
        output="the tent packs to a small roll of cold water",
        source="msmarco_passages:17",
    ),
    TrainingRecord(
        text="the tent is light",
        instruction="find evidence against this claim",
        output="the tent is not light in rain",
        source="stance_pairs:REFUTES:sick:4",
    ),
]


@pytest.fixture
def train_file(tmp_path):
    path = tmp_path / "train.jsonl"
    write_records(path, RECORDS)
    return path


def _config(tiny_model_dir, train_file, tmp_path, **overrides):
    only_distillation = {"training.contrastive_weight": 0.0, "training.retrieval_weight": 0.0}
    return tiny_train_config(tiny_model_dir, train_file, tmp_path / "run", **only_distillation, **overrides)


def test_only_the_named_sets_rows_are_distilled():
    mask = torch.ones(2, 4, dtype=torch.bool)
    mask[0, 3] = False  # an answer shorter than L
    kept = distilled_positions(RECORDS, mask, ["msmarco_passages"])
    assert kept[0].tolist() == [True, True, True, False] and not kept[1].any()
    assert distilled_positions(RECORDS, mask, None) is mask


def test_the_distillation_term_equals_that_of_the_named_sets_records_alone(tiny_model_dir, train_file, tmp_path):
    config = _config(tiny_model_dir, train_file, tmp_path, **{"training.distill_sets": ["msmarco_passages"]})
    every_record = _config(tiny_model_dir, train_file, tmp_path)
    encoder = load_student(config, torch.device("cpu"))
    length = encoder.lookahead.length
    with torch.no_grad():
        targets = compute_llm_targets(encoder, RECORDS, length)
        named_only = compute_losses(encoder, RECORDS, targets, config)["distill"]
        both = compute_losses(encoder, RECORDS, targets, every_record)["distill"]
        alone = compute_losses(encoder, RECORDS[:1], compute_llm_targets(encoder, RECORDS[:1], length), every_record)
    assert named_only.item() > 0
    assert torch.allclose(named_only, alone["distill"], atol=1e-4)
    assert not torch.allclose(named_only, both, atol=1e-4)  # the stance record's positions are left out


def test_distill_sets_must_name_sets_present_in_the_records(tiny_model_dir, train_file, tmp_path):
    records = open_records(train_file)
    assert records.source_sets == {"msmarco_passages": 1, "stance_pairs": 1}
    config = _config(tiny_model_dir, train_file, tmp_path, **{"training.distill_sets": ["race", "msmarco_passages"]})
    with pytest.raises(InstEmbError, match=r"train\.jsonl: training\.distill_sets names \['race'\]"):
        check_distill_sets_are_present(records, config, train_file)
    fine = _config(tiny_model_dir, train_file, tmp_path, **{"training.distill_sets": ["stance_pairs"]})
    check_distill_sets_are_present(records, fine, train_file)


@pytest.mark.parametrize(
    "overrides", [{"training.distill_sets": []}, {"training.distill_sets": ["race"], "training.distill_weight": 0.0}]
)
def test_distill_sets_without_a_distillation_term_is_refused(overrides):
    with pytest.raises(InstEmbError, match="training.distill_sets"):
        load_config(TINY_RECIPE, overrides)
