"""Every packaged recipe trains one step on the tiny models, whichever objective it selects; and a
run that builds its own records reads them from ``$INSTEMB_DATA_ROOT`` (paths.data_root())."""

import json
import random
from pathlib import Path

import pytest
from helpers import TINY_RECIPE, build_tiny_teacher_folder
from test_geometry import write_contrast_records, write_items
from testing import build_tiny_model_folder

from instemb_rag.datasets.records import TrainingRecord, write_records
from instemb_rag.errors import InstEmbError
from instemb_rag.training.args import load_config
from instemb_rag.training.objectives import objective_for
from instemb_rag.training.trainer import train

RECIPES = sorted(Path(TINY_RECIPE).parent.glob("*.yaml"))
WORDS = "the tent is light and durable for a camp trip in cold rain with water stove".split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipes")
    rng = random.Random(1)
    records = [
        TrainingRecord(
            text=" ".join(rng.choice(WORDS) for _ in range(8)),
            instruction=rng.choice(["what is the weight ?", None]),
            output=" ".join(rng.choice(WORDS) for _ in range(4)),
            source=f"{rng.choice(['msmarco_passages', 'stance_pairs'])}:{n}",
        )
        for n in range(12)
    ]
    write_records(root / "train.jsonl", records)
    return {
        "root": root,
        "student": build_tiny_model_folder(root / "student", layers=3),
        "teacher": build_tiny_teacher_folder(root / "teacher"),
        "items": write_items(root / "items.jsonl"),
        "contrast": write_contrast_records(root / "contrast.jsonl"),
        "train": root / "train.jsonl",
    }


def tiny_overrides(raw: dict, tiny: dict, output: Path) -> dict:
    """The recipe as written, on the tiny models and files: one step, on the CPU."""
    overrides = {
        "model.model_name_or_path": str(tiny["student"]),
        "model.max_length": 48,
        "model.trainable_top_layers": 1,
        "training.output_dir": str(output / "run"),
        "training.max_steps": 1,
        "training.save_steps": 1,
        "training.batch_size": 4,
        "training.gradient_accumulation_steps": 1,
        "training.device": "cpu",
        "training.show_progress": False,
        "training.frozen_prefix_dir": str(output / "frozen_prefix"),
    }
    geometry = raw.get("geometry") or {}
    if geometry.get("teacher_encoder"):
        overrides.update(
            {
                "geometry.teacher_encoder": str(tiny["teacher"]),
                "geometry.texts_file": str(tiny["items"]),
                "geometry.prefix_cache_dir": str(output / "prefix"),
                "geometry.teacher_embedding_dir": str(output / "teacher_embeddings"),
                "training.batch_size": 6,
            }
        )
        if geometry.get("contrast_file"):
            overrides.update(
                {
                    "geometry.contrast_file": str(tiny["contrast"]),
                    "geometry.contrast_sets": ["stance_test"],
                    "geometry.contrast_batch_size": 4,
                }
            )
    elif (raw.get("two_tower") or {}).get("sentence_encoder"):
        overrides.update(
            {
                "two_tower.sentence_encoder": str(tiny["teacher"]),
                "two_tower.texts_file": str(tiny["items"]),
                "two_tower.prefix_cache_dir": str(output / "prefix"),
                "two_tower.embedding_dir": str(output / "sentence_encoder_embeddings"),
                "two_tower.bank_negatives": 4,
            }
        )
    elif (raw.get("two_spaces") or {}).get("texts_file"):
        overrides.update(
            {
                "two_spaces.documents_llm": str(tiny["student"]),
                "two_spaces.sentence_encoder": str(tiny["teacher"]),
                "two_spaces.texts_file": str(tiny["items"]),
                "two_spaces.prefix_cache_dir": str(output / "prefix"),
                "two_spaces.embedding_dir": str(output / "halves"),
                "two_spaces.bank_negatives": 4,
            }
        )
    elif (raw.get("effect") or {}).get("texts_file"):
        overrides.update(
            {
                "effect.documents_llm": str(tiny["student"]),
                "effect.sentence_encoder": str(tiny["teacher"]),
                "effect.texts_file": str(tiny["items"]),
                "effect.embedding_dir": str(output / "effect_vectors"),
                "effect.bank_negatives": 4,
                "effect.validation_share": 0.0,
                "effect.negatives_file": None,
                "effect.prefix_cache_dir": str(output / "prefix"),
            }
        )
    else:
        overrides["data.train_file"] = str(tiny["train"])
    return overrides


@pytest.mark.parametrize("recipe", RECIPES, ids=[path.stem for path in RECIPES])
def test_every_recipe_trains_one_step(recipe, tiny, tmp_path, monkeypatch):
    import yaml

    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    raw = yaml.safe_load(recipe.read_text())
    config = load_config(recipe, tiny_overrides(raw, tiny, tmp_path))
    final = train(config, log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1] and final.is_dir()
    expected = "geometry" if (raw.get("geometry") or {}).get("teacher_encoder") else "lookahead"
    if (raw.get("two_tower") or {}).get("sentence_encoder"):
        expected = "two_tower"
    if (raw.get("two_spaces") or {}).get("texts_file"):
        expected = "two_spaces"
    if (raw.get("effect") or {}).get("texts_file"):
        expected = "effect_llm" if raw["effect"].get("query_llm") else "effect"
    assert objective_for(config).name == expected


def write_msmarco(folder: Path) -> None:
    folder.mkdir(parents=True)
    rng = random.Random(2)
    passages = [" ".join(rng.choice(WORDS) for _ in range(9)) for _ in range(12)]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"p{n}", "text": t}) + "\n" for n, t in enumerate(passages))
    )
    queries = [{"_id": f"q{n}", "text": "what is the weight ?", "answers": [passages[n][:20]]} for n in range(12)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{n}\tp{n}\t1\n" for n in range(12)))


def test_a_run_that_builds_its_records_reads_instemb_data_root(tiny, tmp_path, monkeypatch):
    recipe = Path(TINY_RECIPE).resolve()
    write_msmarco(tmp_path / "data" / "msmarco_qa")
    monkeypatch.setenv("INSTEMB_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)  # no ../shared/data from here: only the variable can lead to the data
    overrides = tiny_overrides({}, tiny, tmp_path)
    del overrides["data.train_file"]
    config = load_config(recipe, {**overrides, "data.build_sets": ["msmarco_qa"]})
    assert config.data.data_root is None
    train(config, log=lambda _: None)
    built = (tmp_path / "run" / "data" / "train.jsonl").read_text().splitlines()
    assert built and all(json.loads(line)["source"].startswith("msmarco_qa:") for line in built)


def test_a_config_written_before_the_rename_still_loads_with_a_warning(tmp_path):
    old = tmp_path / "train_config.json"
    old.write_text(json.dumps({"training": {"teacher_cache": False, "teacher_cache_dir": "tc"}}))
    with pytest.warns(DeprecationWarning, match="llm_target_cache"):
        config = load_config(old)
    assert config.training.llm_target_cache is False and config.training.llm_target_cache_dir == "tc"
    with pytest.warns(DeprecationWarning):
        assert load_config(None, {"training.teacher_cache": False}).training.llm_target_cache is False


def test_a_config_naming_the_sentence_encoder_by_an_older_name_still_loads(tmp_path):
    """``document_tower`` named the recipes' sentence encoder before issue 54, ``sentence_encoder`` before issue 62,
    and the two-tower recipe's section was ``query_tower`` before issue 68: an older YAML, saved run or --set
    still loads, into the new field, with a warning."""
    old = tmp_path / "old.yaml"
    old.write_text(
        "model: {train_lookahead: false, trainable_top_layers: 2}\n"
        "query_tower: {document_tower: minilm, texts_file: items.jsonl}\n"
        "two_spaces: {document_tower: tower-folder}\n"
        "effect: {document_tower: other-folder}\n"
    )
    with pytest.warns(DeprecationWarning) as warned:
        config = load_config(old)
    messages = " ".join(str(warning.message) for warning in warned)
    assert "query_tower renamed to two_tower" in messages and "two_tower.sentence_encoder" in messages
    assert (
        config.two_tower.sentence_encoder,
        config.two_spaces.sentence_encoder,
        config.effect.sentence_encoder,
    ) == (
        "minilm",
        "tower-folder",
        "other-folder",
    )
    assert "document_tower" not in json.dumps(config.to_dict())
    with pytest.warns(DeprecationWarning):
        assert load_config(None, {"effect.document_tower": "x"}).effect.sentence_encoder == "x"
    with pytest.warns(DeprecationWarning):  # its name from issue 54 to issue 62
        assert load_config(None, {"two_spaces.tower": "x"}).two_spaces.sentence_encoder == "x"
    with pytest.raises(InstEmbError, match="give only one"):
        load_config(None, {"two_spaces.document_tower": "x", "two_spaces.sentence_encoder": "y"})
    with pytest.raises(InstEmbError, match="give only one"):
        load_config(None, {"two_tower.document_tower": "x", "two_tower.tower": "y"})
    with pytest.warns(DeprecationWarning, match="query_tower renamed to two_tower"):  # its name before issue 68
        assert load_config(None, {"query_tower.max_queries": 5}).two_tower.max_queries == 5
    with pytest.raises(InstEmbError, match="give only one"):
        load_config(None, {"query_tower.max_queries": 5, "two_tower.texts_file": "y"})
