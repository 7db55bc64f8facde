"""The memory of recent document embeddings: extra query-side negatives by hand, the same
false-negative rule as the micro-batch, a bounded queue, and a safetensors round trip."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from instemb_rag.datasets.records import TrainingRecord
from instemb_rag.errors import CheckpointError
from instemb_rag.losses import instruction_retrieval_loss
from instemb_rag.training.lookahead.negative_memory import NegativeMemory


def _records(*pairs):
    return [TrainingRecord(text=f"q{i}", instruction="find", output=out, group=g) for i, (out, g) in enumerate(pairs)]


def test_memory_entries_join_only_the_query_side_denominators_by_hand():
    torch.manual_seed(0)
    q, d, memory = torch.randn(2, 5), torch.randn(2, 5), torch.randn(3, 5)
    shared = torch.zeros(2, 2, dtype=torch.bool)
    excluded = torch.tensor([[False, True, False], [False, False, False]])  # entry 1 is record 0's own text
    loss = instruction_retrieval_loss(q, d, shared, 0.1, memory=memory, memory_excluded=excluded)
    qn, dn, mn = (F.normalize(x, dim=-1) for x in (q, d, memory))
    by_hand = 0.0
    for i in range(2):
        kept = [m for k, m in enumerate(mn) if not excluded[i, k]]
        forward = torch.exp(qn[i] @ torch.cat([dn, torch.stack(kept)]).T / 0.1)
        backward = torch.exp(dn[i] @ qn.T / 0.1)  # documents rank queries: the memory plays no part
        by_hand += -math.log(forward[i] / forward.sum()) - math.log(backward[i] / backward.sum())
    assert loss.item() == pytest.approx(by_hand / 4, rel=1e-5)
    # All entries excluded: the same loss as without a memory.
    everything = torch.ones(2, 3, dtype=torch.bool)
    plain = instruction_retrieval_loss(q, d, shared, 0.1)
    assert instruction_retrieval_loss(q, d, shared, 0.1, memory=memory, memory_excluded=everything).item() == (
        pytest.approx(plain.item(), rel=1e-6)
    )
    with pytest.raises(ValueError, match="memory_excluded must be"):
        instruction_retrieval_loss(q, d, shared, 0.1, memory=memory)


def test_memory_gives_no_gradient_to_its_entries():
    memory = torch.randn(3, 4, requires_grad=True)
    loss = instruction_retrieval_loss(
        torch.randn(2, 4, requires_grad=True),
        torch.randn(2, 4),
        torch.zeros(2, 2, dtype=torch.bool),
        memory=memory,
        memory_excluded=torch.zeros(2, 3, dtype=torch.bool),
    )
    loss.backward()
    assert memory.grad is None


def test_the_queue_keeps_the_newest_entries_and_excludes_same_output_or_group():
    memory = NegativeMemory(size=3, dimension=2)
    assert memory.negatives("cpu") is None and memory.excluded(_records(("a", None)), "cpu").shape == (1, 0)
    memory.push(torch.tensor([[1.0, 0.0], [2.0, 0.0]]), _records(("old", None), ("claim-S", "claim")))
    memory.push(torch.tensor([[3.0, 0.0], [4.0, 0.0]]), _records(("x", None), ("y", "other")))
    assert memory.outputs == ["claim-S", "x", "y"]  # the oldest entry is forgotten
    assert memory.negatives("cpu")[:, 0].tolist() == [2.0, 3.0, 4.0]
    asking = _records(("claim-R", "claim"), ("x", None), ("z", None))
    assert memory.excluded(asking, "cpu").tolist() == [
        [True, False, False],  # the same claim's other evidence is not a negative
        [False, True, False],  # the same output text is not either
        [False, False, False],
    ]
    with pytest.raises(ValueError, match="expected"):
        memory.push(torch.zeros(1, 3), _records(("a", None)))


def test_memory_round_trips_and_refuses_a_checkpoint_without_it_or_of_another_size(tmp_path):
    memory = NegativeMemory(size=4, dimension=2)
    memory.push(torch.tensor([[0.5, -1.0], [2.0, 3.0]]), _records(("a", "g"), ("b", None)))
    memory.save(tmp_path)
    again = NegativeMemory(size=4, dimension=2)
    again.load(tmp_path)
    assert torch.equal(again.vectors, memory.vectors) and again.entries() == memory.entries()
    with pytest.raises(CheckpointError, match="same training.negative_memory"):
        NegativeMemory(size=8, dimension=2).load(tmp_path)
    with pytest.raises(CheckpointError, match="without training.negative_memory"):
        NegativeMemory(size=4, dimension=2).load(tmp_path / "elsewhere")
