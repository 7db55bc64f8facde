"""The offline GPU path on this CPU: a kit built by scripts/gpu_kit.py installs with no package
index (PIP_NO_INDEX=1) through `gpu.sh --offline KIT --dry-run`, and the installed package embeds
a query with the model the kit carried; damaged or missing pieces, a wrong Python and a package the
image lacks stop it with a message naming them; benchmarks/merge_gpu_results.py writes the GPU
table idempotently."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_kit.py"
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_kit  # noqa: E402  (scripts/ and benchmarks/ are no packages)
import kit_install  # noqa: E402
import kit_pieces  # noqa: E402
import kit_wheels  # noqa: E402

MIB = 1 << 20
CORPUS_LINES = [json.dumps({"_id": str(i), "title": f"t{i}", "text": "the tent is light " * 20}) for i in range(40)]


def clean_env(**extra: str) -> dict:
    """No PYTHONPATH leaking in from the test run; no package index for pip."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "INSTEMB_HOME")}
    return {**env, "PIP_NO_INDEX": "1", **extra}


def build(out: Path, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "build", "--out", str(out), "--local", *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def install(kit: Path, work: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "install", str(kit), "--work", str(work)]
    return subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=300)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    (root / "scifact").mkdir()
    (root / "scifact" / "corpus.jsonl").write_text("\n".join(CORPUS_LINES) + "\n")
    return root


@pytest.fixture(scope="module")
def kit(tmp_path_factory, tiny_model_dir, data_root) -> Path:
    """Project wheel + tiny model + a data file, pieces of 1 MiB in transfers of ~2 MiB."""
    out = tmp_path_factory.mktemp("kit") / "gpu-kit"
    transfer_mib = math.ceil(gpu_kit.working_tree_bytes() / MIB) + 3
    done = build(
        out,
        "--no-dependency-wheels",
        "--model",
        str(tiny_model_dir),
        "--data-root",
        str(data_root),
        "--piece-mib",
        "1",
        "--transfer-mib",
        str(transfer_mib),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_plan_keeps_every_transfer_within_its_budget(kit):
    plan = json.loads((kit / "plan.json").read_text())
    manifest = json.loads((kit / "manifest.json").read_text())
    pieces = {p["name"]: p for entry in manifest["entries"] for p in entry["pieces"]}
    assert len(plan["transfers"]) >= 2, plan  # the 4 MB wheel alone needs several
    assert (
        plan["budget_bytes"] + plan["working_tree_bytes"] + plan["metadata_reserve_bytes"]
        == plan["transfer_limit_bytes"]
    )
    planned = [name for transfer in plan["transfers"] for name in transfer["pieces"]]
    assert sorted(planned) == sorted(pieces)  # every piece in exactly one transfer
    for transfer in plan["transfers"]:
        on_disk = sum(path.stat().st_size for path in (kit / transfer["name"]).iterdir())
        assert on_disk == transfer["bytes"] <= plan["budget_bytes"]
        assert transfer["carry"] == [f"{kit}/manifest.json", f"{kit}/plan.json", f"{kit}/{transfer['name']}"]
    assert max(p["size"] for p in pieces.values()) <= MIB
    codecs = {entry["dest"].split("/")[0]: entry["codec"] for entry in manifest["entries"]}
    assert codecs == {"wheels": "raw", "models": "xz", "data": "xz"}


def test_offline_dry_run_installs_and_embeds_a_query(kit, tmp_path, tiny_model_dir, data_root):
    from instemb_rag import InstEmbEncoder

    sent = tmp_path / "gpu-kit"
    shutil.copytree(kit, sent)
    results = tmp_path / "results"
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu.sh"), "--offline", str(sent), "--results", str(results), "--dry-run"],
        capture_output=True,
        text=True,
        env=clean_env(PYTHON=sys.executable),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = [line for line in done.stdout.splitlines() if "(dry run, not run)" in line]
    assert any("pytest" in line and "tests/test_cuda_path.py" in line for line in shown)
    assert any("benchmarks/run.py --device cuda" in line for line in shown)

    smoke = json.loads((results / "smoke.json").read_text())
    site = sent / "unpacked" / "site"
    assert Path(smoke["module"]).resolve().is_relative_to(site.resolve()), smoke["module"]
    assert not Path(smoke["torch_file"]).resolve().is_relative_to(site.resolve())  # torch stays the interpreter's
    assert smoke["device"] == "cpu" and smoke["dimension"] == 64 and abs(smoke["norm"] - 1) < 1e-4
    # The model came through the pieces bit for bit: the installed package embeds as the checkout does.
    expected = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu").encode_queries(
        [kit_install.SMOKE_QUERY[0]], kit_install.SMOKE_QUERY[1]
    )[0]
    np.testing.assert_allclose(np.array(smoke["vector"], dtype=np.float32), expected, rtol=0, atol=1e-6)
    restored = sent / "unpacked" / "models" / "backbone"
    assert {p.name: p.read_bytes() for p in restored.iterdir()} == {
        p.name: p.read_bytes() for p in tiny_model_dir.iterdir()
    }
    assert (sent / "unpacked" / "data" / "scifact" / "corpus.jsonl").read_bytes() == (
        data_root / "scifact" / "corpus.jsonl"
    ).read_bytes()
    assert (
        json.loads((results / "install.json").read_text())["kit_id"]
        == json.loads((sent / "manifest.json").read_text())["kit_id"]
    )


def test_missing_and_damaged_pieces_name_the_transfers_to_send_again(kit, tmp_path):
    sent = tmp_path / "gpu-kit"
    shutil.copytree(kit, sent)
    plan = json.loads((sent / "plan.json").read_text())
    first, second = plan["transfers"][0], plan["transfers"][1]
    shutil.rmtree(sent / second["name"])  # a transfer never sent
    damaged = sent / first["name"] / first["pieces"][0]
    damaged.write_bytes(b"x" + damaged.read_bytes()[1:])

    done = install(sent, tmp_path / "work")
    assert done.returncode == 2
    assert f"{first['name']}" in done.stderr and f"{first['pieces'][0]} does not match its sha256" in done.stderr
    assert f"{second['name']}" in done.stderr and "is missing" in done.stderr
    assert not (tmp_path / "work" / "site").exists()  # nothing installed from a broken kit


def test_wrong_python_and_missing_image_packages_stop_before_joining(kit, tmp_path):
    sent = tmp_path / "gpu-kit"
    shutil.copytree(kit, sent)
    manifest = json.loads((sent / "manifest.json").read_text())
    (sent / "manifest.json").write_text(json.dumps({**manifest, "target": {"python": "3.99", "local": False}}))
    done = install(sent, tmp_path / "work")
    assert done.returncode == 2 and "Python 3.99" in done.stderr and "--python-version" in done.stderr

    manifest["wheels"][0]["requires"].append("no-such-package-anywhere>=1")
    (sent / "manifest.json").write_text(json.dumps(manifest))
    done = install(sent, tmp_path / "work")
    assert done.returncode == 2, done.stderr
    assert "lacks no-such-package-anywhere" in done.stderr and "--also no-such-package-anywhere" in done.stderr
    assert not (tmp_path / "work").exists()


def test_pieces_join_back_byte_for_byte_across_piece_boundaries(tmp_path):
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(30_007))  # incompressible, not a multiple of the piece size
    staging, kit = tmp_path / "staging", tmp_path / "kit"
    staging.mkdir()
    kit.mkdir()
    entry = kit_pieces.cut_into_pieces(source, "models/blob.bin", "model", staging, piece_bytes=4096)
    assert entry.codec == "xz" and all(p.size <= 4096 for p in entry.pieces) and len(entry.pieces) >= 2
    kit_pieces.plan_transfers([entry], budget_bytes=10_000)
    kit_pieces.move_into_transfers(staging, kit, [entry])
    kit_pieces.join_all(kit, [entry], tmp_path / "work")
    assert (tmp_path / "work" / "models" / "blob.bin").read_bytes() == source.read_bytes()
    with pytest.raises(kit_pieces.KitError, match="larger than a transfer"):
        kit_pieces.plan_transfers([entry], budget_bytes=100)


def test_the_image_keeps_its_packages_and_torch_is_never_shipped():
    resolved = [
        {"name": name, "version": "1"} for name in ("torch", "numpy", "gguf", "nvidia-cublas", "faiss-gpu-cuvs")
    ]
    image = kit_wheels.read_image_packages()  # the GPU image's list shipped with the script
    assert {"torch", "transformers", "numpy", "nvidia-cublas", "peft"} <= image
    shipped = [p["name"] for p in kit_wheels.select_shipped(resolved, image, also=set())]
    assert shipped == ["gguf", "faiss-gpu-cuvs"]
    forced = [p["name"] for p in kit_wheels.select_shipped(resolved, image, also={"nvidia_cublas", "torch"})]
    assert forced == ["gguf", "nvidia-cublas", "faiss-gpu-cuvs"]  # --also never brings torch
    wanted = [kit_wheels.requirement_name(r) for r in kit_wheels.project_requirements()]
    assert "faiss-gpu-cuvs" in wanted and "faiss-cpu" not in wanted and "fastapi" in wanted and "pytest" in wanted


@pytest.mark.pypi
def test_dependency_wheels_from_pypi_install_without_an_index(tmp_path, tiny_model_dir):
    out = tmp_path / "gpu-kit"
    done = build(out, "--requirement", "six", "--model", str(tiny_model_dir), "--no-data")
    if done.returncode == 2 and "is PyPI reachable?" in done.stderr:
        pytest.skip(f"pip could not fetch 'six' from PyPI: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    wheels = {row["name"]: row["role"] for row in json.loads((out / "manifest.json").read_text())["wheels"]}
    assert wheels == {"instemb-rag": "install", "six": "install"}

    done = install(out, tmp_path / "work")
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "work" / "site"
    probe = subprocess.run(
        [sys.executable, "-c", "import six, instemb_rag; print(six.__file__); print(instemb_rag.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(site)),
    )
    assert probe.returncode == 0, probe.stderr
    assert all(Path(line).resolve().is_relative_to(site.resolve()) for line in probe.stdout.split())
