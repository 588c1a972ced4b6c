"""Embedders and the persistent cache."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from tuner.embedding import EmbeddingCache, OpenAIEmbedder, SentenceTransformerEmbedder
from tuner.embedding.base import Embedder
from tuner.embedding.cache import text_key
from tuner.errors import EmbeddingError


class CountingEmbedder(Embedder):
    """Deterministic 4-d vectors; records every text the model is asked to embed."""

    identity = "counting:v1"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen: list[str] = []

    def _embed(self, texts):
        self.seen.extend(texts)
        return np.array([[len(t), t.count("a"), 1.0, 2.0] for t in texts], dtype=np.float32)


def test_vectors_are_normalised_and_duplicates_embedded_once(tmp_path):
    model = CountingEmbedder(cache=EmbeddingCache(tmp_path / "c.sqlite3"), batch_size=2)
    vectors = model.embed(["aa", "b", "aa", "ccc"])
    assert vectors.dtype == np.float32 and vectors.shape == (4, 4)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors[0], vectors[2])
    assert model.seen == ["aa", "b", "ccc"]
    assert (model.stats.texts, model.stats.computed) == (4, 3)


def test_cache_serves_a_second_embedder_and_separates_models(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    first = CountingEmbedder(cache=cache)
    expected = first.embed(["alpha", "beta"])
    second = CountingEmbedder(cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    assert np.array_equal(second.embed(["beta", "alpha"]), expected[::-1])
    assert second.seen == [] and second.stats.hit_rate == 1.0

    class OtherModel(CountingEmbedder):
        identity = "counting:v2"

    other = OtherModel(cache=cache)
    other.embed(["alpha"])
    assert other.seen == ["alpha"]
    assert cache.count() == 3


def test_progress_reports_every_requested_text(tmp_path):
    model = CountingEmbedder(cache=EmbeddingCache(tmp_path / "c.sqlite3"), batch_size=2)
    model.embed(["x"])
    done: list[int] = []
    model.embed(["x", "y", "z", "y", "w"], progress=done.append)
    assert done == [1, 3, 1]  # the cached "x", then batches {y, z} (y twice) and {w}


def _write_many(path, worker, queue):
    try:
        cache = EmbeddingCache(path)
        rng = np.random.default_rng(worker)
        for round_ in range(20):
            # Overlapping keys: every worker writes keys 0..59 plus its own.
            keys = [text_key(f"shared-{(round_ * 3 + i) % 60}") for i in range(10)]
            keys += [text_key(f"own-{worker}-{round_}-{i}") for i in range(10)]
            cache.put_many("m", keys, rng.normal(size=(len(keys), 8)).astype(np.float32))
            cache.get_many("m", keys)
        queue.put(None)
    except Exception as exc:  # report to the parent instead of dying silently
        queue.put(repr(exc))


def test_concurrent_writers_from_several_processes(tmp_path):
    path = tmp_path / "shared.sqlite3"
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_write_many, args=(path, w, queue)) for w in range(4)]
    for p in workers:
        p.start()
    errors = [queue.get(timeout=120) for _ in workers]
    for p in workers:
        p.join(timeout=60)
    assert errors == [None] * 4
    assert EmbeddingCache(path).count("m") == 60 + 4 * 20 * 10


def test_openai_embedder_through_the_openai_client(openai_server, tmp_path):
    model = OpenAIEmbedder("embed-small", base_url=openai_server.base_url, api_key="k",
                           batch_size=2, cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    vectors = model.embed(["one", "two", "three", "one"])
    assert vectors.shape == (4, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    calls = openai_server.requests_to("/v1/embeddings")
    assert [c.json_body["input"] for c in calls] == [["one", "two"], ["three"]]
    assert calls[0].headers["authorization"] == "Bearer k"
    assert model.identity == f"openai:{openai_server.base_url}:embed-small"
    model.embed(["two"])
    assert len(openai_server.requests_to("/v1/embeddings")) == 2  # served by the cache


def test_openai_embedder_retries_rate_limits(openai_server):
    openai_server.script("/v1/embeddings", [429, 500, 200])
    model = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", max_retries=3)
    assert model.embed(["hello"]).shape == (1, 8)
    assert len(openai_server.requests_to("/v1/embeddings")) == 3


def test_openai_embedder_errors_are_clear(openai_server, monkeypatch):
    openai_server.api_key = "right"
    with pytest.raises(EmbeddingError, match="refused the API key"):
        OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="wrong").embed(["x"])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="set OPENAI_API_KEY"):
        OpenAIEmbedder("m", base_url=openai_server.base_url).embed(["x"])
    closed = openai_server.base_url
    openai_server.stop()
    with pytest.raises(EmbeddingError, match="cannot reach the embedding endpoint"):
        OpenAIEmbedder("m", base_url=closed, api_key="k", max_retries=0).embed(["x"])


@pytest.mark.slow
def test_bundled_minilm_embeds_offline(tmp_path):
    model = SentenceTransformerEmbedder(cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    assert model.identity.startswith("sentence-transformers:all-MiniLM-L6-v2:")
    cat, kitten, stocks = model.embed(["The cat sat on the mat.", "A kitten is sitting on a rug.",
                                       "Stock markets fell sharply on Monday."])
    assert cat.shape == (384,)
    assert float(cat @ kitten) > float(cat @ stocks) + 0.2


def test_unknown_sentence_transformers_model_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingError, match="not found"):
        SentenceTransformerEmbedder(str(tmp_path / "no-model"))
