"""Retrieval methods: BM25 and fusion by hand, the configuration schema, numpy/chroma/BM25
agreement, evaluation with each method, search spaces and the cost model."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest

import tuner
from tuner.errors import InvalidParameterError
from tuner.evaluation.config import EvaluationConfig
from tuner.retrieval import (
    BM25Index,
    ChromaIndex,
    NumpyIndex,
    Ranked,
    bm25_tokenize,
    fuse_rrf,
    fuse_weighted,
    retrieve,
    top_rows,
)
from tuner.retrieval.config import RetrievalConfig
from tuner.tuning import SearchSpaceError
from tuner.tuning.core.objective import Scales, Weights
from tuner.tuning.scoring.measures import ResolvedRates, trial_attributes
from tuner.tuning.search.space_file import parse_search_space

from fakes import WordEmbedder, two_corpora

NAN = float("nan")


def lucene(tf: int, dl: int, avgdl: float, df: int, n: int, k1: float = 1.5, b: float = 0.75) -> float:
    """One term's BM25 score, Lucene's variant, written out independently of bm25s."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


# ------------------------------------------------------------------------------------ BM25 by hand

def test_bm25_tokenisation_lowercases_drops_stopwords_and_short_words_and_stems():
    # Lucene's 33 English stopwords ("the", "and"; not "were"), words of 2+ characters, Snowball stems.
    assert bm25_tokenize(["The Runners were running, a cat and 2 CATS!"]) == [["runner", "were", "run", "cat", "cat"]]


TEXTS = ["apple banana", "apple apple cherry", "banana cherry date", "the and of"]  # the last: stopwords only


def test_bm25_scores_by_hand():
    index = BM25Index(TEXTS)
    # Terms per text: 2, 3, 3 and 0, so the mean length is 2. "apples" stems to "appl" (df 2 of 4).
    scores = index.scores(["apples"])[0]
    assert scores[0] == pytest.approx(lucene(1, 2, 2.0, 2, 4), rel=1e-6)  # ln 2 * 1 / (1 + 1.5) = 0.27726
    assert scores[1] == pytest.approx(lucene(2, 3, 2.0, 2, 4), rel=1e-6)  # ln 2 * 2 / (2 + 2.0625) = 0.34124
    assert scores[0] == pytest.approx(math.log(2) * 0.4, rel=1e-6)
    assert scores[2] == scores[3] == 0.0
    ranked = index.search_scored(["apples"], 3)
    # A chunk sharing no term with the question is not retrieved: the third slot stays empty.
    assert ranked.rows.tolist() == [[1, 0, -1]]
    # "cherry banana": doc 2 holds both (2 x 0.22633), doc 0 banana in a short text, doc 1 cherry.
    ranked = index.search_scored(["Cherry? banana!"], 4)
    assert ranked.rows.tolist() == [[2, 0, 1, -1]]
    assert ranked.scores[0, :3] == pytest.approx([2 * lucene(1, 3, 2.0, 2, 4), lucene(1, 2, 2.0, 2, 4),
                                                  lucene(1, 3, 2.0, 2, 4)], rel=1e-6)
    # Only unknown words or stopwords: nothing is retrieved.
    assert index.search_scored(["the zebra"], 2).rows.tolist() == [[-1, -1]]


def test_bm25_agrees_with_the_formula_on_random_texts():
    rng = np.random.default_rng(11)
    words = ["river", "rivers", "stone", "stones", "bridge", "the", "of", "cloud", "x", "lantern"]
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 12))) for _ in range(40)]
    questions = [" ".join(rng.choice(words, size=3)) for _ in range(10)]
    terms = bm25_tokenize(texts)
    avgdl = sum(map(len, terms)) / len(terms)
    expected = np.zeros((len(questions), len(texts)))
    for q, query in enumerate(bm25_tokenize(questions)):
        for term in query:  # a repeated query term counts again
            df = sum(term in t for t in terms)
            for d, document in enumerate(terms):
                if term in document:
                    expected[q, d] += lucene(document.count(term), len(document), avgdl, df, len(texts))
    assert np.allclose(BM25Index(texts).scores(questions), expected, rtol=1e-5, atol=1e-6)


def test_bm25_ties_go_to_the_lower_row():
    index = BM25Index(["pear plum", "fig", "pear plum", "pear plum"])
    assert index.search_scored(["pear"], 2).rows.tolist() == [[0, 2]]


def test_bm25_of_an_empty_index_retrieves_nothing():
    assert BM25Index([]).search_scored(["anything"], 3).rows.tolist() == [[-1, -1, -1]]


def test_bm25_index_persists_and_refuses_another_tokenizer(tmp_path):
    index = BM25Index(TEXTS)
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert np.array_equal(loaded.scores(["apple cherry", "date"]), index.scores(["apple cherry", "date"]))
    manifest = tmp_path / "bm25" / BM25Index.MANIFEST
    manifest.write_text(manifest.read_text().replace("snowball-english", "porter"), encoding="utf-8")
    with pytest.raises(tuner.ChunkwiseError, match="built with another tokenizer"):
        BM25Index.load(tmp_path / "bm25")


# ------------------------------------------------------------------------------------ fusion by hand

def ranked(rows, scores) -> Ranked:
    return Ranked(np.array(rows, dtype=np.int64), np.array(scores, dtype=np.float64))


DENSE = ranked([[3, 1, 2]], [[0.9, 0.5, 0.1]])
SPARSE = ranked([[1, 4, -1]], [[2.0, 1.0, NAN]])


def test_reciprocal_rank_fusion_by_hand():
    fused = fuse_rrf([DENSE, SPARSE], 60, 4)
    # row 1: 1/62 + 1/61; row 3: 1/61; row 4: 1/62; row 2: 1/63.
    assert fused.rows.tolist() == [[1, 3, 4, 2]]
    assert fused.scores[0] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63])
    # rrf_k = 0: row 1 scores 1/2 + 1/1 = 1.5, row 3 1/1, row 4 1/2, row 2 1/3.
    assert fuse_rrf([DENSE, SPARSE], 0, 2).rows.tolist() == [[1, 3]]
    # Mirror ranks tie exactly; the lower row wins.
    assert fuse_rrf([ranked([[6, 5]], [[1, 0.5]]), ranked([[5, 6]], [[3, 1]])], 60, 2).rows.tolist() == [[5, 6]]


def test_weighted_fusion_by_hand():
    # Min-max normalised: dense row 3 -> 1, row 1 -> 0.5, row 2 -> 0; BM25 row 1 -> 1, row 4 -> 0.
    fused = fuse_weighted(DENSE, SPARSE, 0.5, 4)
    assert fused.rows.tolist() == [[1, 3, 2, 4]]  # 0.75, 0.5, then rows 2 and 4 tie at 0: the lower first
    assert fused.scores[0] == pytest.approx([0.75, 0.5, 0.0, 0.0])
    assert fuse_weighted(DENSE, SPARSE, 0.8, 2).rows.tolist() == [[3, 1]]  # 0.8 against 0.4 + 0.2
    assert fuse_weighted(DENSE, SPARSE, 0.0, 2).rows.tolist() == [[1, 2]]  # BM25 only: row 1, then 0-ties
    # A single candidate normalises to 1; an empty list contributes nothing.
    one = fuse_weighted(ranked([[7]], [[0.2]]), ranked([[-1]], [[NAN]]), 0.5, 2)
    assert one.rows.tolist() == [[7, -1]] and one.scores[0, 0] == pytest.approx(0.5)


def naive_fusion(lists, k):
    """A plain loop over (rows, contributions) lists: the reference the vectorised fusion must match."""
    out = []
    for q in range(len(lists[0][0])):
        fused = {}
        for rows, values in lists:
            for row, value in zip(rows[q], values[q]):
                if row >= 0:
                    fused[int(row)] = fused.get(int(row), 0.0) + float(value)
        out.append(sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k])
    return out


def test_fusion_matches_a_plain_loop_on_random_rankings():
    rng = np.random.default_rng(5)
    for _ in range(20):
        queries, depth, n = 6, 8, 30
        lists = []
        for _ in range(2):
            rows = np.array([rng.choice(n, size=depth, replace=False) for _ in range(queries)])
            rows[rng.random((queries, depth)) < 0.2] = -1
            scores = np.sort(rng.integers(0, 4, size=(queries, depth)).astype(float), axis=1)[:, ::-1]  # ties
            lists.append(ranked(np.where(np.cumsum(rows < 0, axis=1) > 0, -1, rows), scores))
        rrf = fuse_rrf(lists, 10, 5)
        ranks = [(r.rows, np.broadcast_to(1 / (10 + np.arange(1, depth + 1)), r.rows.shape)) for r in lists]
        for q, best in enumerate(naive_fusion(ranks, 5)):
            assert rrf.rows[q, : len(best)].tolist() == [row for row, _ in best]
            assert rrf.scores[q, : len(best)] == pytest.approx([value for _, value in best])
        weighted = fuse_weighted(lists[0], lists[1], 0.3, 5)
        normalised = []
        for r, w in zip(lists, (0.3, 0.7)):
            values = np.zeros(r.rows.shape)
            for q in range(queries):
                valid = r.rows[q] >= 0
                if valid.any():
                    low, high = r.scores[q][valid].min(), r.scores[q][valid].max()
                    values[q] = w * ((r.scores[q] - low) / (high - low) if high > low else 1.0)
            normalised.append((r.rows, values))
        for q, best in enumerate(naive_fusion(normalised, 5)):
            assert weighted.rows[q, : len(best)].tolist() == [row for row, _ in best]


def test_top_rows_breaks_ties_across_the_cut_by_row():
    scores = np.array([[1.0, 2.0, 2.0, 2.0, 0.0], [0.0, 0.0, 3.0, 0.0, 0.0]])
    assert top_rows(scores, 2).rows.tolist() == [[1, 2], [2, 0]]
    assert top_rows(scores, 2, positive=True).rows.tolist() == [[1, 2], [2, -1]]
    assert top_rows(scores, 7).rows.tolist() == [[1, 2, 3, 0, 4, -1, -1], [2, 0, 1, 3, 4, -1, -1]]


# --------------------------------------------------------------------------- backends agree

def unit(rng, n, dim):
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_numpy_and_chroma_agree_on_scores_and_on_every_fused_ranking():
    rng = np.random.default_rng(3)
    vectors, queries = unit(rng, 150, 16), unit(rng, 12, 16)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "theta", "kappa"]
    texts = [" ".join(rng.choice(words, size=6)) for _ in range(150)]
    questions = [" ".join(rng.choice(words, size=2)) for _ in range(12)]
    exact, chroma, lexical = NumpyIndex(vectors), ChromaIndex(vectors), BM25Index(texts)
    try:
        a, b = exact.search_scored(queries, 10), chroma.search_scored(queries, 10)
        assert np.array_equal(a.rows, b.rows)
        assert np.allclose(a.scores, b.scores, atol=1e-5)
        assert np.allclose(a.scores, (queries @ vectors.T)[np.arange(12)[:, None], a.rows], atol=1e-6)
        for settings in (RetrievalConfig(k=5, method="hybrid"),
                         RetrievalConfig(k=5, method="hybrid", fusion="weighted", alpha=0.3)):
            left = retrieve(settings, dense=exact, lexical=lexical, query_vectors=queries, questions=questions)
            right = retrieve(settings, dense=chroma, lexical=lexical, query_vectors=queries, questions=questions)
            assert np.array_equal(left.rows, right.rows)
    finally:
        chroma.close()


def test_retrieve_needs_the_indexes_its_method_uses():
    with pytest.raises(ValueError, match="bm25 retrieval: lexical=null is invalid; allowed: a BM25 index"):
        retrieve(RetrievalConfig(method="bm25"), dense=NumpyIndex(np.eye(2)), query_vectors=np.eye(2))


# -------------------------------------------------------------------------- the configuration

def test_defaults_keep_the_old_schema_and_round_trip():
    assert RetrievalConfig().to_dict() == {"k": 5, "scope": "pooled", "index": "numpy"}
    old = {"chunker": {"name": "token", "params": {"size": 64, "overlap": 8}}, "retrieval": {"k": 3}}
    assert EvaluationConfig.from_dict(old).to_dict()["retrieval"] == {"k": 3, "scope": "pooled", "index": "numpy"}
    for config in (RetrievalConfig(method="bm25", context="title"), RetrievalConfig(method="hybrid"),
                   RetrievalConfig(k=2, method="hybrid", fusion="weighted", alpha=0.25, context="headings")):
        assert RetrievalConfig.from_dict(config.to_dict()) == config
    assert RetrievalConfig(method="hybrid").to_dict() == {"k": 5, "scope": "pooled", "index": "numpy",
                                                          "method": "hybrid", "fusion": "rrf", "rrf_k": 60}
    assert RetrievalConfig(method="hybrid", fusion="weighted").alpha == 0.5


def test_a_method_declares_its_options_and_the_configuration_keeps_the_rest():
    import dataclasses

    from tuner.retrieval import MethodOption, RetrievalMethod, register_method
    from tuner.retrieval.methods import RESERVED_OPTIONS, method_options

    # No option may take the name of a field every retrieval has.
    assert {f.name for f in dataclasses.fields(RetrievalConfig)} == RESERVED_OPTIONS
    assert list(method_options()) == ["fusion", "alpha", "rrf_k"]  # hybrid's, as it declares them

    def declared(*options):
        return type("Declared", (RetrievalMethod,), {"name": "declared", "options": options,
                                                      "rank": lambda self, *a, **kw: None})

    refused = [((MethodOption("k", int, 1),), "option='k' is invalid; allowed: a name no retrieval setting"),
               ((MethodOption("depth", int, -1, low=0),), "default=-1 is invalid"),
               ((MethodOption("depth", int, 1, when=("mode", "deep")),),
                "option 'depth': when=.* is invalid; allowed: an option declared before it"),
               ((MethodOption("alpha", float, 0.1),),
                "option='alpha' is invalid; allowed: a name no other retrieval method declares differently")]
    for options, message in refused:
        with pytest.raises(InvalidParameterError, match=message):
            register_method(declared(*options))
    assert "declared" not in tuner.retrieval.method_names()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"method": "sparse"}, "retrieval.method='sparse' is invalid; allowed: dense, bm25, hybrid"),
    ({"context": "summary"}, "retrieval.context='summary' is invalid; allowed: none, title, headings"),
    ({"alpha": 0.3}, "retrieval.alpha=0.3 is invalid; allowed: a value only with method 'hybrid', but the method is "
                     "'dense'"),
    ({"method": "bm25", "rrf_k": 10}, "retrieval.rrf_k=10 is invalid; allowed: a value only with method 'hybrid'"),
    ({"method": "hybrid", "fusion": "max"}, "retrieval.fusion='max' is invalid; allowed: rrf, weighted"),
    ({"method": "hybrid", "alpha": 0.3}, "retrieval.alpha=0.3 is invalid; allowed: a value only with fusion "
                                         "'weighted', not fusion 'rrf' (rrf_k applies there)"),
    ({"method": "hybrid", "fusion": "weighted", "rrf_k": 5}, "retrieval.rrf_k=5 is invalid; allowed: a value only with "
                                                             "fusion 'rrf', not fusion 'weighted'"),
    ({"method": "hybrid", "fusion": "weighted", "alpha": 1.5},
     "retrieval.alpha=1.5 is invalid; allowed: a number in [0, 1]"),
    ({"method": "hybrid", "fusion": "weighted", "alpha": True}, "retrieval.alpha=true is invalid"),
    ({"method": "hybrid", "rrf_k": -1}, "retrieval.rrf_k=-1 is invalid; allowed: an integer >= 0"),
    ({"method": "hybrid", "rrf_k": 2.5}, "retrieval.rrf_k=2.5 is invalid"),
])
def test_invalid_retrieval_settings_name_the_value_and_the_allowed_range(kwargs, message):
    with pytest.raises(InvalidParameterError) as error:
        RetrievalConfig(**kwargs)
    assert message in str(error.value)


# ------------------------------------------------------------------------------- evaluation

KW = dict(chunker="recursive", size=6, k=2, unit="chars", cache=None)


def test_bm25_evaluation_embeds_nothing_and_ranks_by_hand():
    corpora, queries = two_corpora()
    embedder = WordEmbedder()
    result = tuner.evaluate(corpora, queries, method="bm25", embedder=embedder, **KW)
    assert embedder.seen == [] and result.embedding["texts"] == 0 and result.embedding["index_tokens"] == 0
    # Pooled chunks: "apple apple apple.", "banana banana banana.", "apple engine engine.", "wheel brake brake.".
    # q1 "apple": the fruit chunk (tf 3) first, then the cars chunk (tf 1); q2 "brake": only its chunk.
    assert result.ranking.tolist() == [[0, 2], [3, -1]]
    per_query = result.scores.at(2)
    assert per_query["recall"].tolist() == [1.0, 1.0]
    assert per_query["precision"].tolist() == pytest.approx([18 / (18 + 20), 1.0])
    assert result.config.retrieval.method == "bm25"


def test_hybrid_and_per_corpus_evaluation():
    corpora, queries = two_corpora()
    hybrid = tuner.evaluate(corpora, queries, method="hybrid", embedder=WordEmbedder(), **KW)
    # Both retrievers put q1's own chunk first and the cars "apple" chunk second (RRF 2/61, 2/62).
    assert hybrid.ranking[:, 0].tolist() == [0, 3] and hybrid.ranking[0, 1] == 2
    scoped = tuner.evaluate(corpora, queries, method="bm25", scope="per-corpus", embedder=WordEmbedder(), **KW)
    # Within the fruit corpus, only the apple chunk shares a term with "apple".
    assert scoped.ranking.tolist() == [[0, -1], [3, -1]]


def test_evaluate_overrides_and_resets_fusion_parameters():
    corpora, queries = two_corpora()
    base = EvaluationConfig(retrieval=RetrievalConfig(k=2, method="hybrid", fusion="weighted", alpha=0.2))
    result = tuner.evaluate(corpora, queries, base, method="hybrid", fusion="rrf", rrf_k=5,
                            embedder=WordEmbedder(), chunker="recursive", size=6, cache=None)
    assert result.config.retrieval == RetrievalConfig(k=2, method="hybrid", fusion="rrf", rrf_k=5)
    result = tuner.evaluate(corpora, queries, base, method="bm25", embedder=WordEmbedder(), chunker="recursive",
                            size=6, cache=None)
    assert result.config.retrieval == RetrievalConfig(k=2, method="bm25")


def test_cli_evaluate_with_bm25_and_bad_values(capsys):
    from pathlib import Path

    from tuner.cli import main

    root = Path(__file__).resolve().parents[2]
    argv = ["evaluate", "--corpus", str(root / "examples" / "handbook"), "--queries",
            str(root / "examples" / "handbook-queries.jsonl"), "--chunker", "token", "-p", "size=128",
            "--no-cache", "--method", "bm25", "--context", "headings"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "retrieval  bm25 + headings, k=5" in out and "embedding  0 texts, 0 tokens" in out
    assert main([*argv, "--alpha", "0.5"]) == 2
    assert ("retrieval.alpha=0.5 is invalid; allowed: a value only with method 'hybrid', but the method is 'bm25'"
            in capsys.readouterr().err)
    assert main([*argv[:-4], "--method", "hybrid", "--rrf-k", "-3"]) == 2
    assert "retrieval.rrf_k=-3 is invalid; allowed: an integer >= 0" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- cost model

def test_bm25_trials_model_no_embedding_and_hybrid_searches_two_indexes():
    corpora, queries = two_corpora()
    rates = ResolvedRates(embed_usd_per_mtok=0.02, reader_usd_per_mtok=0.15, reader_tokens_per_s=5000.0,
                          embed_tokens_per_s=1000.0, search_s_per_chunk=0.001, amortize_queries=1000.0)
    attrs = {}
    for method in ("dense", "bm25", "hybrid"):
        result = tuner.evaluate(corpora, queries, method=method, embedder=WordEmbedder(), **KW)
        attrs[method] = trial_attributes(result, rates, Weights(), Scales())
    chunk_tokens = sum(c.token_count for c in result.chunks)
    query_tokens = result.query_tokens
    retrieved = {m: a["retrieved_tokens_per_query"] for m, a in attrs.items()}
    # Dense: embed the question, search 4 chunks, read; the index embeds every chunk once.
    assert attrs["dense"]["latency_ms"] == pytest.approx(
        1000 * (query_tokens / 1000 + 4 * 0.001 + retrieved["dense"] / 5000))
    assert attrs["dense"]["tokens_embedded"] == chunk_tokens + round(query_tokens * 2)
    assert attrs["dense"]["cost_usd_per_1k_queries"] == pytest.approx(
        1000 * (query_tokens * 0.02 + retrieved["dense"] * 0.15) / 1e6 + chunk_tokens * 0.02 / 1e6 * 1000 / 1000)
    # BM25: no question embedded, no chunk embedded: its index costs tokenisation only.
    assert attrs["bm25"]["tokens_embedded"] == 0 and attrs["bm25"]["index_build_s"] == 0
    assert attrs["bm25"]["latency_ms"] == pytest.approx(1000 * (4 * 0.001 + retrieved["bm25"] / 5000))
    assert attrs["bm25"]["cost_usd_per_1k_queries"] == pytest.approx(1000 * retrieved["bm25"] * 0.15 / 1e6)
    # Hybrid embeds as dense does and searches both indexes.
    assert attrs["hybrid"]["tokens_embedded"] == attrs["dense"]["tokens_embedded"]
    assert attrs["hybrid"]["latency_ms"] == pytest.approx(
        1000 * (query_tokens / 1000 + 8 * 0.001 + retrieved["hybrid"] / 5000))
    assert (attrs["dense"]["retrieval"], attrs["bm25"]["retrieval"], attrs["hybrid"]["retrieval"]) == (
        "dense", "bm25", "hybrid rrf(k=60)")


# ------------------------------------------------------------------------------- search spaces

SPACE = {"k": 3, "chunkers": {"token": {"size": 64}}}


@pytest.mark.parametrize(("retrieval", "message"), [
    ({"method": ["dense", "sparse"]}, "retrieval.method.choices='sparse' is invalid; allowed: one of 'dense', "
                                      "'bm25', 'hybrid'"),
    ({"metod": "bm25"}, "retrieval: metod='bm25' is invalid; allowed: the keys alpha, candidates, context, fusion"),
    ({"method": "bm25", "alpha": 0.5}, "retrieval.alpha applies only to method hybrid, which retrieval.method "
                                       "does not allow (bm25)"),
    ({"method": "hybrid", "alpha": {"type": "float", "low": 0.0, "high": 1.0}},
     "retrieval.alpha applies only to fusion weighted; fusion defaults to rrf: add fusion: weighted"),
    ({"method": "hybrid", "fusion": "weighted", "rrf_k": 60},
     "retrieval.rrf_k applies only to fusion rrf, which retrieval.fusion does not allow (weighted)"),
    ({"method": "hybrid", "fusion": "weighted", "alpha": {"type": "float", "low": 0.0, "high": 1.5}},
     "retrieval.alpha.high=1.5 is invalid; allowed: float in [0, 1]"),
    ({"method": "hybrid", "rrf_k": {"type": "float", "low": 1, "high": 9}},
     "retrieval.rrf_k.type: 'float' does not fit this parameter (int in [0, inf])"),
    ({"context": ["none", "abstract"]}, "retrieval.context.choices='abstract' is invalid"),
    ("bm25", "retrieval='bm25' is invalid; allowed: a mapping of method, fusion, alpha, rrf_k, context, rerank, "
             "candidates to values or domains"),
])
def test_invalid_retrieval_spaces(retrieval, message):
    with pytest.raises(SearchSpaceError) as error:
        parse_search_space({**SPACE, "retrieval": retrieval}, "space.yaml")
    assert message in str(error.value) and "space.yaml" in str(error.value)


def test_retrieval_is_sampled_define_by_run():
    space = parse_search_space({**SPACE, "retrieval": {
        "method": ["dense", "bm25", "hybrid"], "fusion": ["rrf", "weighted"],
        "alpha": {"type": "float", "low": 0.0, "high": 1.0}, "rrf_k": [10, 60], "context": ["none", "headings"]}})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=2))
    seen = set()
    for _ in range(120):
        trial = study.ask()
        _, k, _ = space.sample(trial)
        config = space.sample_retrieval(trial, k)
        names = set(trial.params) - {"chunker", "k"}
        expected = {"retrieval", "context"}
        if config.method == "hybrid":
            expected |= {"fusion", "alpha" if config.fusion == "weighted" else "rrf_k"}
        assert names == expected  # only the sampled branch's parameters exist
        assert config.k == 3 and config.context in ("none", "headings")
        seen.add((config.method, config.fusion))
        study.tell(trial, 0.0)
    assert seen == {("dense", None), ("bm25", None), ("hybrid", "rrf"), ("hybrid", "weighted")}


def test_a_space_without_retrieval_samples_and_stores_as_before():
    space = parse_search_space(SPACE)
    assert "retrieval" not in space.to_dict()
    trial = optuna.create_study().ask()
    space.sample(trial)
    assert space.sample_retrieval(trial, 3) == RetrievalConfig(k=3)
    assert set(trial.params) == {"chunker"}  # no retrieval parameter: the same Optuna trials as before


def test_grid_expands_the_retrieval_branches():
    space = parse_search_space({**SPACE, "retrieval": {"method": ["dense", "hybrid"], "fusion": ["rrf", "weighted"],
                                                       "alpha": [0.3, 0.7], "context": ["none", "title"]}})
    points = list(space.grid())
    # dense, hybrid rrf (default rrf_k), hybrid weighted x 2 alphas: 4 branches, x 2 contexts.
    assert len(points) == 8
    assert {"chunker": "token", "k": 3, "retrieval": "hybrid", "fusion": "weighted", "alpha": 0.7,
            "context": "title"} in points
    assert {"chunker": "token", "k": 3, "retrieval": "dense", "context": "none"} in points


def test_bundled_retrieval_space_loads():
    from pathlib import Path

    from tuner.tuning import load_search_space
    space = load_search_space(Path(__file__).resolve().parents[2] / "search_spaces" / "retrieval.yaml")
    assert set(space.retrieval) == {"method", "fusion", "alpha", "rrf_k", "context"}
    assert space.to_dict()["retrieval"]["method"] == {"type": "categorical", "choices": ["dense", "bm25", "hybrid"]}


def test_near_ties_rank_by_the_exact_cosine_in_numpy_and_in_chromadb(tmp_path):
    """Vectors whose cosines with the query differ by about 1e-9 (below float32's resolution):
    both indexes order them as exact rational arithmetic on their float32 values does, and
    identical vectors tie, to the lower row, so an evaluation and a production collection agree."""
    from fractions import Fraction

    from tuner.retrieval.indexes import ChromaIndex, NumpyIndex

    rng = np.random.default_rng(7)
    base = rng.normal(size=32)
    base /= np.linalg.norm(base)
    vectors = []
    for row in range(40):  # every fourth a tiny step from the base vector (cosines within ~1e-8 of
        # one another), the others farther off
        v = base + rng.normal(size=32) * (3e-5 if row % 4 == 0 else 0.3)
        vectors.append(v / np.linalg.norm(v))
    vectors[13] = vectors[4]  # an exact duplicate, after row 4
    vectors = np.asarray(vectors, dtype=np.float32)
    query = np.asarray([base], dtype=np.float32)

    def exact(row: int) -> Fraction:
        return sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(vectors[row], query[0]))

    want = sorted(range(len(vectors)), key=lambda r: (-exact(r), r))[:10]
    assert want.index(4) + 1 == want.index(13)
    assert NumpyIndex(vectors).search(query, 10)[0].tolist() == want
    chroma = ChromaIndex(vectors, path=tmp_path / "db")
    try:
        assert chroma.search(query, 10)[0].tolist() == want
    finally:
        chroma.close()
