"""DynamicBatcher in-process with a recording encoder: what shares a forward pass and what not.

No timing: windows are long and batches fire because they are full, or because of drain()."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from instemb_rag.queries import QueryKnobs
from instemb_rag.serve.batching import BatchingOptions, DynamicBatcher, QueueFullError


class RecordingSide:
    """A document side whose parts read 10 tokens more than the text (usage counts them all)."""

    def tokens(self, text, instruction=None):
        return 10 + len(text.split()) + len((instruction or "").split())


class RecordingEncoder:
    """encode_queries / encode_documents that remember each call; vector = [len(text), weight]
    (weight: the call's llm_weight, 1.0 without one)."""

    dimension = 2
    document_side = RecordingSide()

    def __init__(self):
        self.calls: list[tuple] = []

    def _vectors(self, texts, weight=1.0):
        return np.array([[len(text), weight] for text in texts], dtype=np.float32)

    def encode_queries(self, texts, instructions, batch_size=16, llm_weight=None):
        self.calls.append(("query", list(texts), list(instructions)) + (() if llm_weight is None else (llm_weight,)))
        return self._vectors(texts, 1.0 if llm_weight is None else llm_weight)

    def encode_documents(self, texts, instruction=None, batch_size=16):
        self.calls.append(("document", list(texts), instruction))
        return self._vectors(texts)

    def query_tokens(self, text, instruction):
        return len(text.split()) + len((instruction or "").split())


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


def test_usage_counts_documents_on_the_document_side_and_queries_by_query_tokens():
    encoder = RecordingEncoder()
    batcher = DynamicBatcher(encoder, BatchingOptions(max_batch_size=2, max_wait_ms=600_000))  # each job fills one
    documents, queries = run(
        batcher, [(["a b", "c"], [None, "x y"], "document"), (["q r s", "t"], ["one", None], "query")]
    )
    assert documents.tokens == (10 + 2) + (10 + 3) and queries.tokens == 4 + 1


def test_queries_under_different_llm_weights_never_share_a_call():
    encoder = RecordingEncoder()
    batcher = DynamicBatcher(encoder, BatchingOptions(max_batch_size=2, max_wait_ms=600_000))

    async def scenario():
        jobs = [(["a"], 0.2), (["bb"], None), (["ccc"], 0.9), (["dddd"], 0.2), (["eeeee"], None), (["ffffff"], 0.9)]
        return await asyncio.gather(
            *(batcher.submit(texts, [None], "query", QueryKnobs(llm_weight=weight)) for texts, weight in jobs)
        )

    batcher.start()
    try:
        results = asyncio.run(scenario())
    finally:
        batcher.close()
    assert sorted(encoder.calls, key=str) == sorted(
        [
            ("query", ["a", "dddd"], [None, None], 0.2),
            ("query", ["bb", "eeeee"], [None, None]),
            ("query", ["ccc", "ffffff"], [None, None], 0.9),
        ],
        key=str,
    )
    assert [float(result.vectors[0, 1]) for result in results] == [
        pytest.approx(w) for w in (0.2, 1.0, 0.9, 0.2, 1.0, 0.9)
    ]


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
        def encode_queries(self, texts, instructions, batch_size=16, llm_weight=None):
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
