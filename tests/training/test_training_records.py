"""Training records: validation with line numbers, round trip, builders over ../shared/data."""

import json

import pytest
from testing import shared_data_or_skip

from instemb_rag.datasets.builders import build_data_folder, build_records
from instemb_rag.datasets.records import RecordError, TrainingRecord, read_records, write_records


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


GOOD = json.dumps({"text": "a tent", "instruction": "weight?", "output": "2 kg"})


@pytest.mark.parametrize(
    "bad_line, words",
    [
        ("{not json", ["line 2", "not valid JSON"]),
        (json.dumps({"text": "t", "instruction": "i"}), ["line 2", "'output'"]),
        (json.dumps({"text": "  ", "output": "o"}), ["line 2", "'text'", "non-empty"]),
        (json.dumps(["text", "output"]), ["line 2", "JSON object"]),
        (json.dumps({"text": "t", "output": "o", "answer": "typo"}), ["line 2", "'answer'"]),
    ],
)
def test_bad_record_names_file_line_and_field(tmp_path, bad_line, words):
    path = _write_lines(tmp_path / "train.jsonl", [GOOD, bad_line, GOOD])
    with pytest.raises(RecordError) as caught:
        read_records(path)
    message = str(caught.value)
    assert str(path) in message
    for word in words:
        assert word in message


def test_missing_and_empty_files_are_explained(tmp_path):
    with pytest.raises(RecordError, match="build-data"):
        read_records(tmp_path / "absent.jsonl")
    with pytest.raises(RecordError, match="no records"):
        read_records(_write_lines(tmp_path / "empty.jsonl", [""]))


def test_round_trip_keeps_records_and_blank_instruction_becomes_none(tmp_path):
    records = [
        TrainingRecord(text="x", instruction="", output="y"),
        TrainingRecord(text="p", instruction="q", output="a"),
    ]
    write_records(tmp_path / "r.jsonl", records)
    loaded = read_records(tmp_path / "r.jsonl")
    assert loaded == records and loaded[0].instruction is None


def test_builders_read_every_set_and_split_held_out_by_group(tmp_path):
    root = shared_data_or_skip("scifact").parent
    sets = ["msmarco_qa", "pubmedqa", "condaqa", "scifact_stance", "scifact_stance_query"]
    train, heldout = build_records(root, sets, heldout_fraction=0.1, seed=3)
    sources = {r.source.split(":")[0] for r in train}
    assert sources == set(sets)
    assert 0.05 < len(heldout) / (len(train) + len(heldout)) < 0.15
    # No held-out text (passage / abstract) is trained on under another question.
    assert not {r.text for r in train} & {r.text for r in heldout if not r.source.startswith("condaqa")}
    stance = next(r for r in train if r.source.startswith("scifact_stance:"))
    assert "Claim:" in stance.instruction and stance.output.startswith("The findings")
    again, _ = build_records(root, sets, heldout_fraction=0.1, seed=3)
    assert again == train  # seeded: same split and order


def test_build_data_folder_writes_readable_files(tmp_path):
    root = shared_data_or_skip("pubmedqa").parent
    counts = build_data_folder(tmp_path / "data", root, ["pubmedqa"], heldout_fraction=0.2, seed=0)
    assert counts == {"train": 800, "heldout": 200}
    assert len(read_records(tmp_path / "data" / "train.jsonl")) == 800
    assert len(read_records(tmp_path / "data" / "heldout.jsonl")) == 200


def test_both_stance_directions_hold_out_the_same_claims():
    root = shared_data_or_skip("scifact").parent
    _, abstract_side = build_records(root, ["scifact_stance"], heldout_fraction=0.2, seed=1)
    train, query_side = build_records(root, ["scifact_stance_query"], heldout_fraction=0.2, seed=1)

    def pair(record):
        return tuple(record.source.split(":")[1:])  # (claim id, doc id)

    assert {pair(r) for r in abstract_side} == {pair(r) for r in query_side}
    query = train[0]
    assert query.instruction.startswith("Find a study whose findings")
    # The claim is the text and the abstract the answer, as a retrieval query sees them.
    assert query.text not in query.output and len(query.output) > len(query.text)
    # The other stance is the hard negative: one word differs from the instruction.
    assert query.negative_instruction and query.negative_instruction != query.instruction
    assert {query.instruction.split()[-3], query.negative_instruction.split()[-3]} == {"support", "contradict"}


def test_negative_instruction_round_trips_and_is_left_out_when_absent(tmp_path):
    records = [
        TrainingRecord(text="claim", instruction="support it", output="abstract", negative_instruction="refute it"),
        TrainingRecord(text="p", output="a", negative_instruction="  "),
    ]
    path = tmp_path / "r.jsonl"
    write_records(path, records)
    lines = path.read_text().splitlines()
    assert "negative_instruction" in lines[0] and "negative_instruction" not in lines[1]
    loaded = read_records(path)
    assert loaded[0].negative_instruction == "refute it" and loaded[1].negative_instruction is None


def test_record_file_streams_the_records_read_records_reads(tmp_path):
    from instemb_rag.datasets.records import open_records

    records = [
        TrainingRecord(
            text=f"text {i}",
            instruction="q" if i % 2 else None,
            output=f"out {i}",
            group=f"g{i // 3}" if i < 6 else None,
            negative_outputs=("other",) if i == 4 else (),
        )
        for i in range(9)
    ]
    write_records(tmp_path / "r.jsonl", records)
    path = _write_lines(
        tmp_path / "spaced.jsonl", [line + "\n" for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    )
    view = open_records(path)  # blank lines between records: offsets still land on each record
    assert len(view) == 9 and list(view) == records == read_records(path)
    assert view[-1] == records[-1] and view[2:4] == records[2:4]
    assert view.groups == [r.group for r in records] and view.negative_carriers == 1
    with pytest.raises(RecordError, match="line 2"):
        open_records(_write_lines(tmp_path / "bad.jsonl", [GOOD, "{not json"]))
