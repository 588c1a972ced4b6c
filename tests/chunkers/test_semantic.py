"""The sentence segmenter and the semantic chunker family.

Algorithm pieces are checked against hand-computed results; behaviour on small texts
with known topic changes uses the real bundled model; invariants (exact offsets, size
bounds, coverage) are property tests with a deterministic stand-in embedder.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuner
from tuner.chunkers.base import SPAN_SEPARATOR
from tuner.chunkers.cluster_semantic import optimal_segmentation
from tuner.chunkers.kamradt import breakpoints
from tuner.chunkers.sentence_clustering import bounded_single_linkage, clustering_distances
from tuner.data.document import Document
from tuner.embedding import EmbeddingCache
from tuner.embedding.base import Embedder
from tuner.errors import ChunkwiseError, InvalidParameterError
from tuner.text.sentences import split_sentences
from tuner.text.tokens import count_tokens

DATA = Path(__file__).resolve().parents[1] / "texts"


def texts_of(text: str, spans) -> list[str]:
    return [text[s:e] for s, e in spans]


def test_sentence_spans():
    text = ("# Setup\n\nDr. Smith arrived at 3 p.m. on Monday! Was it raining? \"Yes,\" he said.\n"
            "- first item. Still the item.\n\n```sh\nrun --fast\n\nagain\n```\nThe U.S. grew in 2023. See e.g. Fig. 3.")
    assert texts_of(text, split_sentences(text)) == [
        "# Setup", "Dr. Smith arrived at 3 p.m. on Monday!", "Was it raining?", '"Yes," he said.',
        "- first item. Still the item.", "```sh\nrun --fast\n\nagain\n```", "The U.S. grew in 2023.",
        "See e.g. Fig. 3.",
    ]


def test_kamradt_breakpoints_by_hand():
    distances = np.array([0.1, 0.9, 0.2, 0.8])
    assert breakpoints(distances, "percentile", 50).tolist() == [False, True, False, True]  # median 0.5
    # mean 0.5, std 0.35355: 0.5 + 1 * 0.354 = 0.854
    assert breakpoints(distances, "standard_deviation", 1.0).tolist() == [False, True, False, False]
    assert breakpoints(distances, "absolute", 0.85).tolist() == [False, True, False, False]
    # quartiles 0.175 and 0.825: 0.5 + 0.5 * 0.65 = 0.825
    assert breakpoints(distances, "interquartile", 0.5).tolist() == [False, True, False, False]


def test_cluster_dp_by_hand():
    # Pieces 0-1 alike, 2-3 alike, the pairs unlike each other; 10 tokens per piece.
    similarity = np.array([[0, 1, -1, -1], [1, 0, -1, -1], [-1, -1, 0, 1], [-1, -1, 1, 0]], dtype=float)
    starts, ends = np.array([0, 10, 20, 30]), np.array([10, 20, 30, 40])
    assert optimal_segmentation(similarity, starts, ends, size=40) == [[0, 1], [2, 3]]
    assert optimal_segmentation(similarity, starts, ends, size=10) == [[0], [1], [2], [3]]
    # Pieces 1 and 2 alike, but a group of 3 pieces is too big: [0], [1, 2], [3] beats the rest.
    similarity = np.array([[0, -1, -1, -1], [-1, 0, 2, -1], [-1, 2, 0, -1], [-1, -1, -1, 0]], dtype=float)
    assert optimal_segmentation(similarity, starts, ends, size=25) == [[0], [1, 2], [3]]


def test_clustering_distance_and_bounded_single_linkage_by_hand():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    d = clustering_distances(vectors, positional_weight=0.5)
    # |0-2|/3 = 2/3 apart, cosine 1: 0.5 * 2/3 + 0.5 * 0 = 1/3; units 0 and 1: 0.5 * 1/3 + 0.5 * 1 = 2/3.
    assert d[0, 2] == pytest.approx(1 / 3) and d[0, 1] == pytest.approx(2 / 3)
    tokens = np.array([10, 10, 10])
    assert sorted(map(sorted, bounded_single_linkage(d, tokens, size=20, stop=0.5))) == [[0, 2], [1]]
    assert sorted(map(sorted, bounded_single_linkage(d, tokens, size=30, stop=0.7))) == [[0, 1, 2]]
    assert sorted(map(sorted, bounded_single_linkage(d, tokens, size=15, stop=0.7))) == [[0], [1], [2]]


@pytest.mark.parametrize(("name", "params", "message"), [
    ("kamradt", {"threshold_type": "absolute", "threshold": 95.0},
     "kamradt: threshold=95.0 is invalid; allowed: a number from 0 to 2 with threshold_type='absolute'"),
    ("kamradt", {"threshold_type": "median"}, "threshold_type='median' is invalid"),
    ("cluster", {"size": 100, "piece_size": 200}, "cluster: piece_size=200 is invalid; allowed: an integer from 4 "
                                                  "to 100 (at most size=100)"),
    ("sentence", {"sentences": 3, "overlap": 3}, "overlap=3 is invalid; allowed: an integer from 0 to 2 "
                                                 "(smaller than sentences=3)"),
    ("clustering", {"method": "kmeans"}, "method='kmeans' is invalid"),
    ("double_pass", {"merging_threshold": 1.5}, "merging_threshold=1.5 is invalid; allowed: a number in [-1, 1]"),
])
def test_semantic_parameter_validation(name, params, message):
    with pytest.raises(InvalidParameterError) as error:
        tuner.make_chunker(name, **params)
    assert message in str(error.value)


def test_semantic_chunker_without_embedder_is_a_clear_error():
    with pytest.raises(ChunkwiseError, match="needs an embedder"):
        tuner.make_chunker("kamradt").chunk("One sentence. Another one.")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    return tuner.EmbedderConfig().build(EmbeddingCache(tmp_path_factory.mktemp("cache") / "c.sqlite3"))


def load(name: str) -> Document:
    return Document(name, (DATA / name).read_text(encoding="utf-8"))


PARAGRAPHS = ("Bring a large pot", "Jupiter is the largest", "Individual income tax")


def topic_of(text: str) -> set[int]:
    doc = load("topics.md").text
    starts = [doc.index(p) for p in PARAGRAPHS] + [len(doc)]
    where = doc.index(text)
    return {i for i in range(3) if starts[i] <= where < starts[i + 1] or starts[i] < where + len(text) <= starts[i + 1]}


@pytest.mark.slow
def test_kamradt_cuts_at_topic_changes(minilm):
    doc = load("topics.md")
    chunks = tuner.make_chunker("kamradt", buffer_size=0, threshold=80.0).bind(minilm).split(doc)
    paragraphs = [p for p in doc.text.split("\n\n")]
    assert [c.text for c in chunks] == [p.strip() for p in paragraphs]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "params"), [("cluster", {"size": 200, "piece_size": 30}),
                                              ("double_pass", {"size": 200})])
def test_no_chunk_spans_two_topics(minilm, name, params):
    doc = load("topics.md")
    chunks = tuner.make_chunker(name, **params).bind(minilm).split(doc)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert len(topic_of(chunk.text)) == 1, chunk.text


@pytest.mark.slow
def test_double_pass_keeps_a_code_block_with_its_passages_and_kamradt_splits_it(minilm):
    doc = load("formula.md")
    code = doc.text.index("```")
    first, last = doc.text.index("The water cycle begins"), doc.text.index("There the water cycle")

    def holder(chunks):
        return next(c for c in chunks if c.start_index <= code < c.end_index)

    kept = holder(tuner.make_chunker("double_pass").bind(minilm).split(doc))
    assert kept.start_index <= first and last < kept.end_index
    split = holder(tuner.make_chunker("kamradt", buffer_size=0, threshold=70.0).bind(minilm).split(doc))
    assert split.text.startswith("```") and split.text.endswith("```")


@pytest.mark.slow
def test_clustering_gathers_a_returning_topic_into_one_multi_span_chunk(minilm):
    doc = load("topics-return.md")
    chunker = tuner.make_chunker("clustering", positional_weight=0.1, stop_distance=0.8, size=200)
    chunks = chunker.bind(minilm).split(doc)
    multi = [c for c in chunks if c.spans]
    assert len(multi) == 1
    (chunk,) = multi
    assert texts_of(doc.text, chunk.spans)[0].startswith("Bring a large pot")
    assert texts_of(doc.text, chunk.spans)[-1].endswith("warm tomato sauce.")
    assert chunk.text == SPAN_SEPARATOR.join(texts_of(doc.text, chunk.spans))
    assert all("Jupiter" not in t for t in texts_of(doc.text, chunk.spans))


@pytest.mark.slow
def test_semantic_chunkers_evaluate_end_to_end(minilm):
    corpus = tuner.load_corpus(Path(__file__).resolve().parents[2] / "examples" / "handbook")
    evalset = tuner.load_evaluation_set(Path(__file__).resolve().parents[2] / "examples" / "handbook-queries.jsonl",
                                        corpus)
    for name in ("sentence", "kamradt", "kamradt_bounded", "cluster", "double_pass", "clustering"):
        result = tuner.evaluate(corpus, evalset, chunker=name, embedder=minilm, k=5)
        assert 0.3 < result.metrics["overall"]["recall"]["mean"] <= 1.0, name
        if name != "sentence":
            assert result.embedding["unit_texts"] > 0 and result.timings["segmentation"] >= 0


class HashEmbedder(Embedder):
    """Deterministic 16-d vectors from a text's hash: fast stand-in for invariants."""

    identity = "hash:16"

    def _embed(self, texts):
        return np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) - 127.5
                         for t in texts], dtype=np.float32)


_words = st.sampled_from(["Alpha", "beta", "gamma.", "Delta!", "eps?", "\n\n", "\n- item", "```", "Zeta",
                          "naïve", "東京.", "🙂", "e.g.", "3.5", "  "])
_documents = st.lists(_words, min_size=0, max_size=120).map(" ".join)
_chunkers = st.sampled_from([
    ("sentence", {"sentences": 3, "overlap": 1}),
    ("kamradt", {"buffer_size": 1, "threshold": 60.0}),
    ("kamradt", {"threshold_type": "gradient", "threshold": 50.0}),
    ("kamradt_bounded", {"size": 24}),
    ("cluster", {"size": 40, "piece_size": 8}),
    ("double_pass", {"size": 30, "initial_threshold": -0.2, "appending_threshold": -0.2, "merging_threshold": -0.2}),
    ("clustering", {"size": 30, "stop_distance": 1.5}),
    ("clustering", {"method": "dbscan", "eps": 0.9}),
])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_documents, spec=_chunkers)
def test_semantic_chunk_invariants(text, spec):
    name, params = spec
    chunks = tuner.make_chunker(name, **params).bind(HashEmbedder()).chunk(text, "doc")
    covered = [False] * len(text)
    for chunk in chunks:
        spans = chunk.all_spans
        assert spans[0][0] == chunk.start_index and spans[-1][1] == chunk.end_index
        assert all(0 <= s < e <= len(text) for s, e in spans)
        assert all(a[1] < b[0] for a, b in itertools.pairwise(spans)), "disjoint, in order"
        assert chunk.text == SPAN_SEPARATOR.join(text[s:e] for s, e in spans)
        assert chunk.token_count == count_tokens(chunk.text)
        bound = params.get("size") if name != "clustering" or params.get("method") != "dbscan" else None
        if bound is not None:
            assert chunk.token_count <= bound
        for s, e in spans:
            for i in range(s, e):
                covered[i] = True
    assert not [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]


@pytest.mark.slow
def test_exported_semantic_chunker_reproduces_its_chunks(minilm, tmp_path):
    import json

    doc = load("topics.md")
    config = {"chunker": {"name": "cluster", "params": {"size": 120, "piece_size": 30}}}
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"chunkwise_export": 1, "config": config}), encoding="utf-8")
    loaded = tuner.load_chunker(path)  # bound to the configured embedder (bundled MiniLM)
    expected = tuner.make_chunker("cluster", size=120, piece_size=30).bind(minilm).split(doc)
    assert loaded.split(doc) == expected
