"""The distillation-items format (datasets/embedding_items.py): what the builder writes is what a
geometry run reads, the builder's unit stays out of the file, and bad files are explained."""

import json

import pytest

from instemb_rag.datasets.embedding_items import EmbeddingItem, read_items, write_items
from instemb_rag.errors import InstEmbError

FORMAT_KEYS = ["id", "role", "text", "instruction", "group", "positive", "source"]  # the file on disk


def _items():
    return [
        EmbeddingItem(id="s:p1", role="passage", text="A tent for rain.", source="s", group="g1", unit="u1"),
        EmbeddingItem(
            id="s:q1", role="query", text="which tent", instruction="Durability only.", positive="s:p1", source="s"
        ),
        EmbeddingItem(id="t:q2", role="query", text="a stove", source="t", unit="u2"),
    ]


def test_written_items_read_back_equal_without_the_unit(tmp_path):
    path = tmp_path / "sub" / "texts.jsonl"
    write_items(path, _items())
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [list(row) for row in rows] == [FORMAT_KEYS] * 3  # the unit is the builder's, never written
    read = read_items(path)
    assert read == _items() and [item.source for item in read] == ["s", "s", "t"]
    assert [item.unit for item in read] == ["", "", ""]
    assert read[1].student_input == ("which tent", "Durability only.")


def test_a_positive_past_max_items_is_dropped(tmp_path):
    path = tmp_path / "texts.jsonl"
    write_items(path, list(reversed(_items())))  # the query comes before its positive passage
    first_two = read_items(path, max_items=2)
    assert [item.id for item in first_two] == ["t:q2", "s:q1"] and first_two[1].positive is None


def test_repeated_ids_and_bad_fields_are_refused(tmp_path):
    items = _items()
    with pytest.raises(ValueError, match="1 item ids occur twice"):
        write_items(tmp_path / "x.jsonl", [*items, items[0]])
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(items[0].as_json() | {"source": 3}) + "\n")
    with pytest.raises(InstEmbError, match=r"bad.jsonl line 1: field 'source' must be a string or null"):
        read_items(path)
    path.write_text("".join(json.dumps(items[0].as_json()) + "\n" for _ in range(2)))
    with pytest.raises(InstEmbError, match=r"item ids must be unique \(1 repeated\)"):
        read_items(path)
