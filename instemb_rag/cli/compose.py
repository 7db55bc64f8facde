"""`instemb-rag compose`: an encoder of parts from parts a user has, untrained (issue 50).

    instemb-rag compose --out my-model                          # the shipped LLM + all-MiniLM-L6-v2, w = 0.5
    instemb-rag compose --documents-llm CKPT --sentence-encoder FOLDER --llm-weight 0.7 --out my-model
    instemb-rag compose --from research/checkpoints/two-spaces-600 --llm-weight 0.7 --no-gate --out fixed
    instemb-rag compose --arrangement effect --instruction-strength 1.5 --out effect   # issue 56, untrained
    instemb-rag compose --from research/checkpoints/effect-r1 --instruction-strength 2 --out stronger

Documents are embedded by both parts side by side; a query by the LLM (its space) and by the
sentence encoder with the instruction pasted, the two spaces at the weight. The folder is a whole model:
pass it to ``--model`` anywhere. ``--from`` takes a trained two-space folder and sets its weight
(``--no-gate``: that weight for every query instead of the trained gate's reading), or a trained
instruction-effect folder and sets its default strength. ``--arrangement effect``: the
sentence encoder's plain score plus the instruction's effect in the LLM's space
(docs/instruction-effect.md), over the same two document parts.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..knobs import INSTRUCTION_STRENGTH, LLM_WEIGHT, Knob
from .common import fail
from .knob_options import KNOBS_HERE, knob_options

# The arrangements compose writes: the query-time knob each one's queries take, and what its
# option says here (it sets the folder's own value).
ARRANGEMENTS = {
    "two-spaces": (LLM_WEIGHT, "The LLM space's share of the score (the rest: the sentence encoder's)."),
    "effect": (INSTRUCTION_STRENGTH, "With --arrangement effect: the default strength of the instruction's effect."),
}
# An arrangement's older name, still read (issue 68: "mix" was the two spaces' arrangement).
OLD_ARRANGEMENTS = {"mix": "two-spaces"}


def register(app: typer.Typer) -> None:
    app.command("compose")(compose_command)


def stored_knob_option(knob: Knob):
    """A knob's option here: the value the folder stores, the declaration's default if not given."""
    words = next(words for each, words in ARRANGEMENTS.values() if each is knob)
    return typer.Option(knob.default, knob.option, min=knob.low, max=knob.high, help=words)


@knob_options(stored_knob_option, float, [knob for knob, _ in ARRANGEMENTS.values()])
def compose_command(
    out: Path = typer.Option(..., "--out", help="The folder to write (replaced atomically if it exists)."),
    documents_llm: str = typer.Option(
        "default", "--documents-llm", help="An InstEmb LLM folder whose document space is the LLM space."
    ),
    sentence_encoder: str = typer.Option(
        "minilm",
        "--sentence-encoder",
        "--tower",  # its name before issue 62, still read
        help="The sentence encoder: an installed teacher (minilm) or a sentence-transformers folder.",
    ),
    arrangement: str = typer.Option(
        "two-spaces",
        "--arrangement",
        help="two-spaces: the two spaces at --llm-weight; effect: the sentence encoder plus the instruction's effect.",
    ),
    knobs: dict[str, float] = KNOBS_HERE,  # one option per query-time knob (knob_options.py)
    source: Path | None = typer.Option(None, "--from", help="A composed folder to take the parts of instead."),
    no_gate: bool = typer.Option(False, "--no-gate", help="With --from: the fixed weight for every query, no gate."),
    device: str = typer.Option("cpu", "--device", help="Where to load the parts (they are only copied)."),
) -> None:
    """Write a composed model folder: the LLM's space beside a sentence encoder's (two spaces, or the instruction's effect)."""
    from ..encoder.composed.effect import InstructionEffectEncoder
    from ..encoder.composed.encoder import TwoSpacesEncoder
    from ..encoder.load import load_model, untrained_effect, untrained_two_spaces
    from ..errors import InstEmbError

    arrangement = OLD_ARRANGEMENTS.get(arrangement, arrangement)
    if arrangement not in ARRANGEMENTS:
        fail(f"--arrangement {arrangement!r}: choose {' or '.join(ARRANGEMENTS)}.", 2)
    own_knob = ARRANGEMENTS[arrangement][0]  # what an untrained folder of this arrangement stores
    weight, strength = knobs[LLM_WEIGHT.name], knobs[INSTRUCTION_STRENGTH.name]
    if arrangement == "two-spaces" and not LLM_WEIGHT.low < weight < LLM_WEIGHT.high:
        fail(
            f"{LLM_WEIGHT.option} must lie strictly between {LLM_WEIGHT.low:g} and {LLM_WEIGHT.high:g} for a "
            "stored model (0 or 1 is one space alone).",
            2,
        )
    try:
        loaded = load_model(source, device=device) if source is not None else None
        if isinstance(loaded, InstructionEffectEncoder):
            encoder = loaded.with_instruction_strength(strength)
        elif isinstance(loaded, TwoSpacesEncoder):
            encoder = loaded if not (no_gate or loaded.gate is None) else loaded.with_llm_weight(weight)
        elif loaded is not None:
            raise InstEmbError(f"--from {source}: give a composed folder of two spaces or of the instruction's effect.")
        else:
            reference = None if documents_llm == "default" else documents_llm
            build = untrained_effect if arrangement == "effect" else untrained_two_spaces
            encoder = build(reference, sentence_encoder, knobs[own_knob.name], device=device)
        encoder.save(out)
    except InstEmbError as error:
        fail(error)
    if isinstance(encoder, InstructionEffectEncoder):
        query_side = f"{INSTRUCTION_STRENGTH.label} {encoder.knob_default(INSTRUCTION_STRENGTH.name):g} by default"
    elif encoder.gate is not None:
        query_side = "a per-query gate"
    else:
        query_side = f"{LLM_WEIGHT.name} {encoder.knob_default(LLM_WEIGHT.name):g} for every query"
    typer.echo(f"wrote {out}: {encoder.label}, {query_side}; document fingerprint {encoder.document_fingerprint}")
