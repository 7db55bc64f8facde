"""`instemb-rag query "TEXT" --instruction "..."`: search an index built by `instemb-rag index`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from ..choices import HybridMode, Precision
from ..knobs import Knob
from ..resident.client import resident_wanted
from ..service.request import DECLARED_HERE, DeclaredField, QueryRequest, declared_parameters
from ..shipped import shipped_knob_words
from .common import (
    compile_option,
    device_option,
    fail,
    load_encoder,
    precision_option,
    say,
    strict_precision_option,
)
from .query_core import (  # noqa: F401  (what --explain says, read here by tests)
    EXPLAINED,
    EXPLAINED_EFFECT,
    EXPLAINED_ONE_SPACE_HYBRID,
    SPELLED_HERE,
    query_request,
    show_answer,
)
from .store_options import STORE_OPTIONS_HERE, store_options


class HybridOptionalValueCommand(TyperCommand):
    """``--hybrid`` takes an optional value: a bare ``--hybrid`` (whatever follows it that is not a
    fusion rule: the query text, another option, nothing) means the default rule. typer options
    cannot have optional values, so the argument list gets it before parsing."""

    optional_value = "--hybrid"  # the option whose value may be left out (the lean client reads it too)

    @staticmethod
    def bare_value() -> str:
        """What a bare ``--hybrid`` means: the default fusion rule."""
        from ..index.fusion import DEFAULT_MODE

        return DEFAULT_MODE

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        fixed: list[str] = []
        for position, arg in enumerate(args):
            fixed.append(arg)
            following = args[position + 1] if position + 1 < len(args) else None
            if arg == self.optional_value and following not in {mode.value for mode in HybridMode}:
                fixed.append(self.bare_value())
        return super().parse_args(ctx, fixed)


def knob_option(knob: Knob):
    """A query-time knob's typed option: its range and help from the declaration (knobs.py)."""
    return typer.Option(
        None,
        knob.option,
        min=knob.low,
        max=knob.high,
        help=f"{knob.meaning[0].upper()}{knob.meaning[1:]} ({knob.low:g}-{knob.high:g}): {knob.scale}. Default: "
        f"{shipped_knob_words(knob.name)}. {knob.note + ' ' if knob.note else ''}Only for {knob.model}.",
    )


def declared_option(spec: DeclaredField):
    """A request field this command does not spell itself (service/request.py): its option, from
    the declaration."""
    return typer.Option(spec.default, spec.option, help=spec.door.help, min=spec.door.low, max=spec.door.high)


@store_options(with_store=False, at_query=True)
@declared_parameters(declared_option, spelled=SPELLED_HERE, knob_parameter=knob_option)
def query_command(
    text: str = typer.Argument(..., help="What to search for."),
    instruction: str | None = typer.Option(
        None, "--instruction", "-i", help="How to judge relevance, e.g. 'focus on packed weight'; empty = none."
    ),
    k: int = typer.Option(5, "-k", "--top-k", min=1, help="Number of results."),
    index_dir: Path = typer.Option(Path(".instemb"), "--index-dir", help="The index folder."),
    filters: list[str] | None = typer.Option(
        None, "--filter", help="KEY=VALUE on metadata, e.g. source=tents/*.md (glob)."
    ),
    hybrid: HybridMode | None = typer.Option(
        None,
        "--hybrid",
        metavar="[rrf|z]",
        help="Fuse the dense ranking with the index's full-text (bm25) ranking of the query and the instruction's "
        "content words: z (standardised scores, the rule of a bare --hybrid) or rrf (reciprocal ranks).",
    ),
    hybrid_weight: float | None = typer.Option(
        None, "--hybrid-weight", min=0.0, max=1.0, help="With --hybrid: the full-text side's share, 0..1 (default 0.5)."
    ),
    declared: dict[str, Any] = DECLARED_HERE,  # one option per query-time knob and other declared request field
    explain: bool = typer.Option(
        False,
        "--explain",
        help="Show what each hit's score is made of: each space's score (LLM, sentence encoder), the LLM weight "
        "and the combined score (two-space models); the plain score, the instruction's contribution, the "
        "strength (as set, or the model's own), the effective strength (the strength times the model's gain for "
        "the query) and the combined score (instruction-effect models). A model of one space scores by one cosine: "
        "with --hybrid, the cosine and the full-text bm25 score the hit's score fuses.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print JSON for scripts instead of a table (with --hybrid: each side's rank per hit; with --explain: "
        "each hit's parts).",
    ),
    model: str | None = typer.Option(None, "--model", "-m", help="Encoder; default: the one the index was built with."),
    stores: object = STORE_OPTIONS_HERE,  # a StoreOptions: the store settings a query overrides (--qdrant-url...)
    device: str = device_option(),
    precision: Precision = precision_option(),
    strict_precision: bool = strict_precision_option(),
    compile: bool = compile_option(),
    no_daemon: bool = typer.Option(
        False,
        "--no-daemon",
        envvar="INSTEMB_NO_DAEMON",
        help="Answer in this process (load the model and open the index here) instead of through the resident "
        "query process, which keeps them loaded between queries; also INSTEMB_NO_DAEMON=1.",
    ),
) -> None:
    """Top-k chunks for TEXT under INSTRUCTION (one prefill for the query).

    Answered by the resident query process, which keeps the model and the index loaded between
    queries (started in the background by the first query; `instemb-rag daemon` shows and stops it),
    unless --no-daemon or $INSTEMB_NO_DAEMON=1, or an option only this process can honour (int8,
    --compile, a Qdrant URL or key) is given."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..resident.ask import Asker
    from ..resident.client import ResidentAnswerError

    console = Console(stderr=as_json)
    try:  # the same request the lean client (entry.py) builds
        request = query_request(
            text, instruction, k, index_dir, filters, hybrid, hybrid_weight, explain, model, device, declared
        )
    except InstEmbError as error:  # a --filter that is not KEY=VALUE
        fail(error)
    here = HereOnly(precision, compile, strict_precision, stores)
    asker = Asker(here.default and resident_wanted(no_daemon), note_on_stderr, here.open_index)
    try:
        answer = asker.answer(request)
    except ResidentAnswerError as error:
        fail(error, error.exit_code)
    except InstEmbError as error:
        fail_with_hint(error)
    if not asker.use_resident:
        # At exit, Python's final collection walks the model's ~650k objects (1.5-1.8 s): frozen first,
        # they are left to the process's end. (At exit only: a caller that goes on collects as usual.)
        import atexit
        import gc

        atexit.register(gc.freeze)
    show_answer(answer, hybrid, explain, as_json, console, here.precision_report)


def note_on_stderr(note: str) -> None:
    from rich.console import Console

    say(Console(stderr=True), "note", note)


def fail_with_hint(error: Exception) -> None:
    from ..index.errors import EncoderMismatchError

    if isinstance(error, EncoderMismatchError) and error.same_shape:  # the same kind of model: maybe int8
        typer.secho(
            "hint: an index built with --precision int8 is queried with --precision int8 on the same kind of CPU "
            "(its fingerprint records the CPU's int8 kernel and which layers ran in int8), an fp32 one with fp32.",
            fg=typer.colors.YELLOW,
            err=True,
        )
    fail(error)


@dataclass
class HereOnly:
    """Options only the command's own process honours (the model loaded at another precision or
    compiled, another Qdrant server): any of them set, the query is answered in-process."""

    precision: Precision
    compile: bool
    strict_precision: bool
    stores: object  # a StoreOptions: the store settings given (none: the index's own)
    precision_report: dict | None = None  # int8: what runs, for --json

    @property
    def default(self) -> bool:
        return self.precision == "fp32" and not self.compile and not self.stores.settings

    def open_index(self, request: QueryRequest):
        """The request's index opened here (the path of --no-daemon, int8, --compile, Qdrant options)."""
        from ..index import Index
        from ..index.manifest import model_label

        encoder, model = None, request.model
        if self.precision != "fp32" or self.compile:  # the index's own encoder, at this precision
            from ..index.manifest import read_manifest

            manifest = read_manifest(Path(request.index_dir))
            reference = model if manifest is None else manifest.encoder_model(model)
            encoder = load_encoder(reference, request.device, self.precision, self.compile, self.strict_precision)
            self.precision_report = getattr(encoder, "quantization_report", None)
        return Index.open(
            request.index_dir,
            encoder=encoder,
            model=model and model_label(model),
            stores=self.stores,
            device=request.device,
        )


def register(app: typer.Typer) -> None:
    app.command("query", cls=HybridOptionalValueCommand)(query_command)
