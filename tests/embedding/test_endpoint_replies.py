"""Bad replies from an OpenAI-compatible embedding endpoint, and caches they must not poison.

The stub (``tests/openai_stub.py``) answers status 200 with a truncated body, an HTML page,
vectors of mixed lengths, NaN vectors, one vector too few, or a JSON list; each must be retried
like a server error and, when it persists, end in one line naming the endpoint (its password
hidden) and what was wrong. No NaN may enter a cache, and one already there reads as missing.
"""

from __future__ import annotations

import sqlite3

import httpx2
import numpy as np
import pytest

from tuner.embedding import EmbeddingCache, OpenAIEmbedder
from tuner.embedding.cache import text_key
from tuner.embedding.shared_cache import SharedEmbeddingCache
from tuner.errors import EmbeddingError
from tuner.llm import endpoint
from tuner.llm.endpoint import cap_retry_after, read_timeout

from openai_stub import deterministic_embedding

#: What each bad reply must be reported as (for two texts of 8-value vectors).
WHAT_WAS_WRONG = {
    "truncated": "the reply is not JSON (content type 'application/json'",
    "html": "the reply is not JSON (content type 'text/html', 55 bytes starting '<html><body>",
    "mixed": "vectors of different lengths (7, 8 values)",
    "nan": "non-finite values (NaN or infinity) in 2 of 2 vectors",
    "count": "1 vectors for 2 texts",
    "not-object": "the reply is not a JSON object with a 'data' list of vectors",
}


def expected(text: str) -> np.ndarray:
    vector = np.asarray(deterministic_embedding(text, 8), dtype=np.float64)
    return vector / np.linalg.norm(vector)


@pytest.mark.parametrize("kind", sorted(WHAT_WAS_WRONG))
def test_a_bad_reply_is_retried_like_a_server_error(openai_server, kind):
    openai_server.script("/v1/embeddings", [kind, 200])
    model = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", max_retries=1)
    vectors = model.embed(["alpha", "beta"])
    assert np.allclose(vectors, [expected("alpha"), expected("beta")], atol=1e-6)
    assert len(openai_server.requests_to("/v1/embeddings")) == 2


@pytest.mark.parametrize("kind", sorted(WHAT_WAS_WRONG))
def test_a_bad_reply_that_persists_is_one_clear_error(openai_server, kind, tmp_path):
    openai_server.script("/v1/embeddings", [kind, kind])
    url = openai_server.base_url.replace("http://", "http://user:hunter22@")
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    model = OpenAIEmbedder("m", base_url=url, api_key="k", max_retries=1, cache=cache)
    with pytest.raises(EmbeddingError) as raised:
        model.embed(["alpha", "beta"])
    message = str(raised.value)
    where = openai_server.base_url  # the user and password are taken out of the URL (and sent apart)
    assert message.startswith(f"the embedding endpoint {where} (model 'm') gave no usable reply in 2 attempts: ")
    assert WHAT_WAS_WRONG[kind] in message
    assert "hunter22" not in message and "\n" not in message
    assert len(openai_server.requests_to("/v1/embeddings")) == 2
    assert cache.count() == 0


def test_no_cache_stores_a_non_finite_vector(tmp_path):
    vectors = np.array([[1.0, 0.0], [np.nan, 1.0], [np.inf, 0.0]], dtype=np.float32)
    keys = [text_key(t) for t in ("ok", "nan", "inf")]
    local = EmbeddingCache(tmp_path / "c.sqlite3")
    shared = SharedEmbeddingCache(f"sqlite:///{tmp_path}/shared.db")
    for cache in (local, shared):
        cache.put_many("m", keys, vectors)
        assert cache.count("m") == 1
        assert list(cache.get_many("m", keys)) == [keys[0]]


def _poison(path, model: str, texts: list[str], table: str = "embeddings") -> None:
    """Write NaN vectors as an older version did, behind the cache's back."""
    with sqlite3.connect(path) as db:
        for text in texts:
            db.execute(f"INSERT INTO {table} (model, key, vector) VALUES (?, ?, ?)",
                       (model, text_key(text), np.full(8, np.nan, dtype=np.float32).tobytes()))


def test_a_poisoned_local_cache_reads_as_missing_and_heals(openai_server, tmp_path):
    path = tmp_path / "c.sqlite3"
    cache = EmbeddingCache(path)
    model = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", cache=cache)
    assert cache.count() == 0  # creates the table
    _poison(path, model.identity, ["alpha", "beta"])
    vectors = model.embed(["alpha", "beta"])
    assert np.allclose(vectors, [expected("alpha"), expected("beta")], atol=1e-6)
    assert len(openai_server.requests_to("/v1/embeddings")) == 1  # sent again, not served as NaN
    again = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", cache=EmbeddingCache(path))
    assert np.allclose(again.embed(["alpha", "beta"]), vectors)
    assert len(openai_server.requests_to("/v1/embeddings")) == 1  # the healed cache serves them


def test_a_poisoned_shared_cache_reads_as_missing_and_heals(openai_server, tmp_path):
    cache = SharedEmbeddingCache(f"sqlite:///{tmp_path}/shared.db")
    model = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", cache=cache)
    assert cache.count() == 0  # creates the table
    _poison(tmp_path / "shared.db", model.identity, ["alpha"], table="chunkwise_embeddings")
    assert np.allclose(model.embed(["alpha"]), [expected("alpha")], atol=1e-6)
    assert len(openai_server.requests_to("/v1/embeddings")) == 1
    assert cache.count(model.identity) == 1 and cache.get_many(model.identity, [text_key("alpha")])


def test_the_read_timeout_grows_with_the_batch_up_to_its_cap():
    # 10 s, plus 1 s per 1,000 tokens sent, at most the cap (120 s by default).
    assert read_timeout(0) == 10
    assert read_timeout(450) == 10.45
    assert read_timeout(50_000) == 60
    assert read_timeout(200_000) == 120
    assert read_timeout(50_000, cap=30) == 30


def test_a_hung_endpoint_is_given_up_on_after_the_batch_timeout(openai_server):
    openai_server.hang_s = 20
    openai_server.script("/v1/embeddings", ["hang", "hang"])
    model = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", max_retries=1, timeout_s=0.5)
    with pytest.raises(EmbeddingError) as raised:
        model.embed(["alpha"])
    assert str(raised.value) == (f"the embedding endpoint {openai_server.base_url} did not answer within 0.5 s "
                                 "(2 HTTP tries); check that the server is up and not overloaded")
    assert raised.value.fatal


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
def test_a_long_retry_after_is_capped(openai_server, monkeypatch, header):
    # The client alone refuses to retry beyond 120 s and would wait up to 120 s below it; the
    # documented cap is 60 s (shortened here so the test does not wait a minute).
    monkeypatch.setattr(endpoint, "MAX_RETRY_AFTER_S", 0.05)
    openai_server.retry_after_ms = None
    if header == "retry-after":
        openai_server.retry_after = "3600"
    else:
        openai_server.retry_after_ms = 3_600_000
    openai_server.script("/v1/embeddings", [429, 200])
    model = OpenAIEmbedder("m", base_url=openai_server.base_url, api_key="k", max_retries=1)
    assert np.allclose(model.embed(["alpha"]), [expected("alpha")], atol=1e-6)
    assert len(openai_server.requests_to("/v1/embeddings")) == 2


@pytest.mark.parametrize(("headers", "after"), [
    ({"retry-after": "120"}, {"retry-after": "60"}),
    ({"retry-after": "30"}, {"retry-after": "30"}),
    ({"retry-after-ms": "90000", "retry-after": "90"}, {"retry-after": "60"}),
    ({"retry-after-ms": "500"}, {"retry-after-ms": "500"}),
    ({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"}, {"retry-after": "60"}),
    ({"retry-after": "soon"}, {"retry-after": "soon"}),
])
def test_retry_after_headers_beyond_60_s_are_rewritten_to_60(headers, after):
    response = httpx2.Response(429, headers=headers)
    cap_retry_after(response)
    assert {k: v for k, v in response.headers.items() if k.startswith("retry-after")} == after
