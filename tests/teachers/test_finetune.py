"""Fine-tuning a sentence-encoder teacher on facet groups (teachers/finetune.py), on a tiny real
sentence-transformers model: the instruction learns to pick its passage, only the top layers
change, and the result is a loadable teacher folder of safetensors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from instemb_rag.teachers import load_teacher, teacher_text
from instemb_rag.teachers.errors import TeacherError
from instemb_rag.teachers.finetune import METADATA_NAME, FinetuneOptions, facet_examples, finetune_teacher

# Words of the tiny model's vocabulary (testing.WORDS): each aspect's passage and instruction
# share no word, so only training can tie "weight" to the passage about kg and packed size.
ASPECTS = {
    "weight": ("light kg packed size compact", "focus on weight"),
    "weather": ("rain wind water seam durable", "focus on what about cold night"),
    "setup": ("pole frame floor zipper strap", "how does it do camp"),
}


def _groups_file(tmp_path, subjects=("tent", "backpack", "stove")):
    rows = []
    for n, subject in enumerate(subjects):
        rows.append(
            {
                "group": f"g{n}",
                "domain": "products",
                "subject": subject,
                "query": f"this {subject} review",
                "passages": [
                    {"id": f"g{n}-{key}", "facet": key, "text": f"{subject} {passage}"}
                    for key, (passage, _) in ASPECTS.items()
                ],
                "instructions": [{"facet": key, "text": ask} for key, (_, ask) in ASPECTS.items()],
            }
        )
    path = tmp_path / "groups.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _in_group_accuracy(teacher, groups_path) -> float:
    from instemb_rag.datasets.facet_groups import load_facet_groups

    right = total = 0
    for group in load_facet_groups(groups_path):
        passages = teacher.encode([p.text for p in group.passages])
        for instruction in group.instructions:
            query = teacher.encode([teacher_text(group.query, instruction.text)])[0]
            right += int(np.argmax(passages @ query) == group.target_of(instruction))
            total += 1
    return right / total


def test_examples_pair_each_instruction_with_its_passage_and_the_groups_others(tmp_path):
    from instemb_rag.datasets.facet_groups import load_facet_groups

    examples = facet_examples(load_facet_groups(_groups_file(tmp_path)))
    assert len(examples) == 9
    first = examples[0]
    assert first.query == "focus on weight this tent review"
    assert first.positive == "tent light kg packed size compact" and len(first.negatives) == 2
    assert first.positive not in first.negatives


def test_finetuning_teaches_the_instruction_to_pick_the_passage(tmp_path, tiny_st_dir):
    groups = _groups_file(tmp_path)
    before = load_teacher(tiny_st_dir)
    out = finetune_teacher(
        tiny_st_dir, [groups], tmp_path / "tuned",
        FinetuneOptions(steps=40, batch_size=9, learning_rate=1e-2, trainable_layers=1, temperature=0.1),
        log=lambda _: None,
    )  # fmt: skip
    after = load_teacher(out)
    assert _in_group_accuracy(after, groups) > _in_group_accuracy(before, groups)
    assert _in_group_accuracy(after, groups) == 1.0
    metadata = json.loads((out / METADATA_NAME).read_text())
    assert metadata["last_loss"] < metadata["first_loss"] and metadata["examples"] == 9
    assert any(out.rglob("*.safetensors")) and not any(out.rglob("*.bin"))
    assert not (tmp_path / "tuned.partial").exists()
    # only the top layer trained: the word embeddings are the base model's
    base_embeddings = dict(before.model.named_parameters())
    for name, parameter in after.model.named_parameters():
        if "embeddings" in name:
            assert torch.equal(parameter, base_embeddings[name]), name


def test_bad_options_are_refused_before_any_work(tmp_path, tiny_st_dir):
    with pytest.raises(TeacherError, match="steps >= 1"):
        finetune_teacher(tiny_st_dir, [_groups_file(tmp_path)], tmp_path / "x", FinetuneOptions(steps=0))
