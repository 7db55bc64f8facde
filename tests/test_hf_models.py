"""instemb_rag/hf_models.py: a known architecture imported directly and its weights memory-mapped give
the model ``from_pretrained`` gives (tensors, buffers, config, outputs); any other folder goes
through ``from_pretrained``."""

from __future__ import annotations

import shutil

import torch

from instemb_rag.hf_models import _load_mapped, known_class, load_pretrained, model_class


def assert_same_model(ours, theirs):
    assert type(ours) is type(theirs) and not ours.training
    ours_state, their_state = ours.state_dict(), theirs.state_dict()
    assert ours_state.keys() == their_state.keys()
    for name, tensor in ours_state.items():
        assert tensor.dtype == their_state[name].dtype and torch.equal(tensor, their_state[name]), name
    their_buffers = dict(theirs.named_buffers())
    for name, buffer in ours.named_buffers():
        assert torch.equal(buffer, their_buffers[name]), name
    assert ours.config.to_dict() == theirs.config.to_dict()


def test_a_llama_folder_loads_mapped_as_from_pretrained_loads_it(tiny_model_dir):
    from transformers.models.llama.modeling_llama import LlamaForCausalLM

    options = {"dtype": torch.float32, "attn_implementation": "sdpa"}
    ours = load_pretrained(tiny_model_dir, "causal_lm", **options)
    theirs = LlamaForCausalLM.from_pretrained(tiny_model_dir, **options)
    assert_same_model(ours, theirs)
    assert ours.lm_head.weight is ours.model.embed_tokens.weight  # tied, stored once
    ids = torch.arange(4, 20)[None]
    with torch.inference_mode():
        assert torch.equal(ours(input_ids=ids).logits, theirs(input_ids=ids).logits)
    # The weights are the file's, mapped: a write (merging a LoRA) changes the model, not the file.
    with torch.no_grad():
        ours.model.norm.weight.add_(1.0)
    assert torch.equal(
        load_pretrained(tiny_model_dir, "causal_lm", **options).model.norm.weight, theirs.model.norm.weight
    )


def test_another_dtype_is_converted_as_from_pretrained_converts_it(tiny_model_dir):
    ours = load_pretrained(tiny_model_dir, "causal_lm", dtype=torch.bfloat16)
    theirs = known_class(tiny_model_dir, "causal_lm").from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    assert ours.dtype == torch.bfloat16
    assert_same_model(ours, theirs)


def test_a_sentence_encoders_bert_loads_mapped_as_from_pretrained_loads_it(tiny_st_dir):
    from transformers.models.bert.modeling_bert import BertModel

    ours = load_pretrained(tiny_st_dir, "base")
    assert_same_model(ours, BertModel.from_pretrained(tiny_st_dir))


def test_a_file_under_other_names_goes_through_from_pretrained(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = shutil.copytree(tiny_model_dir, tmp_path / "renamed")
    tensors = load_file(str(folder / "model.safetensors"))
    save_file(
        {name.replace("model.", "base.", 1): tensor for name, tensor in tensors.items()},
        str(folder / "model.safetensors"),
    )
    assert _load_mapped(known_class(folder, "causal_lm"), folder, torch.float32, {}) is None


def test_an_unknown_architecture_is_resolved_by_the_auto_class(tmp_path):
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32)).save_pretrained(tmp_path)
    assert known_class(tmp_path, "causal_lm") is None and model_class(tmp_path, "causal_lm") is AutoModelForCausalLM
    assert type(load_pretrained(tmp_path, "causal_lm", dtype=torch.float32)) is GPT2LMHeadModel


EXIT_PROBE = """
import logging, sys
from instemb_rag.hf_models import load_pretrained
if sys.argv[2] == "info":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    logging.getLogger("torch._dynamo.utils").setLevel(logging.INFO)
load_pretrained(sys.argv[1], "causal_lm")
"""


def test_dynamos_exit_report_runs_only_where_it_is_logged(tiny_model_dir):
    """torch._dynamo's exit hook imports tabulate to format a log line that is off by default: not
    imported at the exit of a process that loaded a model, still printed where its logger is on."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("tabulate")
    quiet = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", EXIT_PROBE, str(tiny_model_dir), "off"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "torch._dynamo" in quiet.stderr  # transformers' model code imported it
    assert "| tabulate" not in quiet.stderr
    logged = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, str(tiny_model_dir), "info"], capture_output=True, text=True, timeout=300
    )
    assert logged.returncode == 0, logged.stderr[-2000:]
    assert "TorchDynamo compilation metrics" in logged.stdout + logged.stderr
