"""What every `instemb-rag` command shares: the exit-code table, error reporting, --device.

Exit codes (the same for every command; docs/usage.md "Exit codes"):

    0  success
    1  unexpected failure (a bug: the traceback is shown)
    2  bad input: an invalid option or argument (typer's own usage errors use 2 too), or
       documents, records, a config, a query or a task that cannot be used as given
    3  busy: another process holds the index lock (`index --wait SECONDS` queues)
    4  index folder: missing, damaged, built with another model or by a newer version
    5  model: the model (its folder) cannot be loaded (not found, incomplete, other base weights)
    6  a Ray worker or node failed during `index --ray` (files committed before it are kept: run again)
  130  `index` interrupted by Ctrl-C (every finished batch is kept: run the same command to go on)
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

import typer

from ..choices import Precision
from ..exit_codes import ExitCode, exit_code_for  # noqa: F401  (the table, one owner: exit_codes.py)
from .notes import error_line, say  # noqa: F401  (say: its home is typer-free; the lean client prints notes and errors with them)

if TYPE_CHECKING:
    from ..encoder import InstEmbEncoder


def fail(error: Exception | str, code: int | None = None) -> NoReturn:
    """Print ``error: ...`` on stderr and exit with the code of that error."""
    typer.echo(error_line(str(error), color=True), err=True)  # click drops the colour off a terminal
    raise typer.Exit(int(code if code is not None else exit_code_for(error)))


DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(value: str | None) -> str | None:
    """typer callback: a device torch understands, checked before any model is loaded."""
    if value is not None and not DEVICE_PATTERN.match(value):
        raise typer.BadParameter(f"{value!r} is not a device: use auto, cpu, cuda, cuda:N or mps.")
    return value


def device_option(default: str | None = "auto", help: str = "auto | cpu | cuda | cuda:N | mps"):
    return typer.Option(default, "--device", help=help, callback=check_device)


def precision_option():
    return typer.Option(
        Precision.fp32,
        "--precision",
        help="fp32 (default) | int8: dynamic int8 linear layers on "
        "the CPU (faster; inference only). An index is queried at the precision it was built with.",
    )


def compile_option():
    return typer.Option(
        False,
        "--compile",
        help="Opt-in torch.compile of the backbone (cached under INSTEMB_HOME; the first run compiles for minutes).",
    )


def strict_precision_option():
    return typer.Option(
        False,
        "--strict-precision",
        help="With --precision int8: exit 2 when fewer than half of the linear layers run in int8 on this CPU "
        "(without it, a warning).",
    )


def load_encoder(
    model: str | None,
    device: str,
    precision: Precision | str = Precision.fp32,
    compile: bool = False,
    strict_precision: bool = False,
    pooling: str | None = None,
    lookahead_length: int | None = None,
    untrained: bool = False,
) -> InstEmbEncoder:
    """The encoder, loaded at this precision; with int8, what runs is printed on stderr first.

    The one way a command loads an encoder (query, eval, ...): any reference ``encoder.load_model``
    resolves (``concat:`` loads each side through here). ``pooling`` and ``lookahead_length``
    override the model's (None: its own); ``untrained`` builds fresh look-ahead tokens over
    the backbone ``model`` (eval --untrained: 8 tokens, DAAP pooling)."""
    import time

    from ..encoder import InstEmbEncoder, load_model
    from ..encoder.load import is_composite_reference

    if is_composite_reference(model):
        return load_model(
            model,
            device,
            precision=Precision(precision).value,
            part_loader=lambda part: load_encoder(part, device, precision, compile, strict_precision),
        )
    started = time.perf_counter()
    with int8_warnings_reported_here():
        if untrained:
            encoder = InstEmbEncoder.from_backbone(
                model,
                lookahead_length=8 if lookahead_length is None else lookahead_length,
                pooling=pooling or "daap",
                device=device,
                precision=Precision(precision).value,
            )
        else:
            encoder = load_model(
                model,
                device=device,
                pooling=pooling,
                lookahead_length=lookahead_length,
                precision=Precision(precision).value,
            )
    report_precision(encoder, strict_precision, time.perf_counter() - started)
    if compile:
        from ..encoder.fast.compiled import compile_encoder

        compile_encoder(encoder)
    report_cuda_path(encoder)
    return encoder


def report_cuda_path(encoder) -> None:
    """On CUDA: one line on stderr naming the graph path and what its first use costs (issue 57)."""
    if getattr(getattr(encoder, "device", None), "type", None) != "cuda":
        return
    from rich.console import Console

    from ..encoder.fast.cuda_graphs import describe_cuda_path

    note = describe_cuda_path(encoder)
    if note:
        say(Console(stderr=True), "cuda", note, style="cyan")


@contextmanager
def int8_warnings_reported_here():
    """The library's Int8ShortfallWarning, silenced: ``report_precision`` says the same, once."""
    import warnings

    from ..encoder.quantize_plan import Int8ShortfallWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Int8ShortfallWarning)
        yield


def report_precision(encoder, strict: bool, load_seconds: float) -> dict | None:
    """With int8: print what runs (layers in int8 / kept float, the load time) on stderr, and a
    warning (exit 2 under --strict-precision) when little or nothing of it is int8. The report,
    for a command's JSON; None at fp32."""
    report = getattr(encoder, "quantization_report", None)
    if report is None:
        return None
    from rich.console import Console

    from ..encoder.quantize_plan import describe_int8, int8_shortfall

    report["load_seconds"] = round(load_seconds, 3)  # the whole load, int8 preparation included
    console = Console(stderr=True)
    say(console, "precision", f"{describe_int8(report)}; encoder loaded in {load_seconds:.1f} s", style="cyan")
    shortfall = int8_shortfall(report)
    if shortfall and strict:
        fail(
            f"{shortfall} --strict-precision makes this an error: use --precision fp32, or leave out --strict-precision.",
            ExitCode.BAD_INPUT,
        )
    if shortfall:
        say(console, "warning", f"{shortfall} Pass --strict-precision to make this an error.")
    return report
