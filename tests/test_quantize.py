"""precision="int8": quantized linear layers, close to fp32, its own fingerprint, inference only."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from instemb_rag import InstEmbEncoder
from instemb_rag.cli import app
from instemb_rag.encoder import cpu_flags, quantize, quantize_plan
from instemb_rag.errors import InstEmbError

TEXTS = [
    "the tent is light and durable in rain and wind . the frame uses poles and a nylon floor",
    "the stove is light . packed size 10 cm . good in cold night camp",
    "which backpack is good for a long trip ?",
]
INSTRUCTIONS = [None, "focus on weight", "focus on durability"]
# What each int8 kernel kind multiplies exactly: (weight bits, activation bits).
BITS = {"vnni": (8, 8), "arm": (8, 8), "int16-pairs": (7, 8)}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """int8 plans are cached under INSTEMB_HOME: each test starts without any."""
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))


def load(tiny_model_dir, precision="fp32"):
    return InstEmbEncoder.from_pretrained(
        tiny_model_dir, device="cpu", lookahead_length=4, max_length=64, precision=precision
    )


@pytest.fixture()
def int8_encoder(tiny_model_dir, int8_kernel_kind):
    """The tiny model in int8, once with this machine's int8 kernel and once per kernel kind."""
    return load(tiny_model_dir, "int8")


def test_int8_replaces_every_decoder_linear_and_stays_close(tiny_encoder, int8_encoder, int8_kernel_kind):
    linears = [m for m in int8_encoder.model.base_model.modules() if isinstance(m, torch.nn.Linear)]
    quantized = [m for m in int8_encoder.model.base_model.modules() if isinstance(m, quantize.Int8Linear)]
    report = int8_encoder.quantization_report
    assert report["linear_layers"] == 2 * 7  # q k v o gate up down, two layers
    assert report["int8_kernel"] == int8_kernel_kind
    assert all((m.weight_bits, m.activation_bits) == BITS[int8_kernel_kind] for m in quantized)
    assert len(quantized) == report["int8"] > 0 and len(linears) == 14 - report["int8"]
    assert report["calibration_cosine_min"] >= quantize.CALIBRATION_TARGET
    reference = tiny_encoder.encode_queries(TEXTS, INSTRUCTIONS)
    low = int8_encoder.encode_queries(TEXTS, INSTRUCTIONS)
    cosines = (reference * low).sum(axis=1)
    assert cosines.min() > 0.99, cosines
    assert not np.allclose(reference, low, atol=1e-6)  # it really ran the int8 kernels


def test_int8_linear_scales_each_token_on_its_own(int8_kernel_kind):
    """One token with activations 1000x the others (a Llama's first token) must not cost the
    other tokens their precision: each row is quantized with its own scale. The bit widths are
    the kernel's own (issue 47: 8-bit weights, the former default, saturate a kernel without
    VNNI, relative errors 0.12-0.23)."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    low = quantize.Int8Linear(linear)
    assert (low.weight_bits, low.activation_bits) == BITS[int8_kernel_kind] == quantize.int8_bits()
    quiet = torch.randn(5, 64)
    loud = torch.randn(1, 64) * 1000
    with torch.inference_mode():
        alone = low(quiet)
        beside_loud = low(torch.cat([loud, quiet]))[1:]
        exact = linear(quiet)
    torch.testing.assert_close(beside_loud, alone, rtol=1e-5, atol=1e-5)  # the loud row changes nothing
    error = (alone - exact).norm(dim=1) / exact.norm(dim=1)
    assert error.max() < 0.02, error  # 8-bit (or 7-bit) weights, 8-bit activations: about 1 % relative error
    assert low(quiet[None]).shape == (1, 5, 32)  # any leading shape


@pytest.mark.parametrize("kind", ["vnni", "arm", "int16-pairs"])
def test_bit_widths_follow_the_int8_kernel_and_are_in_the_fingerprint_fields(monkeypatch, kind):
    monkeypatch.setattr(cpu_flags, "int8_kernel", lambda: kind)
    assert quantize.int8_bits() == quantize.int8_bits(kind) == BITS[kind]
    assert not quantize.saturates(*BITS[kind])  # what is chosen never saturates the kernel it was chosen for
    fields = quantize.fingerprint_fields("int8")
    assert fields["activation_scale"] == "per_token" and fields["int8_recipe"] == quantize.RECIPE
    assert fields["activation_bits"] == 8
    if kind == "int16-pairs":  # AVX2, or AVX512 without VNNI
        assert fields["weight_bits"] == 7
    else:
        assert "weight_bits" not in fields  # the fields int8 indexes have had


def test_every_kernel_kind_the_probe_can_answer_is_covered():
    assert set(cpu_flags.INT8_KERNELS) == set(BITS) | {"none"}
    assert cpu_flags.int8_kernel() in cpu_flags.INT8_KERNELS


@pytest.mark.parametrize(
    ("kind", "bits", "saturating"),
    [
        ("int16-pairs", (8, 8), True),  # 255 x 127 x 2 = 64770 > 32767
        ("int16-pairs", (7, 8), False),  # 255 x 63 x 2 = 32130
        ("int16-pairs", (8, 7), False),  # 127 x 127 x 2 = 32258
        ("vnni", (8, 8), False),  # int32 accumulation
        ("arm", (8, 8), False),
    ],
)
def test_asking_for_bits_the_kernel_cannot_multiply_warns_what_it_costs(monkeypatch, kind, bits, saturating):
    monkeypatch.setattr(cpu_flags, "int8_kernel", lambda: kind)
    linear = torch.nn.Linear(16, 4)
    if saturating:
        with pytest.warns(quantize.Int8SaturationWarning, match="saturates .* int8 kernel") as caught:
            layer = quantize.Int8Linear(linear, *bits)
        message = str(caught[0].message)
        assert "64770 > 32767" in message and "relative errors of 0.12-0.23" in message
        assert "int8_bits() = (7, 8)" in message
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", quantize.Int8SaturationWarning)
            layer = quantize.Int8Linear(linear, *bits)
    assert (layer.weight_bits, layer.activation_bits) == bits  # built as asked, either way


def test_bit_widths_outside_the_int8_kernels_range_are_refused():
    linear = torch.nn.Linear(16, 4)
    with pytest.raises(InstEmbError, match="weight_bits=9, but int8 weights take 2 to 8 bits"):
        quantize.Int8Linear(linear, weight_bits=9)
    with pytest.raises(InstEmbError, match="activation_bits=6.*choose 7 or 8"):
        quantize.Int8Linear(linear, activation_bits=6)


def test_without_an_int8_kernel_int8_is_refused_and_fp32_still_loads(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(cpu_flags, "int8_kernel", lambda: "none")
    with pytest.raises(InstEmbError, match="no quantized engine .*int8 kernel: none.*fp32"):
        quantize.check_precision("int8", "cpu")
    with pytest.raises(InstEmbError, match="no quantized engine"):
        quantize.Int8Linear(torch.nn.Linear(16, 4))
    with pytest.raises(InstEmbError, match="no quantized engine"):
        load(tiny_model_dir, "int8")
    assert load(tiny_model_dir).precision == "fp32"


def test_the_probe_says_none_when_torch_has_no_quantized_engine(monkeypatch):
    monkeypatch.setattr(torch._C, "_supported_qengines", lambda: [])  # what supported_engines reads
    assert torch.backends.quantized.supported_engines == [] and cpu_flags.int8_kernel() == "none"
    monkeypatch.setattr(torch._C, "_supported_qengines", lambda: [0])  # 0: torch's "none" engine
    assert torch.backends.quantized.supported_engines == ["none"] and cpu_flags.int8_kernel() == "none"


def test_guard_puts_layers_back_to_float_until_the_target_is_met(tiny_model_dir, tiny_encoder, monkeypatch):
    monkeypatch.setattr(quantize, "CALIBRATION_TARGET", 2.0)  # unreachable: every group goes back
    with pytest.warns(quantize_plan.Int8ShortfallWarning, match="none of the 14 linear layers"):
        unquantizable = load(tiny_model_dir, "int8")
    report = unquantizable.quantization_report
    assert report["int8"] == 0 and len(report["kept_float_groups"]) == 2 * 4  # qkv, o, gate_up, down
    assert report["effective_precision"] == "fp32"
    assert all(
        isinstance(m, torch.nn.Linear)
        for name, m in unquantizable.model.base_model.named_modules()
        if name.endswith("_proj")
    )
    # Nothing is int8, so this is the fp32 encoder: weights not even smoothed, same vectors, and
    # the fp32 fingerprint (an fp32 index is read by it, and an index it builds by fp32).
    np.testing.assert_array_equal(
        unquantizable.encode_queries(TEXTS, INSTRUCTIONS), tiny_encoder.encode_queries(TEXTS, INSTRUCTIONS)
    )
    assert unquantizable.fingerprint == tiny_encoder.fingerprint


def test_smoothing_alone_leaves_the_embeddings_unchanged(tiny_model_dir, tiny_encoder):
    smoothed = load(tiny_model_dir)
    before = {n: p.detach().clone() for n, p in smoothed.model.named_parameters()}
    assert quantize.smooth_backbone(smoothed) == 2
    changed = [n for n, p in smoothed.model.named_parameters() if not torch.equal(before[n], p)]
    assert any("input_layernorm" in n for n in changed) and any("down_proj" in n for n in changed)
    np.testing.assert_allclose(
        smoothed.encode_queries(TEXTS, INSTRUCTIONS), tiny_encoder.encode_queries(TEXTS, INSTRUCTIONS), atol=1e-4
    )


def test_precision_is_part_of_the_fingerprint(tiny_model_dir, tiny_encoder, int8_encoder):
    assert int8_encoder.precision == "int8" and tiny_encoder.precision == "fp32"
    assert int8_encoder.fingerprint != tiny_encoder.fingerprint
    # Deterministic: a second int8 load (calibration included) gives the same fingerprint and vectors.
    again = load(tiny_model_dir, "int8")
    assert again.fingerprint == int8_encoder.fingerprint
    np.testing.assert_array_equal(again.encode_documents(TEXTS), int8_encoder.encode_documents(TEXTS))
    # fp32 fingerprints are what they were before precisions existed (old indexes stay valid).
    assert quantize.fingerprint_fields("fp32") == {}


def test_int8_is_inference_only(tiny_model_dir, tmp_path):
    int8_encoder = load(tiny_model_dir, "int8")
    with pytest.raises(InstEmbError, match="inference only.*cannot be trained"):
        int8_encoder.train()
    int8_encoder.eval()  # switching to eval mode is fine
    with pytest.raises(InstEmbError, match="cannot be saved"):
        int8_encoder.save(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()


def test_bad_precisions_are_refused_clearly():
    with pytest.raises(InstEmbError, match="Unknown precision 'int4'"):
        quantize.check_precision("int4")
    with pytest.raises(InstEmbError, match="CPU only"):
        quantize.check_precision("int8", "cuda")
    assert quantize.check_precision("int8", "cpu") == "int8"


def test_shared_prefix_path_works_on_int8(int8_encoder):
    shared = int8_encoder.encode_instructions(TEXTS[0], INSTRUCTIONS)
    plain = int8_encoder.encode_queries([TEXTS[0]] * 3, INSTRUCTIONS)
    # int8 activations are quantized per call, so the two paths agree to quantization noise.
    assert ((shared * plain).sum(axis=1) > 0.99).all()


def cli(*args):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def test_cli_index_and_query_keep_precisions_apart(tiny_model_dir, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tent.md").write_text("the tent is durable nylon . good in rain .")
    (docs / "stove.txt").write_text("the stove is light . packed size 10 cm .")
    index_dir = str(tmp_path / "index")
    model = ["--model", str(tiny_model_dir), "--device", "cpu"]
    code, output = cli("index", str(docs), "--index-dir", index_dir, "--no-progress", "--precision", "int8", *model)
    assert code == 0, output
    code, output = cli("query", "durable tent", "--index-dir", index_dir, *model)
    assert code != 0 and "fingerprint" in output and "--precision int8" in output
    code, output = cli("query", "durable tent", "--index-dir", index_dir, "--json", "--precision", "int8", *model)
    assert code == 0, output
    assert '"source": "tent.md"' in output or '"source": "stove.txt"' in output
    # Adding files at the other precision is refused rather than mixing vectors in one index.
    code, output = cli("index", str(docs), "--index-dir", index_dir, "--no-progress", *model)
    assert code != 0 and "fingerprint" in output


def test_cli_train_refuses_int8(tmp_path):
    code, output = cli("train", "--precision", "int8", "--output-dir", str(tmp_path / "run"))
    assert code == 2 and "inference only" in output
    assert not (tmp_path / "run").exists()
