"""Every layout written before issue 54 (tests/legacy_layouts.py: symmetric, blended head,
two-tower, anchored two-tower, two spaces trained and fixed, instruction effect trained and
identity) loads and embeds as it did, and a save of what loaded loads to the same encoder.

tests/data/layouts_before_issue54.safetensors holds the vectors each layout gave at commit
8350c4c (before the encoder of parts), recorded by running this file as a script there
(``python tests/encoder/test_layouts_unchanged.py``). The shipped default and the committed
candidates are compared the same way in tests/test_shipped_vectors_unchanged.py (slow).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from legacy_layouts import LAYOUTS, embeddings, write_layout  # noqa: E402

RECORDED = Path(__file__).parents[1] / "data" / "layouts_before_issue54.safetensors"
# The tiny models are seeded, so a machine that sums fp32 in another order moves components by
# about 1e-6; a change in what is embedded moves them by orders of magnitude more.
ATOL = 1e-5


@pytest.fixture(scope="module")
def layout_root(tmp_path_factory, tiny_model_dir, tiny_st_dir) -> Path:
    root = tmp_path_factory.mktemp("layouts")
    for name in LAYOUTS:
        write_layout(name, root / name, tiny_model_dir, tiny_st_dir)
    return root


def load(folder):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(folder, device="cpu")


@pytest.mark.parametrize("name", LAYOUTS)
def test_an_older_layout_embeds_as_it_did(layout_root, name):
    from safetensors.numpy import load_file

    recorded = {
        key.split("/", 1)[1]: value for key, value in load_file(str(RECORDED)).items() if key.startswith(f"{name}/")
    }
    now = embeddings(load(layout_root / name))
    assert set(now) == set(recorded)
    for key, vectors in now.items():
        assert vectors.dtype == np.float32 and vectors.shape == recorded[key].shape, key
        np.testing.assert_allclose(vectors, recorded[key], rtol=0, atol=ATOL, err_msg=f"{name}/{key}")


@pytest.mark.parametrize("name", LAYOUTS)
def test_a_save_of_a_loaded_layout_is_the_same_encoder(layout_root, tmp_path, name):
    before = load(layout_root / name)
    before.save(tmp_path / "saved")
    after = load(tmp_path / "saved")
    assert after.fingerprint == before.fingerprint
    assert after.document_fingerprint == before.document_fingerprint
    assert after.dimension == before.dimension
    for key, vectors in embeddings(after).items():
        np.testing.assert_allclose(vectors, embeddings(before)[key], rtol=0, atol=1e-6, err_msg=key)


def record() -> None:
    """Write RECORDED from this checkout's code (run once, before the move)."""
    import tempfile

    from safetensors.numpy import save_file
    from testing import build_tiny_model_folder, build_tiny_sentence_encoder_folder

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        base = build_tiny_model_folder(scratch / "tiny_llama")
        (scratch / "tiny_st").mkdir()
        sentence_encoder = build_tiny_sentence_encoder_folder(scratch / "tiny_st")
        tensors = {}
        for name in LAYOUTS:
            vectors = embeddings(load(write_layout(name, scratch / "layouts" / name, base, sentence_encoder)))
            tensors.update({f"{name}/{key}": np.ascontiguousarray(value) for key, value in vectors.items()})
        save_file(tensors, str(RECORDED))
    print(f"wrote {len(tensors)} arrays to {RECORDED}")


if __name__ == "__main__":
    record()
