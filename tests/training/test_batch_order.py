"""One batch order for every mode, and the batches runs read before the modes shared it.

tests/training/data/batch_orders_before_issue45.json holds the batches the three order classes
of the time (DataOrder, GeometryOrder, ContrastOrder) gave for the inputs of
batch_order_inputs.py: a run resumed from a checkpoint written then must read the same ones.
"""

import json
from pathlib import Path

from batch_order_inputs import inputs

from instemb_rag.training.batch_order import BatchOrder

BEFORE = json.loads((Path(__file__).parent / "data" / "batch_orders_before_issue45.json").read_text())


def test_each_mode_reads_the_batches_of_runs_written_before_the_modes_shared_one_class():
    groups, lengths, items, item_lengths, records = inputs()
    assert [BatchOrder.records(groups, 6, 2, 42).step(s) for s in range(12)] == BEFORE["records"]
    assert [BatchOrder.records(groups, 6, 1, 3, lengths).step(s) for s in range(20)] == BEFORE["records_bucketed"]
    assert [BatchOrder.items(items, item_lengths, 7, 42).step(s) for s in range(20)] == BEFORE["items"]
    assert [BatchOrder.contrast(records, 4, 5).step(s) for s in range(15)] == BEFORE["contrast"]


def test_a_resumed_order_reads_the_same_batches_from_any_step():
    groups, lengths, items, item_lengths, records = inputs()
    for make in (
        lambda: BatchOrder.records(groups, 6, 2, 42, lengths),
        lambda: BatchOrder.items(items, item_lengths, 7, 42),
        lambda: BatchOrder.contrast(records, 4, 5),
    ):
        whole = make()
        expected = [whole.step(s) for s in range(30)]
        resumed = make()  # a fresh process that starts at step 17, then walks on
        assert [resumed.step(s) for s in range(17, 30)] == expected[17:]
        assert [resumed.step(s) for s in range(5)] == expected[:5]  # and back (epochs recomputed)
