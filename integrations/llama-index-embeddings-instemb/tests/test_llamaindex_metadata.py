"""What gets embedded follows LlamaIndex's metadata modes: file metadata does not drown the instruction.

SimpleDirectoryReader keeps ``file_path`` in the text LlamaIndex embeds (MetadataMode.EMBED); with
the tiny model, prepending such a path makes "focus on light and compact" and "focus on heavy and
durable" agree on the top hit, while over the texts alone they do not. The node parser leaves the
file metadata out of the embedded text (and keeps it on the nodes); so does the README's
``excluded_embed_metadata_keys``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.readers.file.base import default_file_metadata_func
from llama_index.core.schema import MetadataMode

from llama_index.embeddings.instemb import FILE_METADATA_KEYS, InstEmbRetriever

QUERY = "which tent is good for a camp trip ?"
OPPOSITE = ("focus on light and compact", "focus on heavy and durable")


@pytest.fixture()
def corpus(tiny_docs, tmp_path):
    for number, text in enumerate(tiny_docs):
        (tmp_path / f"doc{number}.txt").write_text(text)
    return tmp_path


def read(corpus) -> list:
    """SimpleDirectoryReader's documents, with the file path an app's folder would have (the same
    on every machine, unlike tmp_path): LlamaIndex's default metadata otherwise."""

    def metadata(path: str) -> dict:
        return {**default_file_metadata_func(path), "file_path": f"/home/ana/projects/shop/notes/{Path(path).name}"}

    return SimpleDirectoryReader(str(corpus), file_metadata=metadata).load_data()


def expected_order(embed_model, docs, instruction) -> list[str]:
    encoder = embed_model.encoder
    scores = encoder.encode_documents(docs) @ encoder.encode_queries([QUERY], instruction)[0]
    return [f"doc{i}.txt" for i in np.argsort(-scores)]


def ranking(index, instruction) -> list[str]:
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)
    return [hit.node.metadata["file_name"] for hit in retriever.retrieve(QUERY, instruction=instruction)]


def test_opposite_instructions_change_the_top_hit_over_simple_directory_reader(tiny_embed_model, tiny_docs, corpus):
    documents = read(corpus)
    assert documents[0].get_content(MetadataMode.EMBED).startswith("file_path: ")  # LlamaIndex's default
    # What the issue saw: embedded with the path, the opposite instructions agree on the top hit.
    as_is = VectorStoreIndex.from_documents(documents, embed_model=tiny_embed_model)
    assert ranking(as_is, OPPOSITE[0])[0] == ranking(as_is, OPPOSITE[1])[0]

    index = VectorStoreIndex.from_documents(
        documents, embed_model=tiny_embed_model, transformations=[tiny_embed_model.node_parser()]
    )
    nodes = list(index.docstore.docs.values())
    assert len(nodes) == len(tiny_docs)
    for node in nodes:
        assert node.get_content(MetadataMode.EMBED) == node.text  # the model reads the text
        assert node.metadata["file_path"].endswith(node.metadata["file_name"])  # the metadata stays
        assert "file_path: " in node.get_content(MetadataMode.LLM)  # and the LLM still sees it
    assert documents[0].get_content(MetadataMode.EMBED).startswith("file_path: ")  # documents left as they were

    rankings = {instruction: ranking(index, instruction) for instruction in OPPOSITE}
    for instruction, got in rankings.items():
        assert got == expected_order(tiny_embed_model, tiny_docs, instruction)  # as over the texts alone
    assert rankings[OPPOSITE[0]][0] != rankings[OPPOSITE[1]][0]

    # The README's way with LlamaIndex's own splitter: exclude the file path from the embedded text.
    for document in documents:
        document.excluded_embed_metadata_keys.append("file_path")
    readme_index = VectorStoreIndex.from_documents(documents, embed_model=tiny_embed_model)
    assert {instruction: ranking(readme_index, instruction) for instruction in OPPOSITE} == rankings


def test_the_parser_excludes_only_what_it_is_told(tiny_embed_model, corpus):
    documents = SimpleDirectoryReader(str(corpus), file_metadata=lambda path: {"title": "tent notes"}).load_data()
    parser = tiny_embed_model.node_parser(excluded_embed_metadata_keys=[*FILE_METADATA_KEYS])
    node = parser.get_nodes_from_documents(documents[:1])[0]
    assert node.get_content(MetadataMode.EMBED).startswith("title: tent notes")  # the app's own metadata stays
    assert (
        tiny_embed_model.node_parser(excluded_embed_metadata_keys=["title"])
        .get_nodes_from_documents(documents[:1])[0]
        .get_content(MetadataMode.EMBED)
        == documents[0].text
    )


def test_index_folder_hits_embed_as_the_index_did(index_dir, tiny_embed_model):
    with InstEmbRetriever.from_instemb_index(index_dir, embed_model=tiny_embed_model, similarity_top_k=3) as retriever:
        hits = retriever.retrieve(QUERY, instruction=OPPOSITE[0])
    query_vector = tiny_embed_model.get_query_embedding_for(QUERY, OPPOSITE[0])
    for hit in hits:
        embedded = hit.node.get_content(MetadataMode.EMBED)
        assert embedded == hit.node.text  # the index embedded the chunk text alone
        np.testing.assert_allclose(
            np.dot(tiny_embed_model.get_text_embedding(embedded), query_vector), hit.score, atol=1e-4
        )
        shown = hit.node.get_content(MetadataMode.LLM)
        assert shown.startswith(f"source: {hit.node.metadata['source']}") and "chunk_id" not in shown
