"""The shipped default and every candidate under research/checkpoints/ load and embed as they did
before issue 54's encoder of parts, with the same fingerprints (an index keys on them).

tests/data/shipped_before_issue54.safetensors holds their vectors at commit 8350c4c, recorded by
running this file as a script there (``python tests/test_shipped_vectors_unchanged.py``); the JSON
beside it holds each folder's content digest, fingerprint, document fingerprint and dimension.
A folder whose content changed since (another default shipped, a candidate retrained) is another
model: it is skipped, saying so. The tiny models of every layout: tests/encoder/test_layouts_unchanged.py.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from legacy_layouts import embeddings  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[1]
DATA = Path(__file__).parent / "data"
RECORDED = DATA / "shipped_before_issue54.safetensors"
SPEC = DATA / "shipped_before_issue54.json"
FOLDERS = ["instemb_rag/default_checkpoint"] + sorted(
    path.relative_to(ROOT).as_posix() for path in (ROOT / "research" / "checkpoints").iterdir() if path.is_dir()
)
# As tests/test_default_embeddings_unchanged.py: another CPU's fp32 summation order moves a
# component by about 1e-6; the recording machine gives the same bits.
ATOL = 1e-5


def content_digest(folder: Path) -> str:
    """sha256 over every file of the folder (relative path and content), hidden files left out."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            digest.update(relative.as_posix().encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def identity(encoder) -> dict:
    return {
        "fingerprint": encoder.fingerprint,
        "document_fingerprint": encoder.document_fingerprint,
        "dimension": encoder.dimension,
    }


@pytest.mark.parametrize("name", FOLDERS)
def test_a_shipped_or_candidate_folder_embeds_as_it_did(name):
    from safetensors.numpy import load_file

    from instemb_rag import InstEmbEncoder

    spec = json.loads(SPEC.read_text())
    if name not in spec:
        pytest.skip(f"{name} was not there when the vectors were recorded (run this file as a script to add it)")
    if content_digest(ROOT / name) != spec[name]["digest"]:
        pytest.skip(f"{name} holds another model than the one recorded (its files changed since)")
    encoder = InstEmbEncoder.from_pretrained(ROOT / name, device="cpu")
    assert identity(encoder) == spec[name]["identity"]
    recorded = {
        key.split("|", 1)[1]: value for key, value in load_file(str(RECORDED)).items() if key.startswith(f"{name}|")
    }
    now = embeddings(encoder)
    assert set(now) == set(recorded)
    for key, vectors in now.items():
        assert vectors.dtype == np.float32 and vectors.shape == recorded[key].shape, key
        np.testing.assert_allclose(vectors, recorded[key], rtol=0, atol=ATOL, err_msg=f"{name}/{key}")


def record() -> None:
    """Write RECORDED and SPEC from this checkout's code (run once, before the move)."""
    from safetensors.numpy import save_file

    from instemb_rag import InstEmbEncoder

    tensors, spec = {}, {}
    for name in FOLDERS:
        encoder = InstEmbEncoder.from_pretrained(ROOT / name, device="cpu")
        spec[name] = {"digest": content_digest(ROOT / name), "identity": identity(encoder)}
        tensors.update({f"{name}|{key}": np.ascontiguousarray(v) for key, v in embeddings(encoder).items()})
        print(name, spec[name]["identity"], flush=True)
        del encoder
    save_file(tensors, str(RECORDED))
    SPEC.write_text(json.dumps(spec, indent=2) + "\n")


if __name__ == "__main__":
    record()
