"""The shipped default and every candidate under research/checkpoints/ load and embed as they did
before issue 54's encoder of parts, with the same fingerprints (an index keys on them).

tests/data/shipped_before_issue54.safetensors holds their vectors at commit 8350c4c, recorded by
running this file as a script there (``python tests/test_shipped_vectors_unchanged.py``); the JSON
beside it holds each folder's content digest, fingerprint, document fingerprint and dimension.
A folder whose content changed since (another default shipped, a candidate retrained) is another
model: it is skipped, saying so. The tiny models of every layout: tests/encoder/test_layouts_unchanged.py.

Issue 62 re-saved every folder in the current format (class paths; the same weight files): an
entry's ``same_model_digests`` are the digests of the same model re-saved, checked against the
same vectors and identity. tests/data/shipped_before_issue62.* holds the folders the issue-54
record no longer pinned (the shipped default, effect-r1), recorded at commit a787c51 before the
re-save with ``record()``'s steps (``PYTHONPATH=<a git archive of a787c51>``, the same texts);
issue 61's candidates (effect-llm-a/b/c) were added to it at commit 0bc02f2, before format 3 renamed
the parts (the same steps, one folder at a time).
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
# Every record the folders are compared with: (vectors, digests and identities).
RECORDS = [(RECORDED, SPEC), (DATA / "shipped_before_issue62.safetensors", DATA / "shipped_before_issue62.json")]
FOLDERS = ["instemb_rag/default_checkpoint"] + sorted(
    path.relative_to(ROOT).as_posix()
    for path in (ROOT / "research" / "checkpoints").iterdir()
    if path.is_dir() and not (path / "adapter.safetensors").is_file()  # issue 67's readers embed nothing
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


def records_of(name: str) -> list[tuple[Path, dict]]:
    """(vectors file, entry) of each record that holds this folder's model as its files are now."""
    digest = content_digest(ROOT / name)
    found = []
    for vectors, spec_file in RECORDS:
        entry = json.loads(spec_file.read_text()).get(name)
        if entry is not None and digest in (entry["digest"], *entry.get("same_model_digests", ())):
            found.append((vectors, entry))
    return found


@pytest.mark.parametrize("name", FOLDERS)
def test_a_shipped_or_candidate_folder_embeds_as_it_did(name):
    from safetensors.numpy import load_file

    from instemb_rag import InstEmbEncoder

    records = records_of(name)
    if not records:
        pytest.skip(f"{name}: no record holds the model its files hold now (another model, or recorded since)")
    encoder = InstEmbEncoder.from_pretrained(ROOT / name, device="cpu")
    now = embeddings(encoder)
    for vectors_file, entry in records:
        assert identity(encoder) == entry["identity"]
        recorded = {
            key.split("|", 1)[1]: value
            for key, value in load_file(str(vectors_file)).items()
            if key.startswith(f"{name}|")
        }
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
