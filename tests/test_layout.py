"""The package's shape: imports go one way (no cycle, never from a lower layer to a higher one),
and no file grows past what a reader takes in at once.

The imports are read with ``ast`` (those inside functions count: a lazy import is still a
dependency). A package ``__init__`` importing its own children is its public face, not a
dependency of the package on itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGE = CHECKOUT / "instemb_rag"
MAX_LINES = 500
# Beside the package, the same cap: the LlamaIndex integration and the benchmark scripts.
ALSO_CAPPED = [CHECKOUT / "integrations", CHECKOUT / "benchmarks"]

# Low to high: a module may import its own layer and the ones below, never one above. A new
# top-level module or subpackage must be placed here (the test says so).
LAYERS: list[set[str]] = [
    # base utilities: no project imports beyond this layer
    {"errors", "paths", "choices", "instructions", "knobs", "hashing", "net", "jsonl", "atomic", "progress"},
    # the data the model is trained and evaluated on (records, embedding items, facet groups,
    # their builders and one source registry): files and text only, no model
    {"datasets"},
    # sentence encoders: training teachers (fine-tuned on facet groups), and the document tower
    # of a two-tower encoder
    {"teachers"},
    # the model: everything that builds and runs an InstEmbEncoder
    {"encoder"},
    # the loss functions the model is trained with
    {"losses"},
    # what uses the model: indexing and search, training, evaluation, other libraries' loaders
    # (interop: sentence-transformers), a query's inputs checked once where they enter (queries)
    {"index", "training", "eval", "interop", "queries"},
    # the HTTP server over an index or an encoder, and what an application embedding through
    # instemb-rag holds (client: the server's client, the embedder with its caches and limits)
    {"serve", "client"},
    # entry points and tooling over everything below
    {"cli", "tools"},
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (a name resolves to its longest known prefix)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".") if is_package else module.split(".")[:-1]
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module and not (is_package and name.startswith(module + ".")):
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    known = set(files)
    return {module: imported_modules(path, module, known) for module, path in files.items()}


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


def test_no_import_cycle_between_modules_or_packages():
    graph = import_graph()
    assert cycles(graph) == []
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
