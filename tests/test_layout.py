"""The package's shape: imports go one way (no cycle, never from a lower layer to a higher one),
and no file grows past what a reader takes in at once.

The imports are read with ``ast`` (those inside functions count: a lazy import is still a
dependency). A package ``__init__`` importing its own children is its public face, not a
dependency of the package on itself; a name imported through that face (``from . import
load_model``, which the face's ``__getattr__`` fetches from load.py with ``import_module``) is an
import of the child that holds it. Product code does not point into research/, which the wheel
does not hold.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGE = CHECKOUT / "instemb_rag"
MAX_LINES = 500
# Beside the package, the same cap: the LlamaIndex integration and the benchmark scripts.
ALSO_CAPPED = [CHECKOUT / "integrations", CHECKOUT / "benchmarks", CHECKOUT / "tools"]

# Low to high: a module may import its own layer and the ones below, never one above. A new
# top-level module or subpackage must be placed here (the test says so).
LAYERS: list[set[str]] = [
    # base utilities: no project imports beyond this layer
    # (shipped: the shipped default's own settings, read from its JSON without torch; extras: an
    # optional dependency imported where it is used, or an error naming the extra; hf_models:
    # transformers' model classes imported directly, weights memory-mapped, for the LLM and the
    # sentence encoders alike)
    {"errors", "paths", "choices", "instructions", "knobs", "hashing", "net", "jsonl", "atomic", "progress"}
    | {"shipped", "extras", "hf_models"},
    # the data the model is trained and evaluated on (records, embedding items, facet groups,
    # their builders and one source registry): files and text only, no model
    {"datasets"},
    # sentence encoders: training teachers (fine-tuned on facet groups), and the document sentence encoder
    # of a two-tower encoder
    {"teachers"},
    # the model: everything that builds and runs an InstEmbEncoder
    {"encoder"},
    # the loss functions the model is trained with; the reader (issue 67: the second stage that
    # re-orders the first stage's top hits, a model folder's reader part and rerank route)
    {"losses", "reader"},
    # what uses the model: indexing and search, training, evaluation, other libraries' loaders
    # (interop: sentence-transformers), a query's inputs checked once where they enter (queries)
    # (service: one query request answered over an open index, which index/ hands in and calls)
    {"index", "training", "eval", "interop", "queries", "service"},
    # the HTTP server over an index or an encoder, and what an application embedding through
    # instemb-rag holds (client: the server's client, the embedder with its caches and limits);
    # exit_codes: an error's exit code, for the CLI and the resident process that answers for it
    {"serve", "client", "exit_codes"},
    # entry points over everything below (resident: the resident query process behind `query`;
    # agents: an index as MCP tools, `instemb-rag mcp`)
    {"cli", "resident", "agents"},
]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The dotted name of what ``from X import ...`` reads X as, in ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def face_names(files: dict[str, Path], known: set[str]) -> dict[str, str]:
    """What each package face hands out, by the name it is imported as: "instemb_rag.encoder.load_model"
    -> "instemb_rag.encoder.load.load_model". A face declares a lazy name twice, both read here: an
    import (under TYPE_CHECKING, or inside its ``__getattr__``) and a table of names to children
    (``HOMES = {"load_model": "load"}``, what ``import_module`` is given)."""
    faces = {}
    for module, path in files.items():
        if path.name != "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                source = imported_from(node, module, is_package=True)
                for alias in node.names:
                    faces[f"{module}.{alias.asname or alias.name}"] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if not (isinstance(key, ast.Constant) and isinstance(value, ast.Constant)):
                        continue
                    if isinstance(key.value, str) and isinstance(value.value, str):
                        child = f"{module}.{value.value.lstrip('.')}"
                        if child in known:
                            faces[f"{module}.{key.value}"] = f"{child}.{key.value}"
    return faces


def resolved(name: str, known: set[str], faces: dict[str, str]) -> str:
    """The module an imported name lives in: through package faces, then its longest known prefix."""
    seen = set()
    while name in faces and name not in seen:
        seen.add(name)
        name = faces[name]
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def imported_modules(path: Path, module: str, known: set[str], faces: dict[str, str] | None = None) -> set[str]:
    """The package's modules that ``path`` imports (a name resolves through package faces, then to
    its longest known prefix)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            prefix = imported_from(node, module, is_package)
            names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            name = resolved(name, known, faces or {})
            if name and name != module and not (is_package and name.startswith(module + ".")):
                found.add(name)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(path, package): path for path in package.rglob("*.py")}
    known = set(files)
    faces = face_names(files, known)
    return {module: imported_modules(path, module, known, faces) for module, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def top_level(module: str) -> str | None:
    """The direct child of the package a module belongs to (None: the package's own __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def layer_of(child: str) -> int:
    for number, members in enumerate(LAYERS):
        if child in members:
            return number
    raise AssertionError(f"instemb_rag.{child} is in no layer: add it to LAYERS in tests/test_layout.py")


# Cycles that stay for now, each with why and what removes it. An entry whose cycle is gone fails
# the test below, so that it is removed too.
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycle_between_modules_or_packages():
    graph = import_graph()
    found = cycles(graph)
    assert [cycle for cycle in found if cycle not in KNOWN_CYCLES] == []
    assert [cycle for cycle in KNOWN_CYCLES if cycle not in found] == [], "gone: remove it from KNOWN_CYCLES"
    children: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = top_level(module), top_level(target)
            if a and b and a != b:
                children.setdefault(a, set()).add(b)
    assert cycles(children) == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
    upward = []
    for module, targets in import_graph().items():
        source = top_level(module)
        if source is None:  # instemb_rag/__init__.py: the public face (lazy InstEmbEncoder)
            continue
        for target in targets:
            child = top_level(target)
            if child is not None and layer_of(child) > layer_of(source):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_every_top_level_module_has_a_layer():
    for path in PACKAGE.iterdir():
        if path.name.startswith(("_", ".")) or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
            continue
        layer_of(path.stem)


def test_no_package_file_is_over_500_lines():
    """The package, the integration and the benchmarks (build outputs and virtualenvs aside)."""
    paths = [path for root in (PACKAGE, *ALSO_CAPPED) for path in root.rglob("*.py")]
    long = {
        str(path.relative_to(CHECKOUT)): count
        for path in paths
        if not {"build", ".venv", "__pycache__"} & set(path.relative_to(CHECKOUT).parts)
        and (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_module_imports_another_modules_private_name():
    """A name with a leading underscore is its module's own: what another module needs is made
    public where it lives (e.g. instructions.per_item_instructions, not encoder.model's alias)."""
    private = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("instemb_rag")):
                private += [
                    f"{path.relative_to(PACKAGE.parent)}: {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert private == []


def test_a_name_imported_through_a_package_face_is_an_import_of_its_module(tmp_path):
    """encoder/__init__.py hands out load_model with ``import_module`` (its HOMES table): model.py's
    ``from . import load_model`` imports load.py, so model -> load -> model is a cycle. Checked on a
    package built here, faces of both kinds (a table, and imports under TYPE_CHECKING)."""
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .inner.deep import helper\n"
        'HOMES = {"Model": "model", "load_model": "load"}\n'
        "def __getattr__(name):\n    from importlib import import_module\n"
        '    return getattr(import_module(f".{HOMES[name]}", __name__), name)\n'
    )
    (package / "model.py").write_text("def make():\n    from . import load_model\n    return load_model()\n")
    (package / "load.py").write_text("from . import model\ndef load_model():\n    return model\n")
    (package / "user.py").write_text("from pkg import Model, helper\n")
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "deep.py").write_text("def helper():\n    pass\n")
    graph = import_graph(package)
    assert graph["pkg.model"] == {"pkg", "pkg.load"} and graph["pkg.user"] == {"pkg", "pkg.model", "pkg.inner.deep"}
    assert cycles(graph) == [["pkg.load", "pkg.model"]]


# Product code that names a path into research/ (the wheel does not hold it), by file: why it stays.
# None today: a message says what a missing file must hold and which command makes it.
RESEARCH_REFERENCES_ALLOWED: dict[str, str] = {}
RESEARCH_PATH = re.compile(r"(?<![\w-])research/")
PATH_CALLS = {"Path", "PurePath", "joinpath"}


def research_references(path: Path) -> list[str]:
    """Where ``path``'s code names research/: a string holding ``research/...`` (docstrings aside:
    they describe the checkout to its reader), or the folder "research" given to a path."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    documented = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented:
            if RESEARCH_PATH.search(node.value):
                found.append(f"line {node.lineno}: {node.value!r}")
        operands = []
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in PATH_CALLS:
            operands = node.args
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            operands = [node.left, node.right]
        found += [f"line {node.lineno}: a path through 'research'" for item in operands if is_research(item)]
    return sorted(found, key=lambda where: int(where.split(":")[0].removeprefix("line ")))


def is_research(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip("/") == "research"


def test_product_code_does_not_point_into_research():
    """research/ (experiments, candidates, hand-written training data) stays in the checkout: a
    default, a help text or a message of the package that names a file there sends a user of the
    wheel to a file they do not have. Such a path is an argument the user gives."""
    pointing = {
        str(path.relative_to(CHECKOUT)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := research_references(path)) and str(path.relative_to(CHECKOUT)) not in RESEARCH_REFERENCES_ALLOWED
    }
    assert pointing == {}
    stale = [name for name in RESEARCH_REFERENCES_ALLOWED if not research_references(CHECKOUT / name)]
    assert stale == [], "no longer points into research/: remove it from RESEARCH_REFERENCES_ALLOWED"


def test_the_research_check_sees_strings_and_paths(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Built from research/data/x.jsonl (a docstring: fine)."""\n'
        "from pathlib import Path\n"
        'TRAIN = Path("research") / "data"\n'
        'OTHER = Path(__file__).parent / "research"\n'
        'HELP = "default research/data/x.jsonl"\n'
        'FACETS = {"research": "ongoing studies"}\n'
    )
    assert [line.split(":")[0] for line in research_references(sample)] == ["line 3", "line 4", "line 5"]
