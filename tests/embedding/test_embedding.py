"""Embedders and the persistent cache."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from tuner.embedding import EmbeddingCache, OpenAIEmbedder, SentenceTransformerEmbedder, make_embedder
from tuner.embedding.base import Embedder
from tuner.embedding.cache import text_key
from tuner.embedding.config import EmbedderConfig
from tuner.embedding.sentence_transformers import (
    CPU_BATCH_SIZE,
    GPU_BATCH_SIZE,
    check_precision,
    choose_device,
    cpu_supports_bf16,
    default_batch_size,
)
from tuner.errors import EmbeddingError, InvalidParameterError
from tuner.evaluation.config import EvaluationConfig


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
    assert sorted(model.seen) == ["aa", "b", "ccc"]
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
                           batch_size=2, concurrency=1, cache=EmbeddingCache(tmp_path / "c.sqlite3"))
    vectors = model.embed(["one", "two three", "four five six", "one"])
    assert vectors.shape == (4, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    calls = openai_server.requests_to("/v1/embeddings")
    # Longest first in cl100k tokens (3, 2, 1), two texts per request.
    assert [c.json_body["input"] for c in calls] == [["four five six", "two three"], ["one"]]
    assert calls[0].headers["authorization"] == "Bearer k"
    assert model.identity == f"openai:{openai_server.base_url}:embed-small"
    model.embed(["two three"])
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


class BatchRecordingEmbedder(CountingEmbedder):
    """Records each batch; a vector depends on its text only, as a model's should."""

    identity = "batches:v1"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.batches: list[list[str]] = []

    def _embed(self, texts):
        self.batches.append(list(texts))
        return super()._embed(texts)


def test_missing_texts_are_batched_longest_first_and_returned_in_request_order(tmp_path):
    texts = ["bb", "a", "dddd", "ccc", "a", "eeeee", "ff"]
    model = BatchRecordingEmbedder(cache=EmbeddingCache(tmp_path / "c.sqlite3"), batch_size=2)
    vectors = model.embed(texts)
    # Unique texts by length, longest first; equal lengths keep request order ("bb" before "ff").
    assert model.batches == [["eeeee", "dddd"], ["ccc", "bb"], ["ff", "a"]]
    # Same vectors, in request order, as embedding each text on its own (no sorting at all).
    alone = BatchRecordingEmbedder(batch_size=1)
    assert np.array_equal(vectors, np.concatenate([alone.embed([t]) for t in texts]))
    # The cache holds one vector per text, keyed by the text, whatever batch it came in.
    fresh = BatchRecordingEmbedder(cache=EmbeddingCache(tmp_path / "c.sqlite3"), batch_size=2)
    assert np.array_equal(fresh.embed(texts[::-1]), vectors[::-1])
    assert fresh.batches == []


def test_batch_order_follows_the_embedders_own_lengths():
    class WordCounting(BatchRecordingEmbedder):
        def _batch_lengths(self, texts):
            return [len(t.split()) for t in texts]

    model = WordCounting(batch_size=2)
    model.embed(["x" * 30, "a b c", "a b", "y"])
    assert model.batches == [["a b c", "a b"], ["x" * 30, "y"]]


@pytest.mark.parametrize(("requested", "precision", "cuda", "device"), [
    (None, "fp32", True, "cuda"),
    (None, "bf16", True, "cuda"),
    (None, "int8", True, "cpu"),  # dynamic quantisation has CPU kernels only
    (None, "fp32", False, "cpu"),
    ("cpu", "fp32", True, "cpu"),
    ("cuda:1", "bf16", False, "cuda:1"),
])
def test_device_selection(requested, precision, cuda, device):
    assert choose_device(requested, precision, cuda_available=cuda) == device


def test_batch_size_follows_the_device():
    assert default_batch_size("cpu") == CPU_BATCH_SIZE
    assert default_batch_size("cuda") == default_batch_size("cuda:0") == GPU_BATCH_SIZE


def test_unsupported_precisions_are_refused_clearly_and_fatally():
    check_precision("bf16", "cpu", cpu_bf16=True)
    check_precision("bf16", "cuda", cpu_bf16=False)
    check_precision("int8", "cpu", cpu_bf16=False)
    with pytest.raises(EmbeddingError, match="bf16 needs a CPU with bf16 instructions") as error:
        check_precision("bf16", "cpu", cpu_bf16=False)
    assert error.value.fatal
    with pytest.raises(EmbeddingError, match=r"int8 .* runs on the CPU only") as error:
        check_precision("int8", "cuda:0", cpu_bf16=True)
    assert error.value.fatal


@pytest.mark.parametrize(("cpuinfo", "capable"), [
    ("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 avx512_vnni\n", True),
    ("flags\t\t: fpu amx_tile amx_bf16 amx_int8\n", True),
    ("Features\t: fp asimd bf16 i8mm\n", True),  # ARM
    ("flags\t\t: fpu sse2 avx2 avx512f avx512bw\n", False),  # AVX-512 without bf16: emulated
    ("model name\t: bf16 in a name is not a flag\n", False),
])
def test_cpu_bf16_capability_comes_from_the_cpu_flags(cpuinfo, capable):
    assert cpu_supports_bf16(cpuinfo) is capable


def test_each_precision_is_its_own_cache_identity():
    identities = {p: SentenceTransformerEmbedder(precision=p).identity for p in ("fp32", "bf16", "int8")}
    assert len(set(identities.values())) == 3
    assert identities["fp32"].count(":") == 2  # unchanged: caches filled before precisions existed stay valid
    assert identities["bf16"] == identities["fp32"] + ":bf16"
    assert identities["int8"] == identities["fp32"] + ":int8"
    with pytest.raises(EmbeddingError, match="precision='fp16' is invalid; allowed: fp32, bf16, int8"):
        SentenceTransformerEmbedder(precision="fp16")


def test_precision_in_the_configuration_schema():
    assert EmbedderConfig().precision == "auto"  # see test_precision_auto.py
    assert "precision" not in EmbedderConfig(precision="fp32").to_dict()  # saved configurations read as before
    config = EmbedderConfig(precision="bf16")
    assert config.to_dict() == {"provider": "sentence-transformers", "model": "all-MiniLM-L6-v2", "precision": "bf16"}
    assert EmbedderConfig.from_dict(config.to_dict()) == config
    whole = EvaluationConfig(embedder=EmbedderConfig(precision="int8"))
    assert EvaluationConfig.from_dict(whole.to_dict()).embedder == whole.embedder
    assert config.build().identity.endswith(":bf16")
    assert config.overridden(base_url=None, spec="sentence-transformers").precision == "bf16"
    allowed = r"embedder.precision='fp16' is invalid; allowed: fp32, bf16, int8, auto"
    with pytest.raises(InvalidParameterError, match=allowed):
        EmbedderConfig.from_dict({"precision": "fp16"})
    local_only = "is invalid; allowed: fp32 with provider 'openai': the others apply to local sentence-transformers"
    with pytest.raises(InvalidParameterError, match="embedder.precision='bf16' " + local_only):
        EmbedderConfig("openai", "text-embedding-3-small", precision="bf16")
    with pytest.raises(InvalidParameterError, match="precision='int8' " + local_only):
        make_embedder("openai", precision="int8")


@pytest.mark.slow
def test_length_sorted_batches_give_the_vectors_of_document_order_batches():
    texts = ["Short.", "A somewhat longer sentence about chunking documents for retrieval.", "Mid length text.",
             "The quick brown fox jumps over the lazy dog, again and again, until the dog wakes up.", "Two words"]
    model = SentenceTransformerEmbedder(batch_size=2)
    unsorted = np.concatenate([model._embed(texts[i:i + 2]) for i in range(0, len(texts), 2)])
    assert np.allclose(model.embed(texts), unsorted, atol=1e-5)
    lengths = model._batch_lengths(texts)
    assert lengths[0] < lengths[3] and all(n >= 3 for n in lengths)  # word pieces with [CLS] and [SEP]


@pytest.mark.slow
def test_bf16_and_int8_embed_close_to_fp32():
    texts = ["The cat sat on the mat.", "A kitten is sitting on a rug.", "Stock markets fell sharply on Monday."]
    fp32 = SentenceTransformerEmbedder().embed(texts)
    precisions = ["int8"] + (["bf16"] if cpu_supports_bf16() else [])
    for precision in precisions:
        vectors = SentenceTransformerEmbedder(precision=precision, device="cpu").embed(texts)
        assert vectors.dtype == np.float32 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        assert np.min(np.sum(vectors * fp32, axis=1)) > (0.999 if precision == "bf16" else 0.7)


def test_a_search_space_tells_precisions_of_one_model_apart():
    from tuner.tuning.search.space_file import parse_search_space

    space = parse_search_space({"chunkers": {"token": {}}, "embedders": [
        {"provider": "sentence-transformers"}, {"provider": "sentence-transformers", "precision": "bf16"}]})
    grid = list(space.grid())
    assert {point["embedder"] for point in grid} == {"sentence-transformers:all-MiniLM-L6-v2",
                                                     "sentence-transformers:all-MiniLM-L6-v2:bf16"}


def test_a_present_gpu_is_used_with_gpu_sized_batches(monkeypatch):
    from tuner.embedding import sentence_transformers

    monkeypatch.setattr(sentence_transformers, "_cuda_available", lambda: True)
    model = SentenceTransformerEmbedder()
    assert (model.device, model.batch_size) == ("cuda", GPU_BATCH_SIZE)
    assert SentenceTransformerEmbedder(precision="int8").device == "cpu"
    assert SentenceTransformerEmbedder(batch_size=8).batch_size == 8
    monkeypatch.setattr(sentence_transformers, "_cuda_available", lambda: False)
    model = SentenceTransformerEmbedder()
    assert (model.device, model.batch_size) == ("cpu", CPU_BATCH_SIZE)
