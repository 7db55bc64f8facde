"""Issue 54 item 6: every model folder this project writes loads as a ``SentenceTransformer``, and
``encode_query(texts, prompt=instruction)`` / ``encode_document(texts)`` are the encoder's own
``encode_queries(texts, [instruction] * n)`` / ``encode_documents(texts)``, for a symmetric
checkpoint, a two-space folder and an instruction-effect folder built here from tiny models.
The instruction keeps its place after the text; no prompt is no instruction."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from sentence_transformers import SentenceTransformer  # noqa: E402

from instemb_rag import InstEmbEncoder  # noqa: E402
from instemb_rag.encoder.st_files import MODULE_CLASS, MODULES_FILE, ST_CONFIG_FILE  # noqa: E402
from instemb_rag.errors import InstEmbError  # noqa: E402
from instemb_rag.interop import load_sentence_transformer  # noqa: E402

DOCS = ["the tent is durable nylon .", "a light tent of 1 kg .", "the stove burns gas ."]
QUERIES = ["which tent is light ?", "which tent lasts ?"]
INSTRUCTION = "focus on weight"
KINDS = ("symmetric", "two_spaces", "instruction_effect")


@pytest.fixture(scope="module")
def folders(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> dict:
    """One folder of each kind, written by the project's own saves."""
    from instemb_rag.encoder.load import untrained_effect, untrained_two_spaces

    root = tmp_path_factory.mktemp("st_interop")
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    encoder.save(root / "symmetric")
    untrained_two_spaces(str(tiny_model_dir), str(tiny_st_dir), 0.6, device="cpu", lookahead_length=2).save(
        root / "two_spaces"
    )
    effect = untrained_effect(str(tiny_model_dir), str(tiny_st_dir), 2.0, device="cpu", lookahead_length=2)
    effect.save(root / "instruction_effect")
    return {kind: root / kind for kind in KINDS}


def st_model(folder, **kwargs) -> SentenceTransformer:
    return SentenceTransformer(str(folder), trust_remote_code=True, device="cpu", **kwargs)


def close(a, b) -> None:
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_the_folder_holds_the_sentence_transformers_files(folders, kind):
    modules = json.loads((folders[kind] / MODULES_FILE).read_text())
    assert modules == [{"idx": 0, "name": "0", "path": "", "type": MODULE_CLASS}]
    config = json.loads((folders[kind] / ST_CONFIG_FILE).read_text())
    assert config["prompts"] == {"query": "", "document": ""} and config["similarity_fn_name"] == "cosine"


@pytest.mark.parametrize("kind", KINDS)
def test_encode_query_and_encode_document_are_the_encoders_own_vectors(folders, kind):
    model = st_model(folders[kind])
    encoder = InstEmbEncoder.from_pretrained(folders[kind], device="cpu")
    assert model.get_embedding_dimension() == encoder.dimension
    close(model.encode_query(QUERIES, prompt=INSTRUCTION), encoder.encode_queries(QUERIES, [INSTRUCTION] * 2))
    close(model.encode_document(DOCS), encoder.encode_documents(DOCS))
    plain = encoder.encode_queries(QUERIES, None)
    for no_instruction in ({}, {"prompt": ""}, {"prompt": "   "}):  # no prompt, or a blank one: none
        close(model.encode_query(QUERIES, **no_instruction), plain)
    # A plain encode: documents, or a query when it is given an instruction.
    close(model.encode(DOCS), encoder.encode_documents(DOCS))
    close(model.encode(QUERIES, prompt=INSTRUCTION), encoder.encode_queries(QUERIES, INSTRUCTION))


def test_the_instruction_keeps_its_place_after_the_text(folders):
    model = st_model(folders["symmetric"])
    encoder = InstEmbEncoder.from_pretrained(folders["symmetric"], device="cpu")
    text, instruction = QUERIES[0], INSTRUCTION
    ids = encoder.build_ids(text, instruction)
    text_ids = encoder.tokenizer(text, add_special_tokens=False).input_ids
    instruction_ids = encoder.tokenizer(instruction, add_special_tokens=False).input_ids
    at = {name: next(n for n in range(len(ids)) if ids[n : n + len(part)] == part) for name, part in
          (("text", text_ids), ("instruction", instruction_ids))}  # fmt: skip
    assert at["text"] < at["instruction"]
    vector = model.encode_query([text], prompt=instruction)
    close(vector, encoder.encode_queries([text], instruction))
    pasted_in_front = encoder.encode_queries([f"{instruction} {text}"], None)
    assert not np.allclose(vector, pasted_in_front, atol=1e-4)


def test_the_query_knob_of_each_arrangement_is_an_encode_query_keyword(folders):
    two_spaces = st_model(folders["two_spaces"])
    encoder = InstEmbEncoder.from_pretrained(folders["two_spaces"], device="cpu")
    weighted = two_spaces.encode_query(QUERIES, prompt=INSTRUCTION, llm_weight=0.2)
    close(weighted, encoder.encode_queries(QUERIES, INSTRUCTION, llm_weight=0.2))
    assert not np.allclose(weighted, two_spaces.encode_query(QUERIES, prompt=INSTRUCTION), atol=1e-4)
    with pytest.raises(InstEmbError, match="query-time knob"):
        two_spaces.encode_document(DOCS, llm_weight=0.2)
    effect = st_model(folders["instruction_effect"])
    encoder = InstEmbEncoder.from_pretrained(folders["instruction_effect"], device="cpu")
    stronger = effect.encode_query(QUERIES, prompt=INSTRUCTION, instruction_strength=4.0)
    close(stronger, encoder.encode_queries(QUERIES, INSTRUCTION, instruction_strength=4.0))
    with pytest.raises(ValueError, match="llm_weight"):  # sentence-transformers: not this model's keyword
        st_model(folders["symmetric"]).encode_query(QUERIES, llm_weight=0.2)


def test_a_document_instruction_is_the_encoders_to_take_or_refuse(folders):
    symmetric = st_model(folders["symmetric"])
    encoder = InstEmbEncoder.from_pretrained(folders["symmetric"], device="cpu")
    close(symmetric.encode_document(DOCS, prompt=INSTRUCTION), encoder.encode_documents(DOCS, INSTRUCTION))
    with pytest.raises(InstEmbError, match="instruction"):
        st_model(folders["two_spaces"]).encode_document(DOCS, prompt=INSTRUCTION)


def test_without_trust_remote_code_it_is_refused_and_the_helper_passes_the_class(folders, tmp_path):
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(folders["symmetric"]), device="cpu")
    encoder = InstEmbEncoder.from_pretrained(folders["two_spaces"], device="cpu")
    helper = load_sentence_transformer(folders["two_spaces"], device="cpu")
    close(helper.encode_query(QUERIES, prompt=INSTRUCTION), encoder.encode_queries(QUERIES, INSTRUCTION))
    close(helper.encode_document(DOCS), encoder.encode_documents(DOCS))
    # A folder written before the sentence-transformers files existed loads through the helper too.
    older = tmp_path / "older"
    shutil.copytree(folders["symmetric"], older)
    (older / MODULES_FILE).unlink()
    (older / ST_CONFIG_FILE).unlink()
    encoder = InstEmbEncoder.from_pretrained(older, device="cpu")
    close(load_sentence_transformer(older, device="cpu").encode_query(QUERIES), encoder.encode_queries(QUERIES))


def test_model_kwargs_are_the_encoders_load_settings(folders):
    model = st_model(folders["symmetric"], model_kwargs={"max_length": 16})
    assert model.max_seq_length == 16
    encoder = InstEmbEncoder.from_pretrained(folders["symmetric"], device="cpu", max_length=16)
    close(model.encode_document(DOCS), encoder.encode_documents(DOCS))
    with pytest.raises(InstEmbError, match="not settings of an InstEmb model"):
        st_model(folders["symmetric"], model_kwargs={"torch_dtype": "float16"})


@pytest.mark.parametrize("kind", ("symmetric", "two_spaces"))
def test_a_sentence_transformers_save_is_the_encoders_save(folders, kind, tmp_path):
    model = st_model(folders[kind], prompts={"weight": INSTRUCTION})
    model.save(str(tmp_path / "resaved"))
    again = st_model(tmp_path / "resaved")
    assert again.prompts["weight"] == INSTRUCTION  # its prompts, as sentence-transformers saved them
    close(again.encode_query(QUERIES, prompt_name="weight"), model.encode_query(QUERIES, prompt=INSTRUCTION))
    close(again.encode_document(DOCS), model.encode_document(DOCS))


def test_export_format_sentence_transformers(folders, tmp_path):
    from typer.testing import CliRunner

    from instemb_rag.cli import app

    source = tmp_path / "trained"
    shutil.copytree(folders["instruction_effect"], source)
    (source / "trainer_state.json").write_text("{}")  # a training run's state: left out of the copy
    for name in (MODULES_FILE, ST_CONFIG_FILE):
        (source / name).unlink()  # as a folder written before these files existed
    out = tmp_path / "exported"
    result = CliRunner().invoke(app, ["export", str(source), "--format", "sentence-transformers", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / MODULES_FILE).is_file() and (out / "README.md").is_file()
    assert not (out / "trainer_state.json").exists()
    encoder = InstEmbEncoder.from_pretrained(source, device="cpu")
    close(st_model(out).encode_query(QUERIES, prompt=INSTRUCTION), encoder.encode_queries(QUERIES, INSTRUCTION))

    # The checkpoint format's export is a model folder of this project too.
    copy = tmp_path / "copy"
    result = CliRunner().invoke(app, ["export", str(folders["symmetric"]), str(copy), "--max-length", "16"])
    assert result.exit_code == 0, result.output
    assert st_model(copy).max_seq_length == 16
    refused = CliRunner().invoke(app, ["export", str(source), "--out", str(tmp_path / "x"), "--max-length", "16",
                                       "--format", "sentence-transformers"])  # fmt: skip
    assert refused.exit_code == 5 and "composed folder" in refused.output
    both = CliRunner().invoke(app, ["export", str(source), str(tmp_path / "a"), "--out", str(tmp_path / "b")])
    assert both.exit_code == 2 and "Two targets" in both.output
