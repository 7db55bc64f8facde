"""The CUDA path: exercised on CPU where it can be (device and dtype choice, SDPA, faiss GPU
detection answering False cleanly); the parts that need a GPU skip with the reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from instemb_rag.encoder.device import attention_implementation, default_dtype, resolve_device
from instemb_rag.errors import InstEmbError
from instemb_rag.index.stores import faiss_gpu as accel

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
needs_faiss_gpu = pytest.mark.skipif(
    not accel.faiss_gpu_available(), reason="faiss has no GPU support here (install instemb-rag[gpu])"
)


def test_auto_device_picks_cuda_when_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")


def test_dtype_is_bf16_on_cuda_and_fp32_on_cpu():
    assert default_dtype(torch.device("cuda")) == torch.bfloat16
    assert default_dtype(torch.device("cpu")) == torch.float32


def test_backbone_runs_sdpa_attention(tiny_encoder):
    assert attention_implementation(tiny_encoder.model) == "sdpa"


def test_bf16_encoder_matches_fp32_and_shared_prefix_works(tiny_model_dir):
    # bf16 is what CUDA runs; CPU supports bf16 too, so the dtype path (look-ahead vectors
    # cast to the embedding dtype, float32 output) is checked here without a GPU.
    from instemb_rag import InstEmbEncoder

    fp32 = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    bf16 = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    bf16.model.to(torch.bfloat16)
    text, instructions = "the tent is light and durable", ["focus on weight", None]
    reference = fp32.encode_queries([text] * 2, instructions)
    low = bf16.encode_queries([text] * 2, instructions)
    assert low.dtype == np.float32
    assert (np.sum(reference * low, axis=1) > 0.99).all()
    shared = bf16.encode_instructions(text, instructions)
    assert (np.sum(shared * low, axis=1) > 0.99).all()


def test_faiss_gpu_detection_is_clean_without_gpu_support():
    import faiss

    available = accel.faiss_gpu_available()
    assert isinstance(available, bool)
    if not hasattr(faiss, "StandardGpuResources"):
        assert available is False


def test_to_gpu_index_explains_how_to_install_when_unavailable():
    import faiss

    if accel.faiss_gpu_available():
        pytest.skip("faiss GPU support present: the refusal path does not apply")
    index = faiss.IndexFlatIP(8)
    with pytest.raises(InstEmbError, match=r"instemb-rag\[gpu\]"):
        accel.to_gpu_index(index)
    assert accel.maybe_to_gpu_index(index) is index
    assert accel.to_cpu_index(index) is index


@needs_faiss_gpu
def test_gpu_index_search_matches_cpu():
    import faiss

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 32)).astype(np.float32)
    cpu = faiss.IndexFlatIP(32)
    cpu.add(vectors)
    gpu = accel.to_gpu_index(cpu)
    _, cpu_ids = cpu.search(vectors[:5], 3)
    _, gpu_ids = gpu.search(vectors[:5], 3)
    np.testing.assert_array_equal(cpu_ids, gpu_ids)
    assert accel.to_cpu_index(gpu).ntotal == 200


@needs_cuda
def test_encoder_on_cuda_uses_bf16_and_matches_cpu(tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    gpu = InstEmbEncoder.from_pretrained(tiny_model_dir, device="auto", lookahead_length=4, max_length=64)
    cpu = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    assert gpu.device.type == "cuda" and gpu.model.dtype == torch.bfloat16
    text, instructions = "the tent is light and durable", ["focus on weight", None]
    on_gpu = gpu.encode_queries([text] * 2, instructions)
    assert (np.sum(on_gpu * cpu.encode_queries([text] * 2, instructions), axis=1) > 0.99).all()
    assert (np.sum(on_gpu * gpu.encode_instructions(text, instructions), axis=1) > 0.99).all()
