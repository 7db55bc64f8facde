"""How the command line says a labelled line (``note:``, ``warning:``, ``explain:``) on a rich
console: ``say``. No typer here: the lean client (entry.py) prints a query's notes with it too."""

from __future__ import annotations

__all__ = ["say"]


def say(console, label: str, message: object, style: str = "yellow", indent: str = "") -> None:
    """Print ``label: message`` on a rich console: the label styled, the message verbatim.

    rich reads ``[word]`` as markup, so an unescaped ``pip install 'instemb-rag[serve]'`` would
    print without its extra (and a stray ``[/x]`` in an error text would raise MarkupError).
    """
    from rich.markup import escape

    console.print(f"{indent}[{style}]{label}:[/{style}] {escape(str(message))}")
