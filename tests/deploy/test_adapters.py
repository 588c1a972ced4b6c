"""LangChain and LlamaIndex adapters, with the real libraries (the ``langchain`` and
``llamaindex`` extras, both in ``test``): a tuned configuration drops into either pipeline in
one line, with exact offsets, heading paths and the configuration's context header."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import tuner
from tuner.retrieval.context import Outline, context_header

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "examples" / "handbook" / "configuration.md"
TEXT = CONFIGURATION.read_text(encoding="utf-8")
#: "yy" (offset 10) also occurs inside the chunk before it: searching for the text finds offset 3.
REPEATS = "zz yy yy\n\nyy"


def export(tmp_path: Path, context: str = "headings", chunker: dict | None = None) -> Path:
    path = tmp_path / "best.json"
    config = {"chunker": chunker or {"name": "recursive", "params": {"size": 120, "overlap": 0}},
              "retrieval": {"k": 4, "context": context}}
    path.write_text(json.dumps({"chunkwise_export": 1, "config": config}), encoding="utf-8")
    return path


def expected(context: str = "headings"):
    """The chunks chunkwise cuts from the configuration page, and their headings and headers."""
    document = tuner.Document("configuration.md", TEXT)
    outline = Outline(document)
    chunks = tuner.make_chunker("recursive", size=120, overlap=0).split(document)
    return [(c, " > ".join(outline.path_at(c.start_index)), context_header(c, outline, context)) for c in chunks]


def test_langchain_text_splitter_gives_exact_offsets_headings_and_context(tmp_path):
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document
    from langchain_text_splitters import TextSplitter

    splitter = tuner.load_chunker(export(tmp_path)).as_langchain()
    assert isinstance(splitter, TextSplitter)
    documents = splitter.split_documents([Document(page_content=TEXT, metadata={"source": "configuration.md"})])
    want = expected()
    assert len(documents) == len(want) > 5
    for document, (chunk, headings, header) in zip(documents, want):
        assert document.page_content == chunk.text
        start, end = document.metadata["start_index"], document.metadata["end_index"]
        assert (start, end) == (chunk.start_index, chunk.end_index) and TEXT[start:end] == document.page_content
        assert document.metadata["headings"] == headings and document.metadata["context"] == header
        assert document.metadata["source"] == "configuration.md"
    retention = next(d for d in documents if "log_keep_days" in d.page_content)
    assert retention.metadata["headings"] == "Configuration File Reference > Run history retention"
    assert splitter.split_text(TEXT) == [c.text for c, _, _ in want]
    # As the configuration indexed them: the header in front of the content.
    prepended = tuner.load_chunker(export(tmp_path)).as_langchain(prepend_context=True).split_documents(
        [Document(page_content=TEXT, metadata={"source": "configuration.md"})])
    assert [d.page_content for d in prepended] == [f"{h}\n\n{c.text}" for c, _, h in want]
    # Offsets are the chunker's, even where the text repeats (LangChain's own finds them by search).
    (_, second) = tuner.load_chunker(export(tmp_path, "none", {"name": "recursive", "params": {"size": 3}})
                                     ).as_langchain().create_documents([REPEATS])
    assert (second.page_content, second.metadata["start_index"], second.metadata["end_index"]) == ("yy", 10, 12)
    assert "context" not in second.metadata


def test_llamaindex_node_parser_gives_exact_offsets_headings_and_embeds_the_header(tmp_path):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.schema import MetadataMode, NodeRelationship

    parser = tuner.load_chunker(export(tmp_path)).as_llamaindex()
    assert isinstance(parser, NodeParser)
    source = Document(text=TEXT, metadata={"file_name": "configuration.md", "author": "docs team"})
    nodes = IngestionPipeline(transformations=[parser]).run(documents=[source])  # the one-line drop-in
    want = expected()
    assert len(nodes) == len(want)
    for node, (chunk, headings, header) in zip(nodes, want):
        assert node.text == chunk.text
        assert (node.start_char_idx, node.end_char_idx) == (chunk.start_index, chunk.end_index)
        assert node.metadata["headings"] == headings and node.metadata["context"] == header
        assert node.metadata["author"] == "docs team"  # the document's metadata is kept
        # What the pipeline's embedder reads: what chunkwise embedded (LlamaIndex strips the ends).
        assert node.get_content(metadata_mode=MetadataMode.EMBED) == f"{header}\n\n{chunk.text}".strip()
        assert node.relationships[NodeRelationship.SOURCE].node_id == source.node_id
    (_, second) = tuner.load_chunker(export(tmp_path, "none", {"name": "recursive", "params": {"size": 3}})
                                     ).as_llamaindex().get_nodes_from_documents([Document(text=REPEATS)])
    assert (second.text, second.start_char_idx, second.end_char_idx) == ("yy", 10, 12)
    assert second.get_content(metadata_mode=MetadataMode.EMBED) == "yy"  # no context: the text alone


def test_adapters_take_an_explicit_context_and_refuse_a_bad_one(tmp_path):
    pytest.importorskip("langchain_text_splitters")
    chunker = tuner.make_chunker("recursive", size=120)
    documents = tuner.TunedPipeline(chunker).as_langchain(context="title", source_key="path").create_documents(
        [TEXT], [{"path": "configuration.md"}])
    assert {d.metadata["context"] for d in documents} == {"Configuration File Reference"}
    with pytest.raises(tuner.ChunkwiseError, match="context='chapter' is invalid; allowed: none, title, headings"):
        tuner.TunedPipeline(chunker).as_langchain(context="chapter")


def test_a_missing_extra_is_one_clear_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "tuner.deploy.integrations.langchain", raising=False)
    monkeypatch.setitem(sys.modules, "langchain_text_splitters", None)
    with pytest.raises(tuner.ChunkwiseError, match=r"pip install 'chunkwise\[langchain\]'"):
        tuner.TunedPipeline(tuner.make_chunker("token", size=50)).as_langchain()


def test_adapters_embed_the_llm_contexts_the_evaluation_wrote(tmp_path, openai_server, monkeypatch):
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.schema import MetadataMode

    from tuner.retrieval.context import contextualize

    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)  # every LLM feature's endpoint
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "stub-llm")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    openai_server.chat_handler = lambda body: "About " + body["messages"][-1]["content"].split("<chunk>\n")[1][:20]
    document = tuner.Document("configuration.md", TEXT)
    chunks = tuner.make_chunker("recursive", size=120, overlap=0).split(document)
    evaluated = contextualize(chunks, [document], "llm")  # what the evaluation embeds
    asked = len(openai_server.requests_to("/v1/chat/completions"))
    assert asked == len({c.text for c in chunks}) and all(t.startswith("About ") for t in evaluated)
    pipeline = tuner.load_chunker(export(tmp_path, "llm"))
    documents = pipeline.as_langchain(prepend_context=True).split_documents(
        [Document(page_content=TEXT, metadata={"source": "configuration.md"})])
    assert [d.page_content for d in documents] == evaluated
    assert [(d.metadata["start_index"], d.metadata["end_index"]) for d in documents] == [
        (c.start_index, c.end_index) for c in chunks]
    nodes = pipeline.as_llamaindex().get_nodes_from_documents([LlamaDocument(text=TEXT)])
    assert [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes] == [t.strip() for t in evaluated]
    assert [n.text for n in nodes] == [c.text for c in chunks]
    assert len(openai_server.requests_to("/v1/chat/completions")) == asked  # from the reply cache
