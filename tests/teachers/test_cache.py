"""cached_embeddings: keyed by teacher fingerprint and text sha256, appended, checked on load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from instemb_rag.teachers.cache import INDEX_NAME, cached_embeddings, teacher_cache_folder
from instemb_rag.teachers.errors import TeacherCacheError
from instemb_rag.teachers.teacher import load_teacher

TEXTS = ["the tent is light", "a gas stove for camp", "the backpack strap", "rain and wind", "a cold night"]


@pytest.fixture()
def counted_teacher(tiny_st_dir):
    """The tiny teacher, recording the texts each encode call computes."""
    teacher = load_teacher(tiny_st_dir)
    teacher.computed = []
    real_encode = teacher.encode

    def encode(texts, **options):
        teacher.computed.append(list(texts))
        return real_encode(texts, **options)

    teacher.encode = encode
    return teacher


def test_cached_embeddings_equal_the_teachers_and_are_computed_once(counted_teacher, tmp_path):
    texts = TEXTS[:3] + [TEXTS[0]]  # a repeated text is computed once
    first = cached_embeddings(counted_teacher, texts, tmp_path)
    np.testing.assert_allclose(first, counted_teacher.model.encode(texts, normalize_embeddings=True), atol=1e-6)
    assert counted_teacher.computed == [TEXTS[:3]]
    again = cached_embeddings(counted_teacher, list(reversed(texts)), tmp_path)
    assert counted_teacher.computed == [TEXTS[:3]]  # nothing new
    np.testing.assert_array_equal(again, first[::-1])


def test_only_new_texts_are_computed_and_appended_in_shards(counted_teacher, tmp_path):
    cached_embeddings(counted_teacher, TEXTS[:2], tmp_path)
    embeddings = cached_embeddings(counted_teacher, TEXTS, tmp_path, shard_rows=2)
    assert counted_teacher.computed == [TEXTS[:2], TEXTS[2:4], TEXTS[4:]]
    index = json.loads((teacher_cache_folder(counted_teacher, tmp_path) / INDEX_NAME).read_text())
    assert [shard["rows"] for shard in index["shards"]] == [2, 2, 1]
    assert index["fingerprint"] == counted_teacher.fingerprint and embeddings.shape == (5, 32)


def test_an_interrupted_fill_keeps_the_finished_shards(counted_teacher, tmp_path):
    real_encode = counted_teacher.encode

    def encode_then_interrupt(texts, **options):
        if len(counted_teacher.computed) == 1:
            raise KeyboardInterrupt  # killed while computing the second shard
        return real_encode(texts, **options)

    counted_teacher.encode = encode_then_interrupt
    with pytest.raises(KeyboardInterrupt):
        cached_embeddings(counted_teacher, TEXTS, tmp_path, shard_rows=2)
    counted_teacher.encode = real_encode
    cached_embeddings(counted_teacher, TEXTS, tmp_path, shard_rows=2)
    assert counted_teacher.computed == [TEXTS[:2], TEXTS[2:4], TEXTS[4:]]


def test_a_damaged_shard_is_a_clear_error(counted_teacher, tmp_path):
    cached_embeddings(counted_teacher, TEXTS, tmp_path)
    folder = teacher_cache_folder(counted_teacher, tmp_path)
    shard = folder / "shard-00000.safetensors"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(
        TeacherCacheError, match=r"shard-00000.safetensors does not match the sha256.*Delete the folder"
    ):
        cached_embeddings(counted_teacher, TEXTS[:1], tmp_path)
    shard.write_bytes(bytes(data[:100]))
    with pytest.raises(TeacherCacheError, match=rf"{folder} is damaged"):
        cached_embeddings(counted_teacher, TEXTS[:1], tmp_path)
    (folder / INDEX_NAME).write_text("{not json")
    with pytest.raises(TeacherCacheError, match=r"index.json cannot be read"):
        cached_embeddings(counted_teacher, TEXTS[:1], tmp_path)


def test_another_teacher_gets_its_own_cache(counted_teacher, tmp_path):
    cached_embeddings(counted_teacher, TEXTS[:2], tmp_path)
    counted_teacher.fingerprint = "f" * 64  # other weights
    cached_embeddings(counted_teacher, TEXTS[:2], tmp_path)
    assert counted_teacher.computed == [TEXTS[:2], TEXTS[:2]]
    assert len(list(tmp_path.glob("*/" + INDEX_NAME))) == 2
