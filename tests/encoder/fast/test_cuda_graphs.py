"""The CUDA path (issue 57): a forward without host reads, shape buckets, batches by tokens.

On the CPU: the forward compiles with fullgraph=True at two bucket shapes (no graph break, so no
host read in what dynamo traces), runs on the meta device (no value read back in the eager code a
CUDA graph captures), and the buckets' padding and batching give the eager embeddings; the CPU
path itself never enters the CUDA path. With a GPU: capture and replay, graphs on and off, equal
to eager within bf16 rounding (skipped without one).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder.fast import batch_plan, cuda_graphs
from instemb_rag.encoder.fast.batch_plan import CudaOptions, cuda_options, plan_batches, set_cuda_options
from instemb_rag.encoder.fast.cuda_graphs import CudaRunner, encode_fast, static_outputs
from instemb_rag.encoder.modules.forward import causal_mask
from instemb_rag.encoder.modules.projection import Projection
from instemb_rag.errors import InstEmbError

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")

TEXTS = [
    "the tent is light and durable",
    "which stove is good in cold wind ?",
    "packed size",
    "tent",
    "",
    "the stove and the tent are light , durable and good in wind",
]
# (An empty text needs an instruction here: the tiny template adds no token of its own, and a row
# of look-ahead slots alone has no last input token to pool.)
INSTRUCTIONS = [None, "focus on weight", "focus on weight", "durable", "durable", ""]


def with_head(encoder):
    torch.manual_seed(0)
    return encoder.with_projection(Projection(encoder.hidden_size, 16))


def right_padded(encoder, texts, instructions, width):
    """[ids; mask] of these inputs right-padded to ``width`` (what a bucket holds)."""
    id_lists = [encoder.build_ids(text, instruction) for text, instruction in zip(texts, instructions)]
    return cuda_graphs._host_inputs(id_lists, len(id_lists), width, encoder.tokenizer.pad_token_id)


# ---------------------------------------------------------------- item 1 on the CPU
def test_forward_compiles_fullgraph_at_two_bucket_shapes(tiny_encoder):
    """Backbone + look-ahead insertion + pooling + projection under torch.compile(fullgraph=True,
    dynamic=False): a graph break (a .item(), a branch on a value, a shape read back) would raise.
    aot_eager traces what inductor would, without paying its C++ build on a small CPU."""
    import torch._dynamo

    encoder = with_head(tiny_encoder)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(
        lambda ids, mask, causal: static_outputs(encoder, ids, mask, causal),
        fullgraph=True,
        dynamic=False,
        backend="aot_eager",
    )
    with torch.inference_mode():
        for rows, width in [(1, 32), (8, 64)]:
            texts, instructions = (TEXTS * 2)[:rows], (INSTRUCTIONS * 2)[:rows]
            host = right_padded(encoder, texts, instructions, width)
            got = compiled(host[0], host[1], causal_mask(width, host.device))
            pooled, embedded = encoder.encode_pooled(texts, instructions)
            np.testing.assert_allclose(got[:, : encoder.hidden_size], pooled, atol=1e-5)
            np.testing.assert_allclose(got[:, encoder.hidden_size :], embedded, atol=1e-5)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2  # one graph per bucket shape


def test_forward_reads_no_value_back_on_the_host(tiny_encoder):
    """The eager code a CUDA graph captures, run on the meta device (tensors without values):
    any .item(), bool() of a tensor or data-dependent shape raises. The eager path's
    ``states`` does read the padding mask back (transformers' mask building): that is why
    torch.cuda.graph could not capture it."""
    encoder = with_head(tiny_encoder).to("meta")
    ids = torch.zeros((8, 32), dtype=torch.long, device="meta")
    mask = torch.zeros((8, 32), dtype=torch.long, device="meta")
    with torch.inference_mode():
        out = static_outputs(encoder, ids, mask, causal_mask(32, ids.device))
        assert out.shape == (8, encoder.hidden_size + encoder.dimension) and out.device.type == "meta"
        with pytest.raises(Exception, match="meta"):
            encoder.states({"input_ids": ids, "attention_mask": mask, "position_ids": mask})


# ---------------------------------------------------------------- the batch template (item 3)
def test_batch_template_gives_build_ids_ids(tiny_model_dir):
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=16)
    texts = TEXTS + ["tent " * 40]  # the last one is cut to fit
    instructions = INSTRUCTIONS + ["focus on weight"]
    batch = encoder.template.build_ids_batch(encoder.tokenizer, texts, instructions, 4, 16)
    assert batch == [encoder.build_ids(text, instruction) for text, instruction in zip(texts, instructions)]
    assert encoder.template.build_ids_batch(encoder.tokenizer, [], [], 4, 16) == []
    long_instruction = "focus on the weight of the tent and the stove in cold wind"
    with pytest.raises(InstEmbError, match="leaving no room") as single:
        encoder.build_ids("tent", long_instruction)
    with pytest.raises(InstEmbError, match="leaving no room") as batched:
        encoder.template.build_ids_batch(encoder.tokenizer, ["tent"], [long_instruction], 4, 16)
    assert str(single.value) == str(batched.value)


# ---------------------------------------------------------------- buckets and batches (items 2, 4)
def test_plan_puts_every_row_once_in_buckets_and_token_batches():
    options = CudaOptions(batch_tokens=1024)
    lengths = [40, 300, 31, 33, 290, 280, 200, 12, 64, 65, 270, 500, 10] + [45] * 40
    planned = plan_batches(lengths, options, graphs=True)
    rows = [row for batch in planned for row in batch.rows]
    assert sorted(rows) == list(range(len(lengths)))
    assert [lengths[row] for row in rows] == sorted(lengths, reverse=True)
    for batch in planned:
        assert batch.width == max(lengths[row] for row in batch.rows)
        if batch.bucket is None:  # eager: longer than every bucket; tokens and padding bounded
            assert batch.width > max(options.graph_lengths)
            padded = len(batch.rows) * batch.width
            assert padded <= options.batch_tokens or len(batch.rows) == 1
            assert padded - sum(lengths[row] for row in batch.rows) <= options.max_padding * padded
        else:
            size, length = batch.bucket
            assert size in options.graph_batches and size >= len(batch.rows) and length >= batch.width
            assert length in options.graph_lengths and length == options.bucket_length(batch.width)
            assert {options.bucket_length(lengths[row]) for row in batch.rows} == {length}
            assert len(batch.rows) <= options.largest_batch(length)
    off = plan_batches(lengths, options, graphs=False)
    assert all(batch.bucket is None for batch in off)
    assert sum(len(batch.rows) for batch in off) == len(lengths)
    assert plan_batches([], options, graphs=True) == []


@pytest.mark.parametrize("graphs", [True, False])
def test_padded_buckets_and_token_batches_equal_eager(tiny_model_dir, graphs):
    """The buckets' padding (extra rows, extra positions) and the batches by tokens, run eagerly on
    the CPU through the buffers a graph would hold: the eager path's embeddings."""
    encoder = with_head(InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=80))
    texts = TEXTS * 3 + ["tent and stove " * 20, "good wind " * 30]
    instructions = INSTRUCTIONS * 3 + ["focus on weight", None]
    options = CudaOptions(graphs=graphs, batch_tokens=256, graph_batches=(1, 4, 8), graph_lengths=(8, 16, 32))
    runner = CudaRunner(encoder, capture=False)
    with torch.inference_mode():
        pooled, embedded = encode_fast(encoder, texts, instructions, False, runner, options)
        reference = encoder.encode_pooled(texts, instructions)
    np.testing.assert_allclose(pooled, reference[0], atol=1e-5)
    np.testing.assert_allclose(embedded, reference[1], atol=1e-5)
    assert bool(runner.buckets) == graphs and pooled.dtype == torch.float32
    encoder.__dict__["_cuda_runner"] = runner  # a copy (the trainer's frozen LLM) makes its own
    assert copy.deepcopy(encoder).__dict__["_cuda_runner"] is None


def test_a_failed_capture_warns_once_and_runs_eagerly(tiny_encoder, monkeypatch):
    """A backbone whose forward syncs with the host cannot be captured: the encoder says so once and
    goes on eagerly through the same buffers, with the same embeddings."""

    def refuse(self, runner, device):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    monkeypatch.setattr(cuda_graphs._Bucket, "_capture", refuse)
    runner = CudaRunner(tiny_encoder, capture=True)
    options = CudaOptions(graph_batches=(1, 8), graph_lengths=(16, 32))
    with torch.inference_mode(), pytest.warns(UserWarning, match="capture failed .*runs eagerly"):
        pooled, embedded = encode_fast(tiny_encoder, TEXTS, INSTRUCTIONS, False, runner, options)
    assert runner.capture is False and runner.capture_error == "operation not permitted when stream is capturing"
    reference = tiny_encoder.encode_pooled(TEXTS, INSTRUCTIONS)
    np.testing.assert_allclose(embedded, reference[1], atol=1e-5)


# ---------------------------------------------------------------- the CPU path stays as it was
def test_the_cpu_path_never_enters_the_cuda_path(tiny_encoder, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the CPU path took the CUDA path")

    monkeypatch.setattr(cuda_graphs, "encode_fast", refuse)
    monkeypatch.setattr(cuda_graphs, "runner_of", refuse)
    assert not cuda_graphs.fast_path_applies(tiny_encoder)
    assert cuda_graphs.encode_on_cuda(tiny_encoder, TEXTS, INSTRUCTIONS) is None
    assert cuda_graphs.describe_cuda_path(tiny_encoder) is None
    vectors = tiny_encoder.encode_queries(TEXTS, INSTRUCTIONS)
    assert vectors.shape == (len(TEXTS), tiny_encoder.dimension) and "_cuda_runner" not in tiny_encoder.__dict__


def test_options_from_the_environment_and_per_encoder(tiny_encoder, monkeypatch):
    monkeypatch.delenv("INSTEMB_CUDA_GRAPHS", raising=False)
    monkeypatch.delenv("INSTEMB_CUDA_FAST", raising=False)
    assert cuda_options(tiny_encoder) == CudaOptions()
    monkeypatch.setenv("INSTEMB_CUDA_GRAPHS", "0")
    monkeypatch.setenv("INSTEMB_CUDA_BATCH_TOKENS", "4096")
    assert cuda_options(tiny_encoder).graphs is False and cuda_options(tiny_encoder).batch_tokens == 4096
    fingerprint = tiny_encoder.fingerprint
    set_cuda_options(tiny_encoder, graphs=True, enabled=False)
    assert cuda_options(tiny_encoder).graphs is True and cuda_options(tiny_encoder).enabled is False
    assert tiny_encoder.fingerprint == fingerprint  # no option changes what an embedding is
    assert batch_plan.CudaOptions().largest_batch(256) == 128 and CudaOptions(batch_tokens=1000).largest_batch(256) == 2


# ---------------------------------------------------------------- on a GPU
@pytest.fixture()
def cuda_encoder(tiny_model_dir):
    return with_head(InstEmbEncoder.from_pretrained(tiny_model_dir, device="cuda", lookahead_length=4, max_length=320))


def cosines(a, b):
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@needs_cuda
def test_forward_captures_as_a_cuda_graph_and_replays(cuda_encoder):
    """Item 1 on CUDA: torch.cuda.graph captures the forward; a replay on new inputs gives eager's."""
    host = right_padded(cuda_encoder, TEXTS, INSTRUCTIONS, 32).cuda()
    static = torch.zeros_like(host)
    causal = causal_mask(32, host.device)
    with torch.inference_mode():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            static_outputs(cuda_encoder, static[0], static[1], causal)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = static_outputs(cuda_encoder, static[0], static[1], causal)
        static.copy_(host)
        graph.replay()
        eager = static_outputs(cuda_encoder, host[0], host[1], causal)
    torch.testing.assert_close(output, eager, atol=1e-2, rtol=1e-2)


@needs_cuda
def test_queries_through_graphs_equal_eager_and_capture_once(cuda_encoder):
    texts, instructions = TEXTS * 11, INSTRUCTIONS * 11
    set_cuda_options(cuda_encoder, enabled=False)
    eager = cuda_encoder.encode_queries(texts, instructions)
    set_cuda_options(cuda_encoder, enabled=True, graphs=True)
    graphed = cuda_encoder.encode_queries(texts, instructions)
    runner = cuda_encoder.__dict__["_cuda_runner"]
    captured = dict(runner.buckets)
    assert captured and all(bucket.graph is not None for bucket in captured.values())
    again = cuda_encoder.encode_queries(texts, instructions)
    assert runner.buckets == captured  # captured on first use only
    np.testing.assert_array_equal(graphed, again)
    assert (cosines(graphed, eager) > 0.999).all()
    one = cuda_encoder.encode_queries(TEXTS[:1], INSTRUCTIONS[:1])
    assert (cosines(one, eager[:1]) > 0.999).all()


@needs_cuda
def test_graphs_off_and_document_batches_by_tokens(cuda_encoder):
    documents = ["the tent and the stove are light " * 40, "good in cold wind " * 50, "tent", "stove " * 70]
    set_cuda_options(cuda_encoder, enabled=False)
    eager = cuda_encoder.encode_documents(documents)
    set_cuda_options(cuda_encoder, enabled=True, graphs=False, batch_tokens=1024)
    by_tokens = cuda_encoder.encode_documents(documents)
    assert not cuda_encoder.__dict__["_cuda_runner"].buckets  # graphs off: nothing captured
    assert (cosines(by_tokens, eager) > 0.999).all()
    set_cuda_options(cuda_encoder, graphs=True)
    assert (cosines(cuda_encoder.encode_documents(documents), eager) > 0.999).all()


@needs_cuda
def test_compile_on_cuda_takes_the_graph_path_and_shared_prefix_still_works(cuda_encoder, monkeypatch, tmp_path):
    from instemb_rag.encoder.fast.compiled import compile_encoder

    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path))
    monkeypatch.setenv("INSTEMB_CUDA_GRAPHS", "0")
    compile_encoder(cuda_encoder)
    assert cuda_options(cuda_encoder).graphs and cuda_options(cuda_encoder).enabled
    assert all(getattr(block, "_compiled_call_impl", None) is None for block in cuda_encoder.model.base_model.layers)
    assert "CUDA graphs" in cuda_graphs.describe_cuda_path(cuda_encoder)
    text, instructions = TEXTS[0], ["focus on weight", None, "durable"]
    shared = cuda_encoder.encode_instructions(text, instructions)
    assert (cosines(shared, cuda_encoder.encode_queries([text] * 3, instructions)) > 0.999).all()
