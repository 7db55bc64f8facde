"""The GPU kit's wheels: what the GPU image lacks, resolved and downloaded for the target Python.

The wanted requirements are the project's dependencies (pyproject.toml) with the extras the GPU
run needs, faiss-cpu swapped for the CUDA 13 faiss build, plus the test tools. pip resolves them
for the target (``pip install --dry-run --report``: one version of each, dependencies included);
every package the image already has is left out by name (torch always), and what is left is
fetched as wheels with ``pip download --no-deps``. Each wheel's requirements on the packages left
to the image are recorded so that the GPU side can say which image version falls short.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from kit_pieces import KitError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
IMAGE_PACKAGES = Path(__file__).resolve().parent / "gpu_image_packages.txt"
DEFAULT_EXTRAS = ("gpu-cu13", "serve")
TEST_TOOLS = ("pytest", "pytest-timeout")
GPU_FAISS, CPU_FAISS = "faiss-gpu-cuvs", "faiss-cpu"  # both install the module `faiss`
NEVER_SHIPPED = {"torch"}  # the image's CUDA build stays; pip must never replace it
# The GPU image: CPython 3.12 on glibc 2.39 (Ubuntu 24.04). pip matches --platform tags exactly,
# so every manylinux tag that glibc can run is named.
DEFAULT_PYTHON = "3.12"
DEFAULT_PLATFORMS = tuple(
    [f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)]
    + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
)
# Where the project's wheel is built from (a copy, so leftovers in build/ cannot reach it).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "instemb_rag")


def normalize(name: str) -> str:
    """PEP 503 name: 'PyYAML' and 'pyyaml', 'typing_extensions' and 'typing-extensions' match."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalize(re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0])


def project_requirements(extras: tuple[str, ...] = DEFAULT_EXTRAS, pyproject: Path | None = None) -> list[str]:
    """The project's dependencies and the named extras, faiss-cpu dropped when the GPU faiss is in."""
    import tomllib

    project = tomllib.loads((pyproject or PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise KitError(f"pyproject.toml has no extra {', '.join(unknown)} (extras: {', '.join(sorted(optional))})")
    wanted = list(project["dependencies"]) + [r for extra in extras for r in optional[extra]] + list(TEST_TOOLS)
    if any(requirement_name(r) == GPU_FAISS for r in wanted):
        wanted = [r for r in wanted if requirement_name(r) != CPU_FAISS]
    return wanted


def read_image_packages(path: Path = IMAGE_PACKAGES) -> set[str]:
    """Names in a package list (``name`` or ``name==version`` a line, ``#`` comments; pip freeze works)."""
    if not path.is_file():
        raise KitError(f"image package list {path} not found (one name a line; `pip freeze` output works)")
    names = {requirement_name(line) for line in path.read_text().splitlines() if line.split("#")[0].strip()}
    return names | NEVER_SHIPPED


def local_packages() -> set[str]:
    """What the running interpreter has (the 'image' of a --local kit), this project left out."""
    from importlib.metadata import distributions

    return {normalize(d.metadata["Name"]) for d in distributions() if d.metadata["Name"]} - {"instemb-rag"}


def target_options(python_version: str | None, platforms: tuple[str, ...]) -> list[str]:
    """pip options selecting wheels for the target; none for the running interpreter (--local)."""
    if python_version is None:
        return ["--only-binary=:all:"]
    options = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for platform in platforms:
        options += ["--platform", platform]
    return options


def _pip(arguments: list[str], what: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *arguments]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(line for line in done.stderr.splitlines() if "Location" not in line)[-1500:]
        raise KitError(f"{what} failed (pip exit {done.returncode}); is PyPI reachable?\n{tail}")
    return done


def resolve(requirements: list[str], options: list[str]) -> list[dict]:
    """pip's resolution for the target: ``[{"name", "version", "requires_dist"}]``, one per package."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        _pip(
            ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), *options]
            + ["--target", str(Path(scratch) / "target"), *requirements],
            "resolving the kit's requirements",
        )
        installs = json.loads(report.read_text())["install"]
    return [
        {
            "name": normalize(item["metadata"]["name"]),
            "version": item["metadata"]["version"],
            "requires_dist": item["metadata"].get("requires_dist", []),
            "extras": item.get("requested_extras", []),
        }
        for item in installs
    ]


def select_shipped(resolved: list[dict], image: set[str], also: set[str]) -> list[dict]:
    """The resolved packages the image lacks (and those named with --also); never torch."""
    also = {normalize(name) for name in also}
    return [
        package
        for package in resolved
        if package["name"] not in NEVER_SHIPPED and (package["name"] not in image or package["name"] in also)
    ]


def download(packages: list[dict], options: list[str], folder: Path) -> dict[str, Path]:
    """Fetch exactly these versions (no dependencies: the resolution already chose them)."""
    if not packages:
        return {}
    pins = [f"{p['name']}=={p['version']}" for p in packages]
    _pip(["download", "--no-deps", "--quiet", *options, "--dest", str(folder), *pins], "downloading the wheels")
    return {normalize(wheel.name.split("-")[0]): wheel for wheel in folder.glob("*.whl")}


def build_project_wheel(folder: Path) -> Path:
    """``pip wheel --no-deps`` of a clean copy of the sources (no index, no build isolation)."""
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "source"
        source.mkdir()
        for name in WHEEL_SOURCES:
            origin = PROJECT_ROOT / name
            if origin.is_dir():
                shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(origin, source / name)
        _pip(
            ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet", "--wheel-dir", str(folder)]
            + [str(source)],
            "building the project's wheel (needs setuptools in this interpreter: the dev extra)",
        )
    (wheel,) = folder.glob("instemb_rag-*.whl")
    return wheel


def wheel_requires(wheel: Path) -> list[str]:
    """``Requires-Dist`` lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def target_environment(python_version: str | None) -> dict[str, str] | None:
    """Marker values of the target (None: the running interpreter's own)."""
    if python_version is None:
        return None
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
    }


def applicable(requires: list[str], extras: tuple[str, ...], environment: dict | None) -> list[str]:
    """The requirements that hold on the target (markers evaluated, extras as asked), markers dropped."""
    from packaging.requirements import Requirement

    kept = []
    for line in requires:
        requirement = Requirement(line)
        if requirement.marker is not None:
            contexts = [{**(environment or {}), "extra": extra} for extra in ("", *extras)]
            if not any(requirement.marker.evaluate(context) for context in contexts):
                continue
        kept.append(f"{normalize(requirement.name)}{requirement.specifier}")
    return kept


def image_shortfalls(requires: dict[str, list[str]], shipped: set[str]) -> tuple[list[str], list[str]]:
    """On the GPU side: (missing, mismatched) image packages that the kit's wheels need.

    ``requires`` maps each wheel to its requirements; those on packages the kit ships are skipped.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        from packaging.requirements import Requirement
    except ImportError:  # no packaging in the image: presence is still checked
        Requirement = None
    missing, mismatched = set(), set()
    for wheel, lines in requires.items():
        for line in lines:
            name = requirement_name(line)
            if name in shipped:
                continue
            try:
                found = version(name)
            except PackageNotFoundError:
                missing.add(name)
                continue
            if Requirement is not None and not Requirement(line).specifier.contains(found, prereleases=True):
                mismatched.add(f"{wheel} wants {line}, the image has {found}")
    return sorted(missing), sorted(mismatched)
