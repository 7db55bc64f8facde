"""How the command line says a labelled line (``note:``, ``warning:``, ``explain:``) on a rich
console (``say``) and a failure (``error_line``). No typer here: the lean client (entry.py) prints
a query's notes and refusals with them too, as the typer app's ``fail`` does."""

from __future__ import annotations

__all__ = ["error_line", "say"]


def say(console, label: str, message: object, style: str = "yellow", indent: str = "") -> None:
    """Print ``label: message`` on a rich console: the label styled, the message verbatim.

    rich reads ``[word]`` as markup, so an unescaped ``pip install 'instemb-rag[serve]'`` would
    print without its extra (and a stray ``[/x]`` in an error text would raise MarkupError).
    """
    from rich.markup import escape

    console.print(f"{indent}[{style}]{label}:[/{style}] {escape(str(message))}")


def error_line(message: str, color: bool) -> str:
    """``error: MESSAGE``, red where ``color`` (a terminal): every command's failure line (common.fail, the lean client)."""
    line = f"error: {message}"
    return f"\x1b[31m{line}\x1b[0m" if color else line
