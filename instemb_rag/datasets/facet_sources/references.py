"""Reference documentation: Linux man pages, numpy/scipy docstrings, PowerShell cmdlet help.

A subject is one page (a command, a function, a cmdlet); its aspects are the page's sections.
Sections that only repeat another (PowerShell SYNOPSIS beside DESCRIPTION) or hold boilerplate
(man LIBRARY: "Standard C library (libc, -lc)") are left out."""

from __future__ import annotations

from pathlib import Path

from ...jsonl import read_jsonl
from .drafts import SubjectDraft, keep_subject
from .passages import cut, long_enough
from .wording import aspects

MAN_ASPECTS = aspects(
    {
        "DESCRIPTION": (
            ("what it does", "a description of its behaviour", "an overview of how it works", "its purpose"),
            ("What does it do?", "How does it work?"),
        ),
        "RETURN VALUE": (
            ("what it returns", "the return value", "what it gives back on success and on failure", "its result"),
            ("What does it return?", "What do I get back when it succeeds or fails?"),
        ),
        "ERRORS": (
            ("the error codes", "what can make it fail", "the errno values it sets", "failure conditions"),
            ("Which errors can it fail with?", "What can go wrong when I call it?"),
        ),
        "NOTES": (("the notes and caveats", "the fine print", "remarks on its use", "additional notes"), ()),
        "STANDARDS": (
            ("which standards it conforms to", "POSIX conformance", "the specification it follows"),
            ("Which standard defines it?",),
        ),
        "VERSIONS": (
            ("when it was introduced", "the version history", "which kernel or glibc version added it"),
            ("Since which version is it available?",),
        ),
        "EXAMPLES": (
            ("a worked example", "sample code", "how to use it in practice", "usage examples"),
            ("Can you show me an example?",),
        ),
        "BUGS": (
            ("known bugs", "what is broken in it", "its known problems", "defects"),
            ("Does it have known bugs?",),
        ),
        "FILES": (("the files it uses", "related configuration files", "which paths it reads"), ()),
        "ENVIRONMENT": (("the environment variables", "which env vars affect it", "its environment settings"), ()),
        "OPTIONS": (("the command-line options", "its flags", "the switches it accepts"), ()),
        "CAVEATS": (("the caveats", "pitfalls to watch for", "the gotchas"), ()),
        "EXIT STATUS": (("the exit status", "its exit codes", "what it exits with"), ()),
    }
)
MAN_QUERIES = ("Tell me about {s}.", "What should I know about {s}?", "{s} manual page", "How do I use {s}?")

NUMPY_ASPECTS = aspects(
    {
        "Parameters": (
            ("the parameters", "the arguments it takes", "what inputs it accepts", "its keyword arguments"),
            ("Which arguments does it take?",),
        ),
        "Returns": (
            ("what it returns", "the output", "the return type", "its result"),
            ("What does it return?",),
        ),
        "Examples": (
            ("an example", "a code snippet showing usage", "how to call it", "usage examples"),
            ("Can you show me how to call it?",),
        ),
        "Notes": (("the notes", "implementation details and background", "the theory behind it"), ()),
        "See Also": (
            ("related functions", "similar functions", "alternatives to it", "what else to look at"),
            ("Which other functions are related?",),
        ),
        "References": (("the references", "papers it cites", "the literature behind it", "citations"), ()),
        "Raises": (
            ("the exceptions it raises", "what errors it throws", "failure modes"),
            ("Which exceptions can it raise?",),
        ),
        "Attributes": (("its attributes", "the fields of the object", "the properties it exposes"), ()),
        "Methods": (("its methods", "the functions the class offers", "what you can call on it"), ()),
        "Warns": (("the warnings it emits", "when it warns", "warning conditions"), ()),
    }
)
NUMPY_ALIASES = {"See also": "See Also"}
NUMPY_QUERIES = ("Tell me about {s}.", "{s} documentation", "How do I use {s}?", "What is {s}?")

POWERSHELL_ASPECTS = aspects(
    {
        "DESCRIPTION": (
            ("what it does", "a description of the cmdlet", "an overview of its purpose"),
            ("What does this cmdlet do?",),
        ),
        "SYNTAX": (
            ("the syntax", "the parameter sets", "how the command line is written", "its usage line"),
            ("How is the command written?",),
        ),
        "PARAMETERS": (
            ("the parameters", "each parameter's meaning", "the switches it accepts", "its arguments"),
            ("Which parameters does it take?",),
        ),
        "EXAMPLES": (
            ("an example", "sample commands", "how to use it in practice", "usage examples"),
            ("Can you show me an example?",),
        ),
        "OUTPUTS": (
            ("what it outputs", "the objects it returns", "its output type"),
            ("What does it return?",),
        ),
        "INPUTS": (
            ("what it accepts from the pipeline", "the input types", "what can be piped into it"),
            ("What can I pipe to it?",),
        ),
        "NOTES": (("the notes", "remarks and caveats", "the fine print"), ()),
        "RELATED LINKS": (("related cmdlets", "links to related commands", "see-also links", "similar commands"), ()),
    }
)
POWERSHELL_ALIASES = {"Description": "DESCRIPTION", "LONG DESCRIPTION": "DESCRIPTION"}
POWERSHELL_QUERIES = ("Tell me about {s}.", "{s} help", "How do I use {s}?", "What is the {s} cmdlet?")


def _pages(path: Path, aspect_table: dict, aliases: dict[str, str]) -> dict[str, dict[str, str]]:
    """subject -> {aspect: passage}, for the aspects the table knows; the first section of a
    repeated aspect kept."""
    pages: dict[str, dict[str, str]] = {}
    for _, row in read_jsonl(path):
        facet = aliases.get(row["facet"], row["facet"])
        if facet not in aspect_table:
            continue
        text = cut(row["passage"])
        if long_enough(text):
            pages.setdefault(row["subject"], {}).setdefault(facet, text)
    return pages


def _drafts(source, path, aspect_table, aliases, queries, domain, name_of) -> list[SubjectDraft]:
    return [
        SubjectDraft(source, subject, name_of(subject), domain, passages, aspect_table, queries)
        for subject, passages in _pages(path, aspect_table, aliases).items()
        if keep_subject(passages)
    ]


def read_manpages(folder: Path) -> list[SubjectDraft]:
    # "getent.1" -> "getent"; the section number is not how users name a command
    return _drafts(
        "manpages", folder / "manpages.jsonl", MAN_ASPECTS, {}, MAN_QUERIES, "software",
        lambda subject: subject.rsplit(".", 1)[0],
    )  # fmt: skip


def read_numpy_scipy(folder: Path) -> list[SubjectDraft]:
    return _drafts(
        "numpy_scipy", folder / "numpy_scipy_docstrings.jsonl", NUMPY_ASPECTS, NUMPY_ALIASES, NUMPY_QUERIES,
        "software", lambda subject: subject,
    )  # fmt: skip


def read_powershell(folder: Path) -> list[SubjectDraft]:
    return _drafts(
        "powershell", folder / "powershell_cmdlets.jsonl", POWERSHELL_ASPECTS, POWERSHELL_ALIASES,
        POWERSHELL_QUERIES, "software", lambda subject: subject,
    )  # fmt: skip
