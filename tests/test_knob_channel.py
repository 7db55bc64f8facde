"""The query-time knobs pass as one channel (issue 62 item 2): each is declared once (knobs.py) and
its name is written where it is declared, where its route takes it and where a public field or
attribute shows it, not threaded by hand through every entry. Measured as the issue's Done-when:
each knob's name in at most 8 product files (instemb_rag/ and the LlamaIndex integration, tests
aside), and in no parameter list of the server, the resident process, the caches or the
integration (they pass a ``knobs`` mapping on); the command line takes one option per declared
knob from its declaration."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from instemb_rag.knobs import KNOBS, Knob

ROOT = Path(__file__).resolve().parents[1]
INTEGRATION = "llama_index.embeddings.instemb"
MOST_FILES = 8  # the Done-when
# Written from the declarations, never by hand (tests/test_query_flags.py fails when it is stale).
GENERATED = ("instemb_rag/cli/query_flags.py",)


def product_files_naming(name: str) -> list[str]:
    """The product files that hold ``name`` as a whole word (as ``grep -rlw NAME instemb_rag
    integrations --include=*.py | grep -v /tests/`` lists them), but those GENERATED from them."""
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
    found = []
    for top in ("instemb_rag", "integrations"):
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/tests/" in relative or relative in GENERATED:
                continue
            if word.search(path.read_text(encoding="utf-8")):
                found.append(relative)
    return found


@pytest.mark.parametrize("name", list(KNOBS))
def test_each_knobs_name_is_written_in_few_product_files(name):
    found = product_files_naming(name)
    assert 0 < len(found) <= MOST_FILES, f"{name} is written in {len(found)} product files: {found}"


def functions_of(module) -> list:
    """The functions a module's source writes: its own and its own classes' (methods, static and
    class methods). A dataclass's generated ``__init__`` is left out: it lists the class's fields,
    which are the public fields a knob may be."""
    found = []
    for value in vars(module).values():
        owners = [value] if inspect.isclass(value) and value.__module__ == module.__name__ else []
        candidates = [value] + [member for owner in owners for member in vars(owner).values()]
        for candidate in candidates:
            function = getattr(candidate, "__func__", candidate)  # staticmethod, classmethod
            if inspect.isfunction(function) and function.__code__.co_filename == module.__file__:
                found.append(function)
    return found


def knob_parameters(modules) -> list[str]:
    """``module.function(knob)`` for every parameter named after a declared knob, but the one of a
    view named after it (``with_<knob>(<knob>)``: a public name, tests/data/public_names.json)."""
    found = []
    for module in modules:
        for function in functions_of(module):
            named = [name for name in inspect.signature(function).parameters if name in KNOBS]
            named = [name for name in named if function.__name__ != f"with_{name}"]
            found += [f"{module.__name__}.{function.__qualname__}({name})" for name in named]
    return found


def submodules(package: str, skip: tuple[str, ...] = ("__main__",)) -> list:
    root = importlib.import_module(package)
    names = [info.name for info in pkgutil.iter_modules(root.__path__) if info.name not in skip]
    return [root] + [importlib.import_module(f"{package}.{name}") for name in names]


def test_no_knob_is_a_parameter_of_the_server_the_resident_process_or_the_caches():
    modules = [
        *submodules("instemb_rag.serve"),  # the request schemas, the routes, the batcher, the state
        *submodules("instemb_rag.resident"),
        *submodules("instemb_rag.client"),  # the query cache and the embedder over it
        importlib.import_module("instemb_rag.queries"),
        importlib.import_module("instemb_rag.index.search"),
        importlib.import_module("instemb_rag.index.retrieval"),
    ]
    assert knob_parameters(modules) == []


def test_no_knob_is_a_parameter_of_the_integrations_functions():
    pytest.importorskip("llama_index.core")
    assert knob_parameters(submodules(INTEGRATION)) == []


def test_the_query_command_takes_one_option_per_declared_knob_from_its_declaration():
    from instemb_rag.cli import app

    params = {param.name: param for param in typer.main.get_command(app).commands["query"].params}
    for knob in KNOBS.values():
        option = params[knob.name]
        assert option.opts == [knob.option] and option.default is None
        assert (option.min, option.max) == (knob.low, knob.high)
        assert knob.scale in option.help and knob.model in option.help


def test_compose_stores_its_arrangements_knobs_at_the_declarations_default():
    from instemb_rag.cli import app
    from instemb_rag.cli.compose import ARRANGEMENTS

    params = {param.name: param for param in typer.main.get_command(app).commands["compose"].params}
    for knob, _ in ARRANGEMENTS.values():
        assert params[knob.name].opts == [knob.option] and params[knob.name].default == knob.default


def test_a_newly_declared_knob_becomes_an_option_and_reaches_the_command_in_the_mapping():
    from instemb_rag.cli.knob_options import KNOBS_HERE, knob_options

    temperature = Knob(
        name="temperature",
        low=0.0,
        high=2.0,
        default=1.0,
        meaning="how flat the ranking is",
        scale="0: sharp",
        model="a tempered model",
        model_long="a tempered model",
        sets="sets how flat the ranking is",
        label="temperature",
    )
    received = []

    def option(knob: Knob):
        return typer.Option(None, knob.option, min=knob.low, max=knob.high, help=knob.help)

    @knob_options(option, knobs=[temperature])
    def command(text: str = typer.Argument(...), knobs: dict = KNOBS_HERE, k: int = typer.Option(3, "-k")):
        received.append((text, dict(knobs), k))

    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)  # two commands: typer routes by name
    runner = CliRunner()
    assert runner.invoke(app, ["command", "tent", "--temperature", "0.5", "-k", "2"]).exit_code == 0
    assert received == [("tent", {"temperature": 0.5}, 2)]
    refused = runner.invoke(app, ["command", "tent", "--temperature", "3"], terminal_width=200)
    assert refused.exit_code == 2 and "less than or equal to 2" in " ".join(refused.output.split())
    assert len(received) == 1  # refused before the command ran
    assert "how flat the ranking is" in runner.invoke(app, ["command", "--help"]).output


def test_a_route_takes_only_the_knobs_it_declares():
    from instemb_rag.encoder.composed.routes import EffectQueries, LLMQueries, TwoSpacesQueries

    for route in (TwoSpacesQueries, EffectQueries):
        (own,) = route.knobs
        other = next(name for name in KNOBS if name != own.name)
        assert route.own_knobs({own.name: own.default}) == {own.name: own.default}
        with pytest.raises(TypeError, match=f"'{other}': {route.__name__} takes the query-time knob {own.name}"):
            route.own_knobs({other: 0.5})
    with pytest.raises(TypeError, match="LLMQueries takes no query-time knob"):
        LLMQueries.own_knobs({next(iter(KNOBS)): 0.5})


def test_compose_writes_the_effect_arrangements_strength_and_resets_it_from_a_folder(
    tmp_path, tiny_model_dir, tiny_st_dir
):
    from instemb_rag.cli import app
    from instemb_rag.encoder.load import load_model
    from instemb_rag.knobs import INSTRUCTION_STRENGTH

    runner, name = CliRunner(), INSTRUCTION_STRENGTH.name
    parts = ["--documents-llm", str(tiny_model_dir), "--tower", str(tiny_st_dir)]
    first, second = tmp_path / "effect", tmp_path / "stronger"
    written = runner.invoke(
        app, ["compose", "--arrangement", "effect", *parts, INSTRUCTION_STRENGTH.option, "2.5", "--out", str(first)]
    )
    assert written.exit_code == 0, written.output
    assert "instruction strength 2.5 by default" in written.output
    assert load_model(str(first), device="cpu").knob_default(name) == 2.5
    again = runner.invoke(
        app, ["compose", "--from", str(first), INSTRUCTION_STRENGTH.option, "3", "--out", str(second)]
    )
    assert again.exit_code == 0, again.output
    assert load_model(str(second), device="cpu").knob_default(name) == 3.0
    too_strong = runner.invoke(
        app,
        ["compose", "--arrangement", "effect", *parts, INSTRUCTION_STRENGTH.option, "11", "--out", str(tmp_path / "x")],
        terminal_width=200,
    )
    assert too_strong.exit_code == 2 and INSTRUCTION_STRENGTH.option in too_strong.output
    assert not (tmp_path / "x").exists()
