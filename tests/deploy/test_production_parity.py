"""Production parity: a collection built from a configuration returns, for every question, the
top k the evaluation of that configuration ranked, for every retrieval method and context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tuner
from tuner.cli import main
from tuner.deploy.production import BM25_FOLDER, CollectionError, build_collection, chunk_id, open_collection
from tuner.embedding import EmbeddingCache

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
CHUNKER = {"name": "token", "params": {"size": 24, "overlap": 0}}  # ~380 chunks: a hybrid reads 100 of each

METHODS = {
    "dense": {"k": 5},
    "bm25": {"k": 5, "method": "bm25"},
    "hybrid-rrf": {"k": 5, "method": "hybrid", "rrf_k": 30, "context": "title"},
    "hybrid-weighted-headings": {"k": 5, "method": "hybrid", "fusion": "weighted", "alpha": 0.3, "context": "headings"},
}


@pytest.fixture
def stub(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    openai_server.embedding_dim = 64
    return openai_server


def write_config(tmp_path: Path, base_url: str, retrieval: dict, name: str = "best.json") -> Path:
    path = tmp_path / name
    config = {"chunker": CHUNKER, "embedder": {"provider": "openai", "model": "stub-embed", "base_url": base_url},
              "retrieval": retrieval}
    path.write_text(json.dumps({"chunkwise_export": 1, "config": config}), encoding="utf-8")
    return path


def evaluated_top_k(config: Path, cache: EmbeddingCache) -> tuple[list[str], list[list[str]]]:
    """Each question and the ids of the chunks the evaluation retrieved for it, best first."""
    corpus = tuner.load_corpus(EXAMPLE)
    evalset = tuner.load_evaluation_set(QUERIES, corpus)
    result = tuner.evaluate(corpus, evalset, tuner.load_config(config).config, cache=cache)
    ids = [chunk_id("handbook", c) for c in result.chunks]
    return [q.question for q in evalset], [[ids[r] for r in row if r >= 0] for row in result.ranking]


def hit_ids(hits: list[dict]) -> list[str]:
    return [f"{h['corpus']}/{h['document']}:{h['start_index']}-{h['end_index']}" for h in hits]


@pytest.mark.parametrize("method", METHODS)
def test_the_production_query_returns_the_evaluated_top_k(stub, tmp_path, method):
    check_parity(stub, tmp_path, METHODS[method])


@pytest.mark.parametrize("retrieval", [{"k": 3}, {"k": 3, "method": "hybrid", "context": "title"}],
                         ids=["dense", "hybrid-title"])
def test_a_reranked_production_query_returns_the_evaluated_top_k(stub, tmp_path, retrieval):
    from fakes import save_cross_encoder

    model = save_cross_encoder(tmp_path / "reranker")
    check_parity(stub, tmp_path, {**retrieval, "rerank": {"model": str(model), "candidates": 12}})


def check_parity(stub, tmp_path: Path, retrieval: dict) -> None:
    config, db = write_config(tmp_path, stub.base_url, retrieval), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    questions, expected = evaluated_top_k(config, cache)
    assert main(["chunk", "--config", str(config), str(EXAMPLE), "--chroma", str(db), "--collection", "handbook",
                 "--cache", str(tmp_path / "cache.sqlite3"), "-o", str(tmp_path / "chunks.jsonl")]) == 0
    collection = open_collection(config, db, "handbook", cache=cache)  # as another process would
    corpus = tuner.load_corpus(EXAMPLE)
    for question, want in zip(questions, expected):
        hits = collection.query(question)
        assert hit_ids(hits) == want, question
        for hit in hits:  # the chunk's exact text, never the header
            assert corpus.document(hit["document"]).text[hit["start_index"]:hit["end_index"]] == hit["text"]
    if retrieval.get("context", "none") != "none":
        assert all(hit["context"] for hit in collection.query(questions[0]))


def test_a_bm25_collection_embeds_nothing_and_refuses_a_dense_query(stub, tmp_path):
    config, db = write_config(tmp_path, stub.base_url, METHODS["bm25"]), tmp_path / "db"
    collection = build_collection(config, [EXAMPLE], db, "handbook", cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    assert not [r for r in stub.requests if r.path.endswith("/embeddings")]
    hits = collection.query("Which port does the container listen on?")
    assert hits and "distance" not in hits[0] and hits[0]["score"] > 0
    with pytest.raises(CollectionError, match="was built for bm25 retrieval and holds no vectors"):
        open_collection(write_config(tmp_path, stub.base_url, {"k": 5}, "dense.json"), db, "handbook")


def test_a_hybrid_collection_serves_dense_but_not_another_context(stub, tmp_path):
    config, db = write_config(tmp_path, stub.base_url, METHODS["hybrid-rrf"]), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    build_collection(config, [EXAMPLE], db, "handbook", cache=cache)
    dense = write_config(tmp_path, stub.base_url, {"k": 3, "context": "title"}, "dense.json")
    questions, expected = evaluated_top_k(dense, cache)
    collection = open_collection(dense, db, "handbook", cache=cache)
    assert [hit_ids(collection.query(q)) for q in questions[:10]] == expected[:10]
    other = write_config(tmp_path, stub.base_url, {"k": 5, "method": "hybrid"}, "none.json")
    with pytest.raises(CollectionError, match="was indexed with context 'title', but this configuration uses "
                                              "context 'none'"):
        open_collection(other, db, "handbook")


def test_a_dense_collection_has_no_bm25_index_and_a_lost_one_is_reported(stub, tmp_path):
    dense, db = write_config(tmp_path, stub.base_url, {"k": 5}), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    build_collection(dense, [EXAMPLE], db, "plain", cache=cache)
    assert not (db / BM25_FOLDER).exists()
    hybrid = write_config(tmp_path, stub.base_url, {"k": 5, "method": "hybrid"}, "hybrid.json")
    with pytest.raises(CollectionError, match="the BM25 index of collection 'plain' is missing"):
        open_collection(hybrid, db, "plain")
    assert main(["chunk", "--config", str(hybrid), str(EXAMPLE), "--chroma", str(db), "--collection", "mixed",
                 "--cache", str(tmp_path / "c.sqlite3"), "-o", str(tmp_path / "c.jsonl")]) == 0
    (folder,) = (db / BM25_FOLDER).iterdir()
    for item in folder.iterdir():
        item.unlink()
    folder.rmdir()
    assert main(["chunk", "--config", str(hybrid), str(EXAMPLE), "--chroma", str(db), "--collection", "mixed",
                 "--cache", str(tmp_path / "c.sqlite3")]) == 2  # exists
    with pytest.raises(CollectionError, match="the BM25 index of collection 'mixed' is missing"):
        open_collection(hybrid, db, "mixed")


def test_replacing_a_collection_replaces_its_bm25_index(stub, tmp_path):
    config, db = write_config(tmp_path, stub.base_url, METHODS["bm25"]), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    build_collection(config, [EXAMPLE], db, "handbook", cache=cache)
    (first,) = (db / BM25_FOLDER).iterdir()
    build_collection(config, [EXAMPLE], db, "handbook", cache=cache, replace=True)
    (second,) = (db / BM25_FOLDER).iterdir()  # the replaced collection's index is gone
    assert first != second
    assert open_collection(config, db, "handbook").query("container port")


def test_a_failed_build_leaves_no_bm25_index(stub, tmp_path, monkeypatch):
    config, db = write_config(tmp_path, stub.base_url, METHODS["bm25"]), tmp_path / "db"
    from chromadb.api.models.Collection import Collection

    def broken_add(self, **kwargs):
        raise RuntimeError("disk I/O error")

    monkeypatch.setattr(Collection, "add", broken_add)
    with pytest.raises(CollectionError, match="disk I/O error"):
        build_collection(config, [EXAMPLE], db, "handbook", cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    assert list((db / BM25_FOLDER).iterdir()) == []


def test_a_tuned_retrieval_is_recorded_exported_and_served_as_evaluated(stub, tmp_path):
    from tuner.tuning import StudySpec, run_study_spec
    from tuner.tuning.core.records import records
    from tuner.tuning.study.storage import make_storage

    space = tmp_path / "space.yaml"
    space.write_text("k: {type: int, low: 2, high: 6}\n"
                     "chunkers: {token: {size: {type: int, low: 24, high: 96, step: 24}}}\n"
                     "retrieval: {method: [bm25, hybrid], fusion: [rrf, weighted], alpha: [0.3, 0.7],\n"
                     "            context: [none, headings]}\n", encoding="utf-8")
    spec = StudySpec(name="ret", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES), space=str(space),
                     embedder=tuner.EmbedderConfig("openai", "stub-embed", base_url=stub.base_url),
                     storage=f"sqlite:///{tmp_path}/ret.db", trials=6, cache=str(tmp_path / "cache.sqlite3"))
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    import optuna

    study = optuna.load_study(study_name="ret/handbook", storage=make_storage(spec.storage, heartbeat_interval=None))
    done = [r for r in records(study) if r.evaluated]
    assert len(done) == 6
    for record in done:  # the trial's retrieval is in its configuration, attributes and description
        retrieval = tuner.RetrievalConfig.from_dict(record.config["retrieval"])
        assert retrieval.method in ("bm25", "hybrid") and record.attrs["retrieval"] == retrieval.describe()
        assert retrieval.describe() in record.describe()
        if retrieval.method == "bm25":
            assert record.metrics["tokens_embedded"] == 0
    assert study.user_attrs["settings"]["space"]["retrieval"]["method"]["choices"] == ["bm25", "hybrid"]

    out, db = tmp_path / "best.json", tmp_path / "db"
    assert main(["export", "--storage", spec.storage, "--study", "ret", "--trial", str(outcome.best.number),
                 "-o", str(out)]) == 0
    assert json.loads(out.read_text())["config"]["retrieval"] == outcome.best.config["retrieval"]
    cache = EmbeddingCache(spec.cache)
    questions, expected = evaluated_top_k(out, cache)
    assert main(["chunk", "--config", str(out), str(EXAMPLE), "--chroma", str(db), "--collection", "handbook",
                 "--cache", spec.cache]) == 0
    collection = open_collection(out, db, "handbook", cache=cache)
    assert [hit_ids(collection.query(q)) for q in questions] == expected


def test_a_collection_built_before_retrieval_methods_still_queries_as_dense(stub, tmp_path):
    """A collection written by an earlier chunkwise (no method in its stored configuration, no
    row in its chunks' metadata) opens with the same configuration and ranks as evaluation does."""
    import chromadb

    config = write_config(tmp_path, stub.base_url, {"k": 4})
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    exported = tuner.load_config(config)
    chunks = [(corpus.name, c) for corpus in [tuner.load_corpus(EXAMPLE)] for d in corpus
              for c in exported.chunker().split(d)]
    vectors = exported.config.embedder.build(cache).embed([c.text for _, c in chunks])
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    old = client.create_collection("handbook", configuration={"hnsw": {"space": "cosine", "ef_search": 400}},
                                   embedding_function=None,
                                   metadata={"chunkwise_config": json.dumps(exported.config.to_dict())})
    old.add(ids=[chunk_id(name, c) for name, c in chunks], embeddings=vectors, documents=[c.text for _, c in chunks],
            metadatas=[{"corpus": name, "document": c.document, "start_index": c.start_index,
                        "end_index": c.end_index, "token_count": c.token_count} for name, c in chunks])
    questions, expected = evaluated_top_k(config, cache)
    collection = open_collection(config, tmp_path / "db", "handbook", cache=cache)
    assert [hit_ids(collection.query(q)) for q in questions] == expected
    assert "distance" in collection.query(questions[0])[0]


def test_llm_contexts_are_embedded_in_production_as_in_evaluation(stub, tmp_path, monkeypatch):
    """``context: llm``: the collection embeds and BM25-indexes, chunk for chunk, the texts the
    evaluation did (the same contexts, from the LLM reply cache: production asks nothing), and
    its queries return the evaluated top k."""
    from tuner.retrieval.context import with_header

    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)  # every LLM feature's endpoint
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "stub-llm")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "llm-cache"))

    def situating(body):
        prompt = body["messages"][-1]["content"]
        title = prompt.split("\n")[1].lstrip("# ")
        words = prompt.split("<chunk>\n", 1)[1].split()
        return f"From the handbook page {title}, about {words[0] if words else 'nothing'}."

    stub.chat_handler = situating
    config, db = write_config(tmp_path, stub.base_url, {"k": 5, "method": "hybrid", "context": "llm"}), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    corpus = tuner.load_corpus(EXAMPLE)
    evalset = tuner.load_evaluation_set(QUERIES, corpus)
    result = tuner.evaluate(corpus, evalset, tuner.load_config(config).config, cache=cache)
    asked = len(stub.requests_to("/v1/chat/completions"))
    assert asked == len({(c.document, c.text) for c in result.chunks})
    evaluated = {chunk_id("handbook", c): text for c, text in zip(result.chunks, result.indexed_texts)}
    assert all(text.startswith("From the handbook page ") for text in evaluated.values())
    embedded = len(stub.requests_to("/v1/embeddings"))

    assert main(["chunk", "--config", str(config), str(EXAMPLE), "--chroma", str(db), "--collection", "handbook",
                 "--cache", str(tmp_path / "cache.sqlite3")]) == 0
    assert len(stub.requests_to("/v1/chat/completions")) == asked  # every context from the cache
    assert len(stub.requests_to("/v1/embeddings")) == embedded  # every text embedded is one the evaluation embedded
    collection = open_collection(config, db, "handbook", cache=cache)
    stored = collection.collection.get(include=["documents", "metadatas"])
    built = {i: with_header(meta.get("context", ""), text)
             for i, text, meta in zip(stored["ids"], stored["documents"], stored["metadatas"])}
    assert built == evaluated
    for question, row in zip([q.question for q in evalset], result.ranking):
        assert hit_ids(collection.query(question)) == [chunk_id("handbook", result.chunks[r]) for r in row if r >= 0]
