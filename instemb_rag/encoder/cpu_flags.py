"""What the CPU offers the int8 kernels: its instruction-set flags, and the kernel fbgemm picks.

PyTorch's int8 GEMM on x86 is fbgemm's. It multiplies uint8 activations by int8 weights. With
AVX512-VNNI (``vpdpbusd``) the products go straight into int32 and nothing saturates. Without
it (AVX2, AVX512 without VNNI, and CPUs with only the 256-bit AVX-VNNI, which fbgemm does not
use) the kernel is built on ``vpmaddubsw``, which adds two neighbouring products in a
*saturating int16*: 255 x 127 x 2 = 64770 overflows, 127 x 127 x 2 and 255 x 63 x 2 do not.
So 8-bit activations with 8-bit weights are exact only where fbgemm runs its AVX512-VNNI
kernels (or on ARM, whose qnnpack accumulates in int32); anywhere else one operand must give
up a bit.

``FBGEMM_ENABLE_INSTRUCTIONS`` (fbgemm's own switch: AVX2, AVX512, AVX512_256, AVX512_E1,
AVX512_E1_256) makes fbgemm use kernels below what the CPU offers, so it counts here too: a
benchmark can run the AVX2 kernels on a VNNI machine, and int8 then stays exact.
``INSTEMB_CPU_FLAGS`` (comma-separated) replaces the flags read from /proc/cpuinfo, to follow
another CPU's path; it can only make the choice more careful when it names fewer flags.

The int8 kernel kinds (``INT8_KERNELS``): ``vnni``, ``arm``, ``int16-pairs``, and ``none`` where
this torch build has no quantized engine at all (int8 is then refused, see ``quantize``).
"""

from __future__ import annotations

import os
import platform

from ..errors import InstEmbError

FLAGS_ENV = "INSTEMB_CPU_FLAGS"
FBGEMM_ISA_ENV = "FBGEMM_ENABLE_INSTRUCTIONS"
# The flags that decide which int8 / float kernels run (a cache key should not change with
# microcode or kernel-mitigation flags).
RELEVANT_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_int8",
    "amx_bf16",
    "asimd",
    "asimddp",
    "i8mm",
)
# fbgemm's ISA names whose kernels use VNNI (the rest fall back to vpmaddubsw).
FBGEMM_VNNI_ISAS = ("AVX512_E1", "AVX512_E1_256")
# Every answer of ``int8_kernel()``.
INT8_KERNELS = ("vnni", "arm", "int16-pairs", "none")


def read_cpu_flags(overridable: bool = True) -> frozenset[str]:
    """The CPU's feature flags (x86 ``flags``, ARM ``Features``; ``INSTEMB_CPU_FLAGS`` instead when
    set and ``overridable``); empty where /proc/cpuinfo is absent."""
    configured = os.environ.get(FLAGS_ENV) if overridable else None
    if configured is not None:
        return frozenset(flag.strip().lower() for flag in configured.split(",") if flag.strip())
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def is_arm() -> bool:
    return platform.machine().lower() in ("arm64", "aarch64")


def fbgemm_isa_override() -> str | None:
    value = os.environ.get(FBGEMM_ISA_ENV)
    return value.strip().upper() if value else None


def has_quantized_engine() -> bool:
    """Whether this torch build has an int8 engine (fbgemm / x86, oneDNN or qnnpack) for this CPU."""
    import torch

    return any(engine != "none" for engine in torch.backends.quantized.supported_engines)


def int8_kernel() -> str:
    """Which int8 dot product runs: ``vnni`` (exact for 8-bit x 8-bit), ``int16-pairs``
    (AVX2-style, saturating), ``arm`` (qnnpack, exact), or ``none`` (no quantized engine)."""
    if not has_quantized_engine():
        return "none"
    if is_arm():
        return "arm"
    override = fbgemm_isa_override()
    if "avx512_vnni" in read_cpu_flags() and (override is None or override in FBGEMM_VNNI_ISAS):
        return "vnni"
    return "int16-pairs"


def cpu_kind() -> dict:
    """What identifies this CPU for int8: machine, the relevant flags, fbgemm's override, the kernel."""
    flags = read_cpu_flags()
    return {
        "machine": platform.machine().lower(),
        "flags": sorted(flag for flag in RELEVANT_FLAGS if flag in flags),
        "fbgemm_isa": fbgemm_isa_override(),
        "int8_kernel": int8_kernel(),
    }


def describe_cpu(kind: dict | None = None) -> str:
    """One line for reports: ``x86_64, avx2 avx512_vnni ..., int8 kernel vnni``."""
    kind = kind or cpu_kind()
    flags = " ".join(kind["flags"]) or "no relevant flags"
    override = f", FBGEMM_ENABLE_INSTRUCTIONS={kind['fbgemm_isa']}" if kind["fbgemm_isa"] else ""
    return f"{kind['machine']}: {flags}{override}; int8 kernel {kind['int8_kernel']}"


# ---------------------------------------------------------------------------- what it multiplies
# What an int16 holds: kernels without VNNI (``int16-pairs``) add two uint8 x int8 products in one.
INT16_MAX = 32767
NO_INT8_KERNEL = (
    "This torch build has no quantized engine (fbgemm/onednn/qnnpack) for int8 on this CPU (int8 kernel: "
    "none), so precision='int8' cannot run here. Leave the precision at fp32, or install a torch build "
    "with one (PyTorch's x86 and ARM wheels have them)."
)


class Int8SaturationWarning(UserWarning):
    """An ``Int8Linear`` was given bit widths that this CPU's int8 kernel cannot multiply exactly."""


def int8_bits(kernel: str | None = None) -> tuple[int, int]:
    """(weight bits, activation bits) the int8 kernel of this CPU (or ``kernel``, one of
    ``cpu_flags.INT8_KERNELS``) multiplies without saturating."""
    kernel = kernel or int8_kernel()
    if kernel == "none":
        raise InstEmbError(NO_INT8_KERNEL)
    return (8, 8) if kernel in ("vnni", "arm") else (7, 8)


def int16_pair_sum(weight_bits: int, activation_bits: int) -> int:
    """The largest sum of two products a kernel without VNNI forms: uint8 activations (0..255, or
    0..127 reduced) times symmetric int8 weights (+-127 at 8 bits, +-63 at 7)."""
    return 2 * (2**activation_bits - 1) * (2 ** (weight_bits - 1) - 1)


def saturates(weight_bits: int, activation_bits: int, kernel: str | None = None) -> bool:
    """Whether the int8 kernel of this CPU (or ``kernel``) saturates at these bit widths: only
    ``int16-pairs`` can, where two products must fit an int16 (8-bit x 8-bit does not)."""
    kernel = kernel or int8_kernel()
    return kernel == "int16-pairs" and int16_pair_sum(weight_bits, activation_bits) > INT16_MAX
