"""Late chunking in production: a collection built from a late-chunking configuration, and the
LangChain and LlamaIndex adapters, give the vectors and the top k the evaluation of that
configuration scored. The model is a tiny sentence-transformers model saved by the test
(tests/fakes.py); its 16-token window makes every document several windows long."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tuner
from tuner.cli import main
from tuner.deploy.production import CollectionError, chunk_id, open_collection
from tuner.embedding import EmbeddingCache
from tuner.embedding.late import LateChunkingEmbedder
from tuner.text.tokens import count_tokens

from fakes import save_sentence_transformer, word_corpus

CORPUS = "garden"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A corpus of three documents of the model's words, six questions on it, the model."""
    root = tmp_path_factory.mktemp("late")
    model = save_sentence_transformer(root / "model", max_seq_length=16)
    folder, questions = word_corpus(root, CORPUS)
    return model, folder, questions


def write_config(root: Path, model: Path, retrieval: dict, late: bool = True, name: str = "best.json") -> Path:
    embedder = {"provider": "sentence-transformers", "model": str(model), "precision": "fp32"}
    if late:
        embedder["late_chunking"] = True
    config = {"chunker": {"name": "token", "params": {"size": 12, "overlap": 3}}, "embedder": embedder,
              "retrieval": retrieval}
    path = root / name
    path.write_text(json.dumps({"chunkwise_export": 1, "config": config}), encoding="utf-8")
    return path


def evaluated(config: Path, folder: Path, questions: Path, cache: EmbeddingCache):
    corpus = tuner.load_corpus(folder)
    evalset = tuner.load_evaluation_set(questions, corpus)
    result = tuner.evaluate(corpus, evalset, tuner.load_config(config).config, cache=cache)
    ids = [chunk_id(CORPUS, c) for c in result.chunks]
    return corpus, evalset, result, [[ids[r] for r in row if r >= 0] for row in result.ranking]


@pytest.mark.parametrize("retrieval", [{"k": 3}, {"k": 3, "method": "hybrid", "rrf_k": 30}], ids=["dense", "hybrid"])
def test_a_late_chunking_collection_serves_the_evaluated_vectors_and_top_k(setup, tmp_path, retrieval):
    model, folder, questions = setup
    config, db = write_config(tmp_path, model, retrieval), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    corpus, evalset, result, expected = evaluated(config, folder, questions, cache)
    assert result.window["truncated_chunks"] == 0.0  # pooled from windows over the whole document
    assert result.embedding["index_tokens"] == sum(count_tokens(d.text) for d in corpus)
    assert main(["chunk", "--config", str(config), str(folder), "--chroma", str(db), "--collection", CORPUS,
                 "--cache", str(tmp_path / "cache.sqlite3"), "-o", str(tmp_path / "chunks.jsonl")]) == 0
    collection = open_collection(config, db, CORPUS, cache=cache)  # as another process would
    for query, want in zip(evalset, expected):
        assert [f"{h['corpus']}/{h['document']}:{h['start_index']}-{h['end_index']}"
                for h in collection.query(query.question)] == want, query.question

    # The vectors, computed again from scratch (another token cache), are those the evaluation and the
    # build read from theirs: a document's token embeddings do not depend on where or with what else it
    # is read. chromadb keeps them to float32 rounding.
    fresh = tuner.load_config(config).config.embedder.build(EmbeddingCache(tmp_path / "fresh" / "c.sqlite3"))
    assert isinstance(fresh, LateChunkingEmbedder)
    want = fresh.embed_chunks(corpus, result.chunks)
    assert fresh.stats.computed == len(corpus)
    cached = tuner.load_config(config).config.embedder.build(cache)
    assert np.array_equal(cached.embed_chunks(corpus, result.chunks), want)
    assert cached.stats.computed == 0
    stored = collection.collection.get(include=["embeddings"])
    by_id = dict(zip(stored["ids"], stored["embeddings"]))
    got = np.array([by_id[chunk_id(CORPUS, c)] for c in result.chunks])
    assert np.allclose(got, want, rtol=0, atol=1e-7)
    # Not the vectors of the chunks' texts alone.
    plain = fresh.base.embed([c.text for c in result.chunks])
    assert np.mean(np.sum(plain * want, axis=1)) < 0.99


def test_a_collection_opens_only_with_the_late_chunking_it_was_built_with(setup, tmp_path):
    model, folder, _ = setup
    late, db = write_config(tmp_path, model, {"k": 3}), tmp_path / "db"
    cache = str(tmp_path / "cache.sqlite3")
    assert main(["chunk", "--config", str(late), str(folder), "--chroma", str(db), "--collection", CORPUS,
                 "--cache", cache, "-o", str(tmp_path / "chunks.jsonl")]) == 0
    plain = write_config(tmp_path, model, {"k": 3}, late=False, name="plain.json")
    with pytest.raises(CollectionError, match=r"was built with the embedder sentence-transformers:.* with late "
                                              r"chunking, but this configuration uses sentence-transformers:"):
        open_collection(plain, db, CORPUS)


def test_the_adapters_give_the_evaluated_late_chunked_vectors(setup, tmp_path):
    pytest.importorskip("langchain_text_splitters")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document as LangChainDocument
    from llama_index.core import Document as LlamaDocument
    from llama_index.core import VectorStoreIndex

    model, folder, questions = setup
    config = write_config(tmp_path, model, {"k": 3})
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    corpus, evalset, result, expected = evaluated(config, folder, questions, cache)
    late = tuner.load_config(config).config.embedder.build(cache)
    vectors = {(c.document, c.start_index, c.end_index): v
               for c, v in zip(result.chunks, late.embed_chunks(corpus, result.chunks))}
    pipeline = tuner.load_chunker(config)

    splitter = pipeline.as_langchain(cache=cache)
    chunks = splitter.split_documents([LangChainDocument(page_content=d.text, metadata={"source": d.id})
                                       for d in corpus])
    assert len(chunks) == len(result.chunks)
    embeddings = splitter.embeddings()
    got = embeddings.embed_documents([c.page_content for c in chunks])
    for chunk, vector in zip(chunks, got):
        meta = chunk.metadata
        assert np.allclose(vector, vectors[(meta["source"], meta["start_index"], meta["end_index"])], atol=1e-7)
    question = next(iter(evalset)).question
    assert np.allclose(embeddings.embed_query(question), late.embed([question])[0], atol=1e-7)
    with pytest.raises(ValueError, match="late chunking: text='river boat' is invalid; allowed: a text this"):
        embeddings.embed_documents(["river boat"])

    parser = pipeline.as_llamaindex(cache=cache)
    nodes = parser.get_nodes_from_documents([LlamaDocument(text=d.text, metadata={"file_path": d.id})
                                             for d in corpus])
    assert len(nodes) == len(result.chunks)
    for node in nodes:
        key = (node.metadata.get("file_path") or node.ref_doc_id, node.start_char_idx, node.end_char_idx)
        assert np.allclose(node.embedding, vectors[key], atol=1e-7)
    index = VectorStoreIndex(nodes, embed_model=parser.query_embedding())
    retriever = index.as_retriever(similarity_top_k=3)
    for query, want in zip(evalset, expected):
        found = retriever.retrieve(query.question)
        assert [f"{CORPUS}/{hit.node.metadata['file_path']}:{hit.node.start_char_idx}-{hit.node.end_char_idx}"
                for hit in found] == want, query.question
