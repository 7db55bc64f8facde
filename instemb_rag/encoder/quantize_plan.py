"""Which linear layers run in int8: decided once per CPU kind and model, cached, and reported.

The calibration of ``quantize.py`` (embed the calibration texts again and again, putting the most
outlier-heavy layers back to float until the cosine bar is met) costs minutes on a slow CPU,
and its outcome follows from the weights, the recipe and the CPU's int8 kernel alone. So its
outcome, an ``Int8Plan``, is written to ``$INSTEMB_HOME/int8_plans/<key>.json``, the key being
a hash of everything that shapes it: the model's fp32 fingerprint, the CPU's relevant flags and
int8 kernel (``cpu_flags``), the recipe, torch's version and engine; beside it, ``<key>.safetensors``
holds the calibration texts' activation maxima that smoothing needs. A later load reads both
and runs no calibration text at all. Delete the files to calibrate again.

The plan also says what runs, which the commands print: how many layers are int8, how many
stayed float, and, when int8 was asked for but little or nothing was quantized, a warning that
says so (``int8_shortfall``).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..atomic import write_atomically, write_text_atomically
from ..choices import Precision
from ..paths import instemb_home
from .cpu_flags import cpu_kind, describe_cpu

PLAN_FORMAT = 1
PLAN_FOLDER = "int8_plans"
# Below this share of int8 layers, int8 was asked for but little of it runs: warn (and fail
# under --strict-precision).
LITTLE_INT8_SHARE = 0.5
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
GROUP_KEY = re.compile(r"^\d+\.(qkv|o|gate_up|down)$")

# What int8 gives, measured (docs/performance.md "Faster on a CPU"; benchmarks/README.md "int8 by CPU kind").
INT8_ON_VNNI = (
    "with AVX512-VNNI the default model runs 205 of its 210 linear layers in int8, 1.5x fp32 on documents "
    "and 1.9x on a query"
)
INT8_WITHOUT_VNNI = (
    "without AVX512-VNNI (AVX2 only, or AVX-VNNI only) fbgemm adds int8 products in saturating int16, so int8 "
    "runs with 7-bit weights: on an AVX2-only AMD EPYC the default model keeps 166 of 210 layers in int8, 1.3x "
    "fp32 on documents and on a query; where fewer layers hold the bar, int8 gives little or nothing"
)


class Int8ShortfallWarning(UserWarning):
    """precision='int8' was asked for, but few or none of the linear layers run in int8."""


@dataclass(frozen=True)
class Int8Plan:
    """The outcome of the calibration: which input groups (``layer.qkv``, ``.o``, ``.gate_up``,
    ``.down``) stay float, with the bit widths it was measured at."""

    weight_bits: int
    activation_bits: int
    linear_layers: int
    kept_float: tuple[str, ...] = ()
    kept_float_layers: int = 0
    calibration_cosine_min: float | None = None
    calibration_seconds: float = 0.0
    source: str = field(default="calibrated", compare=False)  # calibrated | cached
    # Per input group, max |activation| per channel on the calibration texts (what smoothing
    # needs); stored beside the JSON as safetensors.
    maxima: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def int8_layers(self) -> int:
        return self.linear_layers - self.kept_float_layers

    @property
    def effective_precision(self) -> str:
        """``fp32`` when no layer is int8: the encoder is then the fp32 one, weights untouched."""
        return (Precision.int8 if self.int8_layers else Precision.fp32).value

    def to_json(self) -> dict:
        data = {name: value for name, value in asdict(self).items() if name not in ("source", "maxima")}
        data["kept_float"] = list(self.kept_float)
        return data

    @classmethod
    def from_json(cls, data: dict, maxima: dict) -> Int8Plan:
        plan = cls(**{**data, "kept_float": tuple(data["kept_float"]), "source": "cached", "maxima": maxima})
        if not all(isinstance(key, str) and GROUP_KEY.match(key) for key in plan.kept_float):
            raise ValueError(f"kept_float names unknown layer groups: {plan.kept_float}")
        if not 0 <= plan.kept_float_layers <= plan.linear_layers or plan.weight_bits not in (7, 8):
            raise ValueError("layer counts or bit widths out of range")
        return plan


def plan_path(key_fields: dict) -> Path:
    """``$INSTEMB_HOME/int8_plans/<hash of the key fields>.json``."""
    digest = hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()[:32]
    return instemb_home() / PLAN_FOLDER / f"{digest}.json"


def maxima_path(path: Path) -> Path:
    return path.with_suffix(".safetensors")


def load_plan(path: Path, key_fields: dict, linear_layers: int) -> Int8Plan | None:
    """The cached plan for exactly these key fields, or None (absent, unreadable, another key,
    made for another layer count, or its maxima file missing or not the one it was written
    with: each means calibrating again, which rewrites both files)."""
    from safetensors.torch import load

    try:
        stored = json.loads(path.read_text())
        if stored.get("format") != PLAN_FORMAT or stored.get("key") != key_fields:
            return None
        data = maxima_path(path).read_bytes() if stored["maxima_sha256"] != EMPTY_SHA256 else b""
        if hashlib.sha256(data).hexdigest() != stored["maxima_sha256"]:
            return None
        plan = Int8Plan.from_json(stored["plan"], load(data) if data else {})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return plan if plan.linear_layers == linear_layers else None


def save_plan(path: Path, key_fields: dict, plan: Int8Plan) -> None:
    """The maxima first, then the JSON that names their hash (each written atomically)."""
    from safetensors.torch import save

    path.parent.mkdir(parents=True, exist_ok=True)
    data = save({name: tensor.contiguous() for name, tensor in plan.maxima.items()}) if plan.maxima else b""
    if data:
        write_atomically(maxima_path(path), lambda stream: stream.write(data))
    document = {
        "format": PLAN_FORMAT,
        "key": key_fields,
        "plan": plan.to_json(),
        "maxima_sha256": hashlib.sha256(data).hexdigest(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_text_atomically(path, json.dumps(document, indent=1) + "\n")


def build_report(plan: Int8Plan, path: Path, seconds: float, target: float) -> dict:
    """``encoder.quantization_report``: what runs, and how the decision was reached."""
    kind = cpu_kind()
    return {
        "requested_precision": "int8",
        "effective_precision": plan.effective_precision,
        "linear_layers": plan.linear_layers,
        "int8": plan.int8_layers,
        "kept_float": plan.kept_float_layers,
        "kept_float_groups": list(plan.kept_float),
        "weight_bits": plan.weight_bits,
        "activation_bits": plan.activation_bits,
        "activation_scale": "per_token",
        "calibration_cosine_min": plan.calibration_cosine_min,
        "calibration_target": target,
        "calibration_seconds": plan.calibration_seconds,
        "plan": plan.source,
        "plan_file": str(path),
        "int8_kernel": kind["int8_kernel"],
        "cpu": describe_cpu(kind),
        "quantize_seconds": round(seconds, 3),
    }


KERNEL_NAMES = {"vnni": "AVX512-VNNI kernels", "int16-pairs": "AVX2 kernels (no AVX512-VNNI)", "arm": "ARM kernels"}


def describe_int8(report: dict) -> str:
    """One line: ``int8: 203 of 210 linear layers int8, 7 kept float (...)``."""
    how = "calibrated now" if report["plan"] == "calibrated" else "plan cached"
    effective = "" if report["effective_precision"] == "int8" else "; effective precision fp32"
    kernel = KERNEL_NAMES.get(report["int8_kernel"], report["int8_kernel"])
    return (
        f"int8: {report['int8']} of {report['linear_layers']} linear layers int8, {report['kept_float']} kept float "
        f"({report['weight_bits']}-bit weights, {report['activation_bits']}-bit per-token activations, {kernel}; "
        f"{how}, {report['quantize_seconds']:.1f} s{effective})"
    )


def int8_shortfall(report: dict | None) -> str | None:
    """A warning when int8 was asked for and less than half of the linear layers run in int8."""
    if not report or report["int8"] >= LITTLE_INT8_SHARE * report["linear_layers"]:
        return None
    total = report["linear_layers"]
    if report["int8"] == 0:
        outcome = (
            f"none of the {total} linear layers runs in int8 on this CPU ({report['cpu']}): only in float did "
            f"they keep the calibration texts within cosine {report['calibration_target']} of fp32. This is the "
            "fp32 encoder: same vectors, same fingerprint, same speed."
        )
    else:
        outcome = (
            f"only {report['int8']} of the {total} linear layers run in int8 on this CPU ({report['cpu']}); the "
            f"others stayed float to keep the calibration texts within cosine {report['calibration_target']} of "
            "fp32, so expect little of int8's speed-up."
        )
    cpu_note = INT8_ON_VNNI if report["int8_kernel"] in ("vnni", "arm") else INT8_WITHOUT_VNNI
    return (
        f"precision int8 was asked for, but {outcome} For comparison: {cpu_note}. Decided once for this CPU and "
        f"model: {report['plan_file']} (delete it to decide again)."
    )


def warn_shortfall(report: dict) -> None:
    message = int8_shortfall(report)
    if message:
        warnings.warn(message, Int8ShortfallWarning, stacklevel=4)
