"""Inference precision of the encoder's backbone: fp32 (default) or dynamic int8 on CPU.

``precision="int8"`` replaces the backbone's linear layers by ``Int8Linear``: weights int8 with
one symmetric scale per output channel, the input quantized per call to 8 bits with **one scale
per token**, int8 GEMM by PyTorch's quantized engine (fbgemm / oneDNN); float everywhere else
(embeddings, norms, rotary, attention, look-ahead vectors, pooling).

What it takes to stay within cosine 0.99 of fp32 (measured on the shipped default model, 16
held-out SciFact / Vaswani documents and queries with instructions; benchmarks/README.md):

- per-token activation scales. PyTorch's stock dynamic linear uses one scale for the whole
  input, so the first token's massive activations (a Llama's attention sink) and the other
  texts of the batch set every token's scale: min cosine 0.958 with everything else as below.
  Per token: 0.996.
- 8-bit activations. The stock module asks for a reduced (7-bit) range, against the int16
  saturation of int8 kernels without VNNI (``cpu_flags``); with 7-bit activations the default
  model's min cosine falls to 0.987. Where fbgemm runs its AVX512-VNNI kernels (or on ARM),
  weights and activations are both 8-bit; elsewhere the weights give up the bit instead
  (7-bit weights, 8-bit activations: 255 x 63 x 2 fits int16), which keeps far more layers
  within the bar than 7-bit activations did. The bit widths are part of the fingerprint.
- SmoothQuant smoothing (Xiao et al. 2023), which helps a little on top (0.996 against 0.989
  without it): a few input channels of ``down_proj`` (and of the normed residual stream feeding
  q/k/v, gate/up) carry activations hundreds of times larger than the rest. For each input
  channel j, s_j = max|x_j|^a / max|W_:,j|^(1-a); the activation is divided by s_j and the weight
  column multiplied by it. The division is folded into the preceding RMSNorm weight (q/k/v,
  gate/up) or into the rows of ``up_proj`` (down_proj), so in exact arithmetic the network is
  unchanged; the activation maxima come from a fixed calibration set of texts in this module,
  so the same weights always give the same quantized model.

With these, nearly every linear layer of the default model is int8 (205 of 210 on an
AVX512-VNNI CPU). A guard decides which are not: the calibration texts are embedded again by
the quantized model; while their cosine to the float embeddings is below ``CALIBRATION_TARGET``,
the input groups whose smoothed activations are still the most outlier-heavy (max / median over
channels) go back to float, 1, 2, 4, ... groups at a time, then the count is bisected down to
the fewest that meet the bar. The decision follows from the weights, the recipe and the CPU's
int8 kernel, so it is made once per CPU kind and model and cached (``quantize_plan``); when it
leaves no layer in int8 the encoder is the fp32 one, fingerprint included, and the weights are
not touched. ``encoder.quantization_report`` says what runs.

int8 is for inference only: training, saving and CUDA refuse it with a message that says so.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from typing import Iterable

import torch
from torch import nn

from ..choices import Precision, values
from ..errors import InstEmbError
from . import cpu_flags, quantize_plan
from .cpu_flags import (  # what this CPU's int8 kernel multiplies (re-exported: quantize.int8_bits, ...)
    INT16_MAX,
    NO_INT8_KERNEL,
    Int8SaturationWarning,
    cpu_kind,
    int8_bits,
    int16_pair_sum,
    saturates,
)
from .quantize_plan import Int8Plan

PRECISIONS = values(Precision)
DEFAULT_PRECISION = Precision.fp32.value
SMOOTHING_ALPHA = 0.5
# Version of the int8 recipe (per-token 8-bit activations since 2); part of the fingerprint.
RECIPE = 2
# Minimum cosine between int8 and float embeddings of the calibration texts (the acceptance
# bar on held-out texts is 0.99; the margin covers texts unlike the calibration set).
CALIBRATION_TARGET = 0.995

# Fixed calibration inputs: documents, queries and instructions of the kinds the encoder sees.
CALIBRATION = (
    (
        "The Ridgeline 2 tent weighs 1.9 kg and packs to 45 x 15 cm. Its fly is 70D ripstop nylon "
        "with a 3000 mm coating, taped seams and aluminium poles rated for strong wind.",
        None,
    ),
    ("Is this tent good for a long trip?", "focus on durability"),
    (
        "Aspirin reduced the risk of myocardial infarction in patients with stable angina in a "
        "randomised, placebo-controlled trial of 2,035 patients followed for four years.",
        None,
    ),
    (
        "Does vitamin D supplementation prevent fractures in older adults?",
        "Given a scientific claim, retrieve documents that support or refute the claim",
    ),
    (
        "what is the boiling point of water at high altitude",
        "Given a web search query, retrieve relevant passages that answer the query",
    ),
    (
        "The stove burns isobutane canisters, boils a litre of water in 3.5 minutes and folds to "
        "the size of a fist; in cold weather the flame drops unless the canister is kept warm.",
        None,
    ),
    (
        "Measurements of the electron density in the ionosphere obtained by rocket-borne probes "
        "are compared with values deduced from ground-based ionosonde records.",
        None,
    ),
    ("A man is playing a guitar on stage.", "Retrieve semantically similar text"),
    ("Which backpack carries heavy loads comfortably?", "focus on the hip belt and frame"),
    (
        "The patients who received the new drug did not show any improvement over placebo, "
        "contradicting earlier reports of a strong effect.",
        "find evidence that contradicts the claim",
    ),
)


def check_precision(precision: str, device: torch.device | str | None = None) -> str:
    """The precision name, validated for the device it will run on."""
    if precision not in PRECISIONS:
        raise InstEmbError(f"Unknown precision '{precision}'; choose one of: {', '.join(PRECISIONS)}.")
    if precision == "int8" and device is not None and torch.device(device).type != "cpu":
        raise InstEmbError(
            "precision='int8' (dynamic int8 quantization) runs on the CPU only; on a GPU the "
            "encoder already runs in bf16. Use --device cpu, or leave the precision at fp32."
        )
    if precision == "int8" and cpu_flags.int8_kernel() == "none":
        raise InstEmbError(NO_INT8_KERNEL)
    return precision


def fingerprint_fields(precision: str, plan: Int8Plan | None = None) -> dict:
    """What the precision adds to the encoder fingerprint: nothing for fp32, nor for an int8 plan
    that leaves every layer in float (that encoder *is* the fp32 one), so fingerprints of fp32
    indexes and caches stay as they were. Fields that did not exist before (7-bit weights, layers
    kept float) appear only when they apply, so earlier int8 fingerprints stay valid too."""
    if precision == DEFAULT_PRECISION or (plan is not None and plan.int8_layers == 0):
        return {}
    weight_bits, bits = (plan.weight_bits, plan.activation_bits) if plan else int8_bits()
    fields = {
        "precision": precision,
        "int8_recipe": RECIPE,
        "activation_scale": "per_token",
        "activation_bits": bits,
        "smoothing_alpha": SMOOTHING_ALPHA,
        "calibration_texts": len(CALIBRATION),
        "calibration_target": CALIBRATION_TARGET,
    }
    if weight_bits != 8:
        fields["weight_bits"] = weight_bits
    if plan is not None and plan.kept_float:
        fields["int8_kept_float"] = sorted(plan.kept_float)
    return fields


def refuse_training(precision: str, action: str = "trained") -> None:
    """int8 is for inference only: a quantized encoder can be neither trained nor saved."""
    if precision != DEFAULT_PRECISION:
        raise InstEmbError(
            f"This encoder was loaded with precision='{precision}', which is for inference only, "
            f"so it cannot be {action}: its linear layers are quantized and have no gradients. "
            "Train (and save) in fp32, the default, and load the trained model with "
            "precision='int8' to embed."
        )


# ---------------------------------------------------------------------------- calibration
def _decoder_layers(model: nn.Module) -> list[nn.Module]:
    base = getattr(model, "base_model", model)
    layers = getattr(base, "layers", None)
    return list(layers) if layers is not None else []


def _linear_inputs_absmax(encoder, linears: dict[str, nn.Linear]) -> dict[str, torch.Tensor]:
    """Per input channel, max |activation| over the calibration texts (one text per pass, no padding)."""
    maxima: dict[str, torch.Tensor] = {}

    def hook_for(name):
        def hook(_module, args):
            values = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(dim=0).float()
            maxima[name] = values if name not in maxima else torch.maximum(maxima[name], values)

        return hook

    handles = [module.register_forward_pre_hook(hook_for(name)) for name, module in linears.items()]
    try:
        with torch.inference_mode():
            for text, instruction in CALIBRATION:
                encoder.forward(encoder.collate([encoder.build_ids(text, instruction)]))
    finally:
        for handle in handles:
            handle.remove()
    return maxima


def _smoothing_scales(act_max: torch.Tensor, weights: Iterable[torch.Tensor], alpha: float) -> torch.Tensor:
    weight_max = torch.stack([w.detach().abs().amax(dim=0).float() for w in weights]).amax(dim=0)
    scales = act_max.clamp(min=1e-5).pow(alpha) / weight_max.clamp(min=1e-5).pow(1 - alpha)
    return scales.clamp(min=1e-5)


@torch.no_grad()
def smooth_backbone(encoder, alpha: float = SMOOTHING_ALPHA) -> int:
    """Move activation outliers into the weights (exact in real arithmetic); layers smoothed."""
    return len({key.split(".")[0] for key in _smooth(encoder, alpha)[0]})


@torch.no_grad()
def _smooth(encoder, alpha: float, maxima: dict[str, torch.Tensor] | None = None) -> tuple[dict, dict]:
    """Smooth in place. Returns (groups, maxima): per input group (``layer.qkv``, ``.o``,
    ``.gate_up``, ``.down``) the qualified names of its linear layers and how outlier-heavy its
    smoothed input still is; and the activation maxima per group, measured on the calibration
    texts unless given (a cached plan's) with the right shapes."""
    layers = _decoder_layers(encoder.model)
    linears: dict[str, nn.Linear] = {}
    plans = []
    for index, layer in enumerate(layers):
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        names = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj")
        parts = [getattr(attn, n, None) for n in names[:3]] + [getattr(mlp, n, None) for n in names[3:]]
        norms = [getattr(layer, "input_layernorm", None), getattr(layer, "post_attention_layernorm", None)]
        if any(not isinstance(p, nn.Linear) for p in parts) or any(getattr(n, "weight", None) is None for n in norms):
            continue  # not a Llama-style block: quantized without smoothing
        q, k, v, gate, up, down = parts
        linears[f"{index}.qkv"], linears[f"{index}.gate_up"], linears[f"{index}.down"] = q, gate, down
        output = getattr(attn, "o_proj", None)
        if isinstance(output, nn.Linear):
            linears[f"{index}.o"] = output
        plans.append((index, norms[0], (q, k, v), norms[1], (gate, up), up, down))
    if not plans:
        return {}, {}
    names = {module: name for name, module in encoder.model.base_model.named_modules()}
    if maxima is None or any(
        key not in maxima or maxima[key].shape != (linear.in_features,) for key, linear in linears.items()
    ):
        maxima = _linear_inputs_absmax(encoder, linears)
    groups = {}

    def outliers(smoothed_max: torch.Tensor) -> float:
        return float(smoothed_max.max() / smoothed_max.median().clamp(min=1e-8))

    for index, norm_attn, qkv, norm_mlp, gate_up, up, down in plans:
        for norm, group, key in ((norm_attn, qkv, "qkv"), (norm_mlp, gate_up, "gate_up")):
            act_max = maxima[f"{index}.{key}"]
            scales = _smoothing_scales(act_max, [lin.weight for lin in group], alpha)
            norm.weight.div_(scales.to(norm.weight.dtype))
            for lin in group:
                lin.weight.mul_(scales.to(lin.weight.dtype))
            groups[f"{index}.{key}"] = ([names[lin] for lin in group], outliers(act_max / scales))
        act_max = maxima[f"{index}.down"]
        scales = _smoothing_scales(act_max, [down.weight], alpha)
        up.weight.div_(scales[:, None].to(up.weight.dtype))
        if up.bias is not None:
            up.bias.div_(scales.to(up.bias.dtype))
        down.weight.mul_(scales.to(down.weight.dtype))
        groups[f"{index}.down"] = ([names[down]], outliers(act_max / scales))
        if f"{index}.o" in maxima:  # not smoothed (its input is the attention output), still rankable
            groups[f"{index}.o"] = ([names[linears[f"{index}.o"]]], outliers(maxima[f"{index}.o"]))
    return groups, maxima


def _calibration_embeddings(encoder) -> torch.Tensor:
    with torch.inference_mode():
        pooled = [
            encoder.forward(encoder.collate([encoder.build_ids(text, instruction)]))[0].float()
            for text, instruction in CALIBRATION
        ]
    return torch.nn.functional.normalize(torch.stack(pooled), dim=-1)


class Int8Linear(nn.Module):
    """A linear layer with int8 weights (one symmetric scale per output channel) whose input is
    quantized per call to 8 bits with **one scale per token** (per row), run by the int8 GEMM of
    PyTorch's quantized engine (fbgemm / oneDNN, ``quantized::linear_dynamic``).

    That kernel quantizes its whole input with one scale. Each row is therefore divided by its
    own max |x| first and the output row multiplied back: exact in real arithmetic (the layer is
    linear and the bias is added afterwards), and each token gets the full int8 range. Without
    it, the one token with massive activations (the first one, in a Llama) and any other text in
    the batch set the scale of every token.

    The bit widths default to ``int8_bits()``, what this CPU's int8 kernel multiplies exactly
    (8-bit weights with VNNI or on ARM, 7-bit ones elsewhere). Bit widths given that saturate the
    kernel (8-bit weights and activations without VNNI) are built as asked, with an
    ``Int8SaturationWarning`` that says what they cost.
    """

    def __init__(self, linear: nn.Linear, weight_bits: int | None = None, activation_bits: int | None = None):
        super().__init__()
        kernel = cpu_flags.int8_kernel()
        default_weight_bits, default_activation_bits = int8_bits(kernel)  # refuses a CPU with no int8 kernel
        weight_bits = default_weight_bits if weight_bits is None else weight_bits
        activation_bits = default_activation_bits if activation_bits is None else activation_bits
        if weight_bits not in range(2, 9):
            raise InstEmbError(f"Int8Linear: weight_bits={weight_bits}, but int8 weights take 2 to 8 bits.")
        if activation_bits not in (7, 8):
            raise InstEmbError(
                f"Int8Linear: activation_bits={activation_bits}, but the int8 kernel quantizes activations to "
                "8 bits or, reduced, to 7: choose 7 or 8 (or leave it out)."
            )
        if saturates(weight_bits, activation_bits, kernel):
            warnings.warn(
                f"Int8Linear with {weight_bits}-bit weights and {activation_bits}-bit activations saturates this "
                f"CPU's int8 kernel ({kernel}: without AVX512-VNNI fbgemm adds two uint8 x int8 products in a "
                f"saturating int16, and {int16_pair_sum(weight_bits, activation_bits)} > {INT16_MAX}): its "
                "outputs are wrong (on a random 64-input layer, relative errors of 0.12-0.23 where about 0.01 is "
                "expected). Leave weight_bits and activation_bits out for this CPU's int8_bits() = "
                f"{int8_bits(kernel)}, which fit.",
                Int8SaturationWarning,
                stacklevel=2,
            )
        weight = linear.weight.detach().float()
        # 8 bits: [-127, 127]; 7 bits: [-63, 63], what kernels without VNNI multiply exactly.
        levels = 2 ** (weight_bits - 1) - 1
        scales = (weight.abs().amax(dim=1) / levels).clamp(min=1e-8).double()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensor constructors announce their deprecation
            qweight = torch.quantize_per_channel(
                weight, scales, torch.zeros_like(scales, dtype=torch.long), 0, torch.qint8
            )
            self._packed = torch.ops.quantized.linear_prepack(qweight, None)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().float(), requires_grad=False)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight_bits, self.activation_bits, self.reduce_range = weight_bits, activation_bits, activation_bits < 8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, shape[-1]).float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-6)
        out = torch.ops.quantized.linear_dynamic(rows / scale, self._packed, self.reduce_range).mul_(scale)
        if self.bias is not None:
            out = out.add_(self.bias)
        return out.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"int8 ({self.weight_bits}-bit weights), per-token activations"
        )


def _swap(root: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, child, module)


def select_engine() -> None:
    engines = torch.backends.quantized.supported_engines
    for engine in ("x86", "fbgemm", "onednn", "qnnpack"):
        if engine in engines:
            torch.backends.quantized.engine = engine
            return


def plan_key_fields(model_fingerprint: str, weight_bits: int, bits: int) -> dict:
    """Everything the calibration's outcome depends on: the key of its cached plan."""
    texts = hashlib.sha256(json.dumps(CALIBRATION).encode()).hexdigest()[:16]
    return {
        "model_fingerprint": model_fingerprint,
        "cpu": cpu_kind(),
        "int8_recipe": RECIPE,
        "weight_bits": weight_bits,
        "activation_bits": bits,
        "smoothing_alpha": SMOOTHING_ALPHA,
        "calibration_target": CALIBRATION_TARGET,
        "calibration_texts": texts,
        "torch": torch.__version__,
        "engine": torch.backends.quantized.engine,
    }


def prepare_int8(encoder, fingerprint_with) -> str:
    """Quantize a freshly loaded float32 CPU encoder in place; return its fingerprint.

    ``fingerprint_with(fields)`` hashes the encoder's float weights with these precision fields
    (``{}``: the fp32 fingerprint, which keys the cached plan). Only the decoder stack
    (``model.base_model``) is touched: the LM head is never run by the encoder.
    """
    if encoder.model.dtype != torch.float32:
        raise InstEmbError(f"int8 quantization starts from float32 weights, not {encoder.model.dtype}.")
    started = time.perf_counter()
    select_engine()
    fp32_fingerprint = fingerprint_with({})
    plan, path = plan_int8(encoder, fp32_fingerprint)
    fields = fingerprint_fields("int8", plan)
    fingerprint = fingerprint_with(fields) if fields else fp32_fingerprint
    apply_plan(encoder, plan)
    report = quantize_plan.build_report(plan, path, time.perf_counter() - started, CALIBRATION_TARGET)
    encoder.quantization_report = report
    quantize_plan.warn_shortfall(report)
    return fingerprint


def plan_int8(encoder, model_fingerprint: str):
    """(plan, its file): the cached plan for this model and CPU kind, else a fresh calibration,
    then cached. The encoder's weights are as they were, either way. The plan carries the
    calibration texts' activation maxima, so applying a cached one runs no calibration text."""
    weight_bits, bits = int8_bits()
    key = plan_key_fields(model_fingerprint, weight_bits, bits)
    path = quantize_plan.plan_path(key)
    linear_layers = sum(isinstance(module, nn.Linear) for module in encoder.model.base_model.modules())
    plan = quantize_plan.load_plan(path, key, linear_layers)
    if plan is None:
        plan = _calibrate(encoder, weight_bits, bits)
        try:
            quantize_plan.save_plan(path, key, plan)
        except OSError as error:  # a read-only cache costs the next load a calibration, nothing more
            warnings.warn(
                f"The int8 plan could not be cached at {path} ({error}); the next load calibrates again.", stacklevel=4
            )
    return plan, path


def _calibrate(encoder, weight_bits: int, bits: int) -> Int8Plan:
    """Smooth, quantize every layer, and find the fewest most-outlier-heavy input groups that
    must stay float for the calibration texts to meet ``CALIBRATION_TARGET``. Afterwards the
    float layers and the unsmoothed weights are back in place, bit for bit."""
    started = time.perf_counter()
    base = encoder.model.base_model
    saved = [
        (param, param.detach().clone()) for layer in _decoder_layers(encoder.model) for param in layer.parameters()
    ]
    float_linears = {name: module for name, module in base.named_modules() if isinstance(module, nn.Linear)}
    try:
        reference = _calibration_embeddings(encoder)
        groups, maxima = _smooth(encoder, SMOOTHING_ALPHA)
        int8_linears = {name: Int8Linear(module, weight_bits, bits) for name, module in float_linears.items()}
        # Most outlier-heavy groups first; ties (and groups of non-Llama layers) in layer order.
        ranked = sorted(groups, key=lambda key: -groups[key][1])

        def cosine_with_float(count: int) -> float:
            keep = {name for key in ranked[:count] for name in groups[key][0]}
            for name, module in float_linears.items():
                _swap(base, name, module if name in keep else int8_linears[name])
            return float((_calibration_embeddings(encoder) * reference).sum(dim=-1).min())

        count, cosine = _fewest_float_groups(cosine_with_float, len(ranked))
    finally:
        for name, module in float_linears.items():
            _swap(base, name, module)
        with torch.no_grad():
            for param, original in saved:
                param.copy_(original)
    kept = tuple(ranked[:count])
    return Int8Plan(
        weight_bits=weight_bits,
        activation_bits=bits,
        linear_layers=len(float_linears),
        kept_float=kept,
        kept_float_layers=sum(len(groups[key][0]) for key in kept),
        calibration_cosine_min=cosine,
        calibration_seconds=round(time.perf_counter() - started, 3),
        maxima=maxima,
    )


def _fewest_float_groups(cosine_with_float, total: int) -> tuple[int, float]:
    """(count, cosine): the fewest leading ranked groups in float that meet the target. Doubling
    steps (1, 3, 7, ... groups) find a passing count; bisection against the last failing one
    then takes back what the last doubling overshot."""
    failing, cosine = 0, cosine_with_float(0)
    if cosine >= CALIBRATION_TARGET or total == 0:
        return 0, cosine
    step = 1
    while True:
        passing = min(failing + step, total)
        cosine = cosine_with_float(passing)
        if cosine >= CALIBRATION_TARGET or passing == total:
            break
        failing, step = passing, step * 2
    best = (passing, cosine)
    while best[0] - failing > 1:
        middle = (failing + best[0]) // 2
        cosine = cosine_with_float(middle)
        if cosine >= CALIBRATION_TARGET:
            best = (middle, cosine)
        else:
            failing = middle
    return best


def apply_plan(encoder, plan: Int8Plan) -> None:
    """Smooth and put every linear layer outside the plan's float groups in int8; with no int8
    layer in the plan, nothing is touched (the encoder stays the fp32 one)."""
    if plan.int8_layers:
        base = encoder.model.base_model
        groups, _ = _smooth(encoder, SMOOTHING_ALPHA, plan.maxima)
        keep = {name for key in plan.kept_float for name in groups.get(key, ((), 0.0))[0]}
        linears = [(name, module) for name, module in base.named_modules() if isinstance(module, nn.Linear)]
        for name, module in linears:
            if name not in keep:
                _swap(base, name, Int8Linear(module, plan.weight_bits, plan.activation_bits))
    for param in encoder.model.parameters():
        param.requires_grad_(False)
