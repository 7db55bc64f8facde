"""One exit-code table for every command (instemb_rag/cli/common.py, docs/usage.md "Exit codes")."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.common import ExitCode, exit_code_for
from instemb_rag.encoder.model import shipped_llm_folder
from instemb_rag.errors import CheckpointError, FingerprintMismatchError, InstEmbError, ModelNotFoundError
from instemb_rag.index import BadInputError, IndexBusyError, IndexFolderError
from instemb_rag.index.errors import RayWorkerError

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (BadInputError("empty query"), ExitCode.BAD_INPUT),
        (InstEmbError("records.jsonl line 2 lacks 'output'"), ExitCode.BAD_INPUT),
        (ValueError("bad value"), ExitCode.BAD_INPUT),
        (IndexBusyError("locked"), ExitCode.BUSY),
        (IndexFolderError("no manifest"), ExitCode.INDEX_FOLDER),
        (CheckpointError("lora/ missing"), ExitCode.MODEL),
        (FingerprintMismatchError("other base"), ExitCode.MODEL),
        (ModelNotFoundError("no gguf"), ExitCode.MODEL),
        (RayWorkerError("an encoder actor died"), ExitCode.RAY_WORKER),
        (RuntimeError("a bug"), ExitCode.FAILED),
    ],
)
def test_every_error_class_has_one_code(error, code):
    assert exit_code_for(error) == code


def test_unknown_choices_are_bad_input_in_every_command(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("a tent")
    for args in (
        ["index", str(docs), "--index-dir", str(tmp_path / "i"), "--store", "bogus"],
        ["index", str(docs), "--index-dir", str(tmp_path / "i"), "--faiss-index", "annoy"],
        ["demo", "--store", "bogus"],
        ["eval", "scifact", "--pooling", "maxpool"],
        ["export", str(tmp_path / "a"), str(tmp_path / "b"), "--pooling", "maxpool"],
        ["query", "tent", "--index-dir", str(tmp_path / "i"), "--device", "gpu0"],
        ["train", "--device", "tpu"],
    ):
        code, output = cli(*args)
        assert code == ExitCode.BAD_INPUT, (args, output)
        assert "Invalid value" in output and ("is not one of" in output or "is not a device" in output), output
    assert not (tmp_path / "i").exists(), "a refused option must not create the index folder"


def test_an_incomplete_checkpoint_is_a_model_error(tmp_path):
    shutil.copytree(shipped_llm_folder(), tmp_path / "ckpt")  # the LLM checkpoint, whichever layout ships
    (tmp_path / "ckpt" / "lora" / "adapter_model.safetensors").unlink()
    code, output = cli("export", str(tmp_path / "ckpt"), str(tmp_path / "out"))
    assert code == ExitCode.MODEL and "lora/adapter_model.safetensors is missing" in output
    code, output = cli(
        "index", str(tmp_path), "--index-dir", str(tmp_path / "i"), "--model", str(tmp_path / "ckpt"), "--no-progress"
    )
    assert code == ExitCode.MODEL and "is incomplete" in output


def test_help_does_not_load_torch_faiss_or_ray():
    script = (
        "import sys\nfrom typer.testing import CliRunner\nfrom instemb_rag.cli import app\n"
        "result = CliRunner().invoke(app, ['index', '--help'])\nassert result.exit_code == 0, result.output\n"
        "print(sorted(name for name in ('torch', 'faiss', 'transformers', 'ray') if name in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_store_choice_errors_say_whose_fault_they_are(tmp_path):
    from instemb_rag.index.manifest import Manifest
    from instemb_rag.index.options import StoreOptions, resolve_options

    with pytest.raises(BadInputError, match="--store must be one of faiss, qdrant, got 'bogus'"):
        resolve_options(StoreOptions(store="bogus"), None, tmp_path)
    with pytest.raises(BadInputError, match="--faiss-index must be one of flat, hnsw, ivf, got 'annoy'"):
        resolve_options(StoreOptions(faiss_index="annoy"), None, tmp_path)
    manifest = Manifest(
        encoder_fingerprint="f",
        encoder_reference="default",
        template={},
        dimension=4,
        store="annoy",
        chunk_size=16,
        chunk_overlap=0,
    )
    with pytest.raises(IndexFolderError, match=r"manifest\.json: store must be one of faiss, qdrant"):
        resolve_options(StoreOptions(), manifest, tmp_path)
    manifest.store = "faiss"
    with pytest.raises(IndexFolderError, match="to switch to qdrant, pass --rebuild"):
        resolve_options(StoreOptions(store="qdrant"), manifest, tmp_path)
    resolved = resolve_options(StoreOptions(), manifest, tmp_path)
    assert (resolved.store, resolved.faiss_index) == ("faiss", "flat")
