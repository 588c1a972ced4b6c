"""Hosted embedding APIs: requests filled to the endpoint's limits, several in flight, rate limits
obeyed, and the usage the API reports counted. Everything runs against the tests' local
OpenAI-compatible server through the real ``openai`` client."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from openai_stub import deterministic_embedding
from tuner.embedding import EmbeddingCache
from tuner.embedding.config import EmbedderConfig
from tuner.embedding.openai import OpenAIEmbedder
from tuner.errors import InvalidParameterError
from tuner.evaluation.evaluator import embedder_window


def words(n: int) -> str:
    """``n`` cl100k tokens: "a", then " a" n - 1 times (one token each)."""
    return " ".join(["a"] * n)


def expected(text: str, dim: int = 8) -> np.ndarray:
    """The stub's vector for ``text``, normalised as the embedder returns it."""
    vector = np.asarray(deterministic_embedding(text, dim), dtype=np.float64)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def embedder(server, **options) -> OpenAIEmbedder:
    return OpenAIEmbedder("embed-small", base_url=server.base_url, api_key="k", **options)


def sent_inputs(server) -> list[list[str]]:
    return [call.json_body["input"] for call in server.requests_to("/v1/embeddings")]


# --- token-aware batching ---------------------------------------------------------------------

def test_requests_are_filled_up_to_the_input_and_token_limits_longest_first(openai_server):
    texts = [words(n) for n in (1, 4, 6, 2, 5, 3)]
    model = embedder(openai_server, concurrency=1, max_batch_inputs=3, max_batch_tokens=10)
    vectors = model.embed(texts)
    # Longest first: 6 alone (6 + 5 > 10), then 5 + 4 = 9 (+ 3 > 10), then 3, 2, 1 (three inputs).
    assert sent_inputs(openai_server) == [[words(6)], [words(5), words(4)], [words(3), words(2), words(1)]]
    assert np.allclose(vectors, np.stack([expected(t) for t in texts]), atol=1e-6)


def test_openai_models_default_to_openais_limits(openai_server):
    model = OpenAIEmbedder("text-embedding-3-small", base_url=openai_server.base_url, api_key="k", concurrency=1)
    assert (model.max_batch_inputs, model.max_batch_tokens, model.max_input_tokens) == (2048, 300_000, 8191)
    texts = [f"t{i}" for i in range(2049)]
    model.embed(texts)
    assert [len(inputs) for inputs in sent_inputs(openai_server)] == [2048, 1]


def test_a_text_over_the_window_is_sent_truncated_and_reported(openai_server):
    model = embedder(openai_server, max_input_tokens=5, concurrency=1)
    vectors = model.embed([words(8), words(2)])
    assert sent_inputs(openai_server) == [[words(5), words(2)]]
    assert np.allclose(vectors, np.stack([expected(words(5)), expected(words(2))]), atol=1e-6)
    window = embedder_window(model, [words(8), words(2)])
    # One text of two is cut; 3 of its 8 tokens (6 of 15 characters, prorated) are never read.
    assert window["max_input_tokens"] == 5
    assert window["truncated_chunks"] == 0.5
    assert window["unread_text"] == pytest.approx(round(15 * 3 / 8) / (15 + 3))


def test_a_window_of_its_own_is_part_of_the_cache_identity(openai_server):
    assert embedder(openai_server).identity == f"openai:{openai_server.base_url}:embed-small"
    assert embedder(openai_server, max_input_tokens=512).identity.endswith(":embed-small:window512")
    same = OpenAIEmbedder("text-embedding-3-small", base_url=openai_server.base_url, max_input_tokens=8191)
    assert not same.identity.endswith("window8191")  # the model's own window: the same vectors


def test_request_settings_are_validated_and_kept_in_the_configuration():
    config = EmbedderConfig.from_dict({"provider": "openai", "concurrency": 16, "max_batch_tokens": 20000,
                                       "max_input_tokens": 512})
    assert config.to_dict() == {"provider": "openai", "model": "text-embedding-3-small", "concurrency": 16,
                                "max_batch_tokens": 20000, "max_input_tokens": 512}
    assert EmbedderConfig.from_dict(config.to_dict()) == config
    assert "concurrency" not in EmbedderConfig("openai", "m").to_dict()  # defaults are not written
    with pytest.raises(InvalidParameterError, match=r"embedder.concurrency=0 is invalid; allowed"):
        EmbedderConfig("openai", "m", concurrency=0)
    with pytest.raises(InvalidParameterError, match=r"embedder.max_batch_tokens=100 is invalid.*>= 200"):
        EmbedderConfig("openai", "m", max_batch_tokens=100, max_input_tokens=200)
    with pytest.raises(InvalidParameterError, match=r"embedder.concurrency=8 applies to hosted embedding APIs"):
        EmbedderConfig(concurrency=8)
    with pytest.raises(InvalidParameterError, match=r"max_batch_tokens=8000 is invalid.*>= 8191"):
        OpenAIEmbedder("text-embedding-3-small", max_batch_tokens=8000)
