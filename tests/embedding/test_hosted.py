"""Hosted embedding APIs: requests filled to the endpoint's limits, several in flight, rate limits
obeyed, and the usage the API reports counted. Everything runs against the tests' local
OpenAI-compatible server through the real ``openai`` client."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from tuner.embedding import EmbeddingCache
from tuner.embedding.config import EmbedderConfig
from tuner.embedding.openai import OpenAIEmbedder
from tuner.errors import InvalidParameterError
from tuner.evaluation.evaluator import embedder_window

from openai_stub import deterministic_embedding


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
    with pytest.raises(InvalidParameterError, match=r"max_batch_tokens=100 is invalid; allowed: an integer >= 200"):
        EmbedderConfig("openai", "m", max_batch_tokens=100, max_input_tokens=200)
    with pytest.raises(InvalidParameterError, match=r"concurrency=8 is invalid; allowed: none with .* hosted"):
        EmbedderConfig(concurrency=8)
    with pytest.raises(InvalidParameterError, match=r"max_batch_tokens=8000 is invalid; allowed: an integer >= 8191"):
        OpenAIEmbedder("text-embedding-3-small", max_batch_tokens=8000)


# --- concurrent requests ----------------------------------------------------------------------

class InFlight:
    """The stub's delay: a random wait per request, counting how many answers are pending at once."""

    def __init__(self, seed: int = 0, longest: float = 0.05) -> None:
        self.random, self.longest = random.Random(seed), longest
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __call__(self, request) -> float:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            delay = self.random.uniform(0, self.longest)
        threading.Timer(delay, self._done).start()
        return delay

    def _done(self) -> None:
        with self.lock:
            self.now -= 1


def test_results_keep_input_order_under_random_request_delays(openai_server):
    openai_server.delay_fn = in_flight = InFlight()
    texts = [f"text {i} " + words(i % 7) for i in range(40)]
    vectors = embedder(openai_server, concurrency=8, max_batch_inputs=3).embed(texts)
    assert np.allclose(vectors, np.stack([expected(t) for t in texts]), atol=1e-6)
    assert len(sent_inputs(openai_server)) == 14  # ceil(40 / 3)
    assert 1 < in_flight.most <= 8


def test_a_429_with_retry_after_pauses_every_sender_then_succeeds(openai_server):
    openai_server.retry_after_ms, openai_server.retry_after = None, "1"
    openai_server.script("/v1/embeddings", [429])
    openai_server.delay_fn = lambda request: 0.2
    texts = [f"text {i}" for i in range(8)]
    model = embedder(openai_server, concurrency=4, max_batch_inputs=1)
    vectors = model.embed(texts)
    assert np.allclose(vectors, np.stack([expected(t) for t in texts]), atol=1e-6)
    times = openai_server.request_times
    assert len(times) == 9  # 8 requests and the one answered 429, again
    # The 429 came first (the script answers the first arrival) and at once; the requests in flight
    # with it may land beside it, but no sender starts another one before the second it asked for.
    assert all(t >= times[0] + 0.95 for t in times[4:])
    assert model.rate_gate.paused_s > 0


def test_no_requests_left_pauses_until_the_reset(openai_server):
    answered = []

    def headers(request):
        answered.append(request)
        return ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "500ms"}
                if len(answered) == 1 else {})

    openai_server.response_headers_fn = headers
    embedder(openai_server, concurrency=1, max_batch_inputs=1).embed(["a", "b b", "c c c"])
    times = openai_server.request_times
    assert len(times) == 3 and times[1] - times[0] >= 0.45


def test_a_failed_request_is_retried_alone(openai_server):
    openai_server.script("/v1/embeddings", [500])
    texts = [f"text {i}" for i in range(8)]
    vectors = embedder(openai_server, concurrency=4, max_batch_inputs=1).embed(texts)
    assert np.allclose(vectors, np.stack([expected(t) for t in texts]), atol=1e-6)
    inputs = [tuple(i) for i in sent_inputs(openai_server)]
    assert len(inputs) == 9
    assert sorted(set(inputs)) == sorted((t,) for t in texts)  # one of them twice, the others once


def test_a_request_the_client_gives_up_on_keeps_the_batches_already_received(openai_server, tmp_path):
    from tuner.errors import EmbeddingError

    openai_server.script("/v1/embeddings", [500])
    openai_server.delay_fn = lambda request: 0.05
    texts = [f"text {i}" for i in range(8)]
    model = embedder(openai_server, concurrency=2, max_batch_inputs=1, max_retries=0,
                     cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    with pytest.raises(EmbeddingError, match="HTTP 500"):
        model.embed(texts)
    first = sent_inputs(openai_server)
    received = {i[0] for i in first[1:]}  # the first request was the one answered 500
    openai_server.reset()
    vectors = model.embed(texts)
    assert np.allclose(vectors, np.stack([expected(t) for t in texts]), atol=1e-6)
    assert sorted(i[0] for i in sent_inputs(openai_server)) == sorted(set(texts) - received)


def test_the_rate_gate_waits_for_a_token_budget_to_reset():
    clock = [100.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds

    from tuner.llm.rates import RateGate

    gate = RateGate(clock=lambda: clock[0], sleep=sleep)
    gate.observe({"x-ratelimit-remaining-tokens": "1000", "x-ratelimit-reset-tokens": "2s"})
    gate.reserve(600)  # fits: 400 left
    gate.reserve(600)  # does not: wait for the reset, 2 s after the answer
    assert slept == [2.0]
    gate.observe({"retry-after": "3"})
    gate.reserve(1)
    assert slept == [2.0, 3.0] and gate.paused_s == 5.0


# --- exact cost -------------------------------------------------------------------------------

def test_the_usage_the_api_reports_is_counted(openai_server):
    model = embedder(openai_server, concurrency=4, max_batch_inputs=2)
    model.embed([words(n) for n in (1, 2, 3, 4, 5, 6)] + [words(1)])
    # The stub reports one token per whitespace-separated word: 1 + 2 + ... + 6, the repeat embedded once.
    assert model.stats.api_tokens == 21
