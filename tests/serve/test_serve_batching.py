"""DynamicBatcher in-process with a recording encoder: what shares a forward pass and what not.

No timing: windows are long and batches fire because they are full, or because of drain()."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from instemb_rag.serve.batching import BatchingOptions, DynamicBatcher, QueueFullError


class RecordingEncoder:
    """encode_queries / encode_documents that remember each call; vector = [len(text), hash bit]."""

    dimension = 2

    def __init__(self):
        self.calls: list[tuple[str, list[str], object]] = []

    def _vectors(self, texts):
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)

    def encode_queries(self, texts, instructions, batch_size=16):
        self.calls.append(("query", list(texts), list(instructions)))
        return self._vectors(texts)

    def encode_documents(self, texts, instruction=None, batch_size=16):
        self.calls.append(("document", list(texts), instruction))
        return self._vectors(texts)

    def build_ids(self, text, instruction):
        return [0] * (len(text.split()) + len((instruction or "").split()))


async def gather_with(batcher: DynamicBatcher, jobs: list[tuple[list[str], list, str]]):
    tasks = [asyncio.create_task(batcher.submit(texts, instructions, kind)) for texts, instructions, kind in jobs]
    return await asyncio.gather(*tasks)


def run(batcher: DynamicBatcher, jobs):
    batcher.start()
    try:
        return asyncio.run(gather_with(batcher, jobs))
    finally:
        batcher.close()


def test_queries_under_different_instructions_share_one_call_and_results_go_back_in_order():
    encoder = RecordingEncoder()
    batcher = DynamicBatcher(encoder, BatchingOptions(max_batch_size=4, max_wait_ms=600_000))
    results = run(
        batcher, [(["a"], ["one"], "query"), (["bb", "ccc"], ["two", None], "query"), (["dddd"], [None], "query")]
    )
    assert encoder.calls == [("query", ["a", "bb", "ccc", "dddd"], ["one", "two", None, None])]
    assert [result.vectors[:, 0].tolist() for result in results] == [[1.0], [2.0, 3.0], [4.0]]
    assert [result.tokens for result in results] == [2, 3, 1]
    assert batcher.forward_batches == 1 and batcher.largest_batch == 4


def test_queries_and_documents_do_not_mix_and_documents_group_by_instruction():
    encoder = RecordingEncoder()
    batcher = DynamicBatcher(encoder, BatchingOptions(max_batch_size=2, max_wait_ms=600_000))
    run(batcher, [(["q1"], ["x"], "query"), (["d1", "d2"], [None, "y"], "document"), (["q2"], [None], "query")])
    assert ("query", ["q1", "q2"], ["x", None]) in encoder.calls
    assert ("document", ["d1"], None) in encoder.calls and ("document", ["d2"], "y") in encoder.calls
    assert batcher.forward_batches == 2


def test_without_batching_each_request_runs_alone():
    encoder = RecordingEncoder()
    batcher = DynamicBatcher(encoder, BatchingOptions(enabled=False, max_batch_size=8))
    run(batcher, [(["a"], [None], "query"), (["b"], [None], "query"), (["c", "d"], [None, None], "query")])
    assert sorted(call[1] for call in encoder.calls) == [["a"], ["b"], ["c", "d"]]


def test_full_queue_refuses_and_close_runs_what_waits():
    encoder = RecordingEncoder()
    batcher = DynamicBatcher(encoder, BatchingOptions(max_batch_size=4, max_wait_ms=600_000, max_queue=2))

    async def scenario():
        first = asyncio.create_task(batcher.submit(["a"], [None], "query"))
        while batcher.queued_inputs < 1:
            await asyncio.sleep(0)
        with pytest.raises(QueueFullError, match="--max-queue 2"):
            await batcher.submit(["b", "c"], [None, None], "query")
        batcher.drain()  # what shutdown does: no more waiting for company
        return await first

    batcher.start()
    try:
        result = asyncio.run(scenario())
    finally:
        batcher.close()
    assert result.vectors.shape == (1, 2)
    assert encoder.calls == [("query", ["a"], [None])]


def test_encoder_errors_reach_every_waiting_request():
    class Failing(RecordingEncoder):
        def encode_queries(self, texts, instructions, batch_size=16):
            raise ValueError("boom")

    batcher = DynamicBatcher(Failing(), BatchingOptions(max_batch_size=2, max_wait_ms=600_000))
    batcher.start()

    async def scenario():
        return await asyncio.gather(
            batcher.submit(["a"], [None]), batcher.submit(["b"], [None]), return_exceptions=True
        )

    try:
        errors = asyncio.run(scenario())
    finally:
        batcher.close()
    assert [str(error) for error in errors] == ["boom", "boom"]
