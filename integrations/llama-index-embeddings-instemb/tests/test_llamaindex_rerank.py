"""InstEmbRerank: the reader as a node postprocessor, with the instruction per call (issue 67)."""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index.embeddings.instemb import InstEmbRerank, InstructionQueryBundle

TEXTS = ["a light tent for one", "a heavy tent for storms", "the tent is not light"]


@pytest.fixture(scope="module")
def reader_dir(tiny_st_dir, tmp_path_factory):
    from testing import build_tiny_reader_folder

    return build_tiny_reader_folder(tmp_path_factory.mktemp("reader_li") / "final", tiny_st_dir)


def nodes(scores=(0.5, 0.4, 0.45)):
    return [
        NodeWithScore(node=TextNode(text=text, id_=f"n{i}"), score=s) for i, (text, s) in enumerate(zip(TEXTS, scores))
    ]


def test_fused_scores_in_order_and_top_n(reader_dir):
    from instemb_rag import Reranker

    rerank = InstEmbRerank(model_folder=str(reader_dir), top_n=2)
    out = rerank.postprocess_nodes(nodes(), QueryBundle("which tent"), instruction="focus on weight")
    expected = Reranker.from_pretrained(reader_dir).score("which tent", "focus on weight", TEXTS, [0.5, 0.4, 0.45])
    by_id = {f"n{i}": value for i, value in enumerate(expected)}
    assert len(out) == 2 and out[0].score >= out[1].score
    assert [node.score for node in out] == pytest.approx(sorted(expected, reverse=True)[:2])
    assert all(node.score == pytest.approx(by_id[node.node.id_]) for node in out)


def test_the_instruction_comes_with_each_call(reader_dir):
    rerank = InstEmbRerank(model_folder=str(reader_dir), instruction="focus on weight")
    bundle = InstructionQueryBundle("which tent", instruction="focus on durability")
    from_bundle = rerank.postprocess_nodes(nodes(), bundle)
    explicit = rerank.postprocess_nodes(nodes(), QueryBundle("which tent"), instruction="focus on durability")
    default = rerank.postprocess_nodes(nodes(), QueryBundle("which tent"))
    assert [n.score for n in from_bundle] == pytest.approx([n.score for n in explicit])
    assert [n.score for n in default] != pytest.approx([n.score for n in explicit])
    assert InstEmbRerank.class_name() == "InstEmbRerank"
    assert rerank.postprocess_nodes([], QueryBundle("which tent")) == []
