"""Rerankers: a real sentence-transformers CrossEncoder (a tiny one with fixed weights, saved to a
temporary folder) reorders the first stage's candidates, in evaluation and in search spaces."""

from __future__ import annotations

import numpy as np
import optuna
import pytest

import tuner
from tuner.errors import InvalidParameterError
from tuner.retrieval import retrieve
from tuner.retrieval.config import RetrievalConfig
from tuner.retrieval.ranking import Ranked
from tuner.retrieval.rerank import load_cross_encoder, rerank
from tuner.tuning.search.domains import SearchSpaceError
from tuner.tuning.search.space_file import parse_search_space

from fakes import WordEmbedder, save_cross_encoder, two_corpora


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return str(save_cross_encoder(tmp_path_factory.mktemp("reranker")))


def predicted(model: str, question: str, texts: list[str]) -> np.ndarray:
    """The cross-encoder's scores, straight from sentence-transformers."""
    from sentence_transformers import CrossEncoder

    return np.asarray(CrossEncoder(model, local_files_only=True).predict([(question, t) for t in texts]))


TEXTS = ["which port does the container listen on", "logs are kept for long", "apple banana",
         "the container listens on port", "backup and restore", "wheel brake engine"]


def test_the_cross_encoder_orders_the_candidates_and_keeps_the_top_k(model):
    first = Ranked(np.array([[5, 0, 3, 1, -1], [2, 4, -1, -1, -1]]), np.zeros((2, 5)))
    questions = ["which port does the container listen on", "how long are logs kept"]
    out = rerank(first, questions, lambda rows: [TEXTS[r] for r in rows], model, k=3)
    for q, rows in enumerate(([5, 0, 3, 1], [2, 4])):
        scores = predicted(model, questions[q], [TEXTS[r] for r in rows])
        assert len(set(np.round(scores, 6))) == len(rows)  # the fixed weights tell every pair apart
        best = [rows[i] for i in np.argsort(-scores)[:3]]
        assert out.rows[q, : len(best)].tolist() == best
        assert out.scores[q, : len(best)] == pytest.approx(np.sort(scores)[::-1][:3], abs=1e-5)
    assert out.rows[1, 2] == -1  # two candidates, k=3: padded
    assert out.first_stage is first


def test_retrieve_ranks_candidates_first_then_reranks(model):
    # BM25 over the texts; 4 candidates, k=2.
    from tuner.retrieval import BM25Index

    settings = RetrievalConfig(k=2, method="bm25", rerank=model, candidates=4)
    question = "which port does the container listen on"
    ranked = retrieve(settings, lexical=BM25Index(TEXTS), questions=[question],
                      texts=lambda rows: [TEXTS[r] for r in rows])
    first = BM25Index(TEXTS).search_scored([question], 4).rows[0]
    assert ranked.first_stage.rows[0].tolist() == first.tolist()
    candidates = [int(r) for r in first if r >= 0]
    scores = predicted(model, question, [TEXTS[r] for r in candidates])
    assert ranked.rows[0].tolist() == [candidates[i] for i in np.argsort(-scores)[:2]]
    with pytest.raises(ValueError, match="texts=null is invalid; allowed: the questions and the chunk texts"):
        retrieve(settings, lexical=BM25Index(TEXTS), questions=[question])


def test_evaluate_reports_first_stage_recall_beside_the_reranked_recall(model):
    corpora, queries = two_corpora()
    common = dict(chunker="recursive", size=6, unit="chars", embedder=WordEmbedder(), cache=None)
    reranked = tuner.evaluate(corpora, queries, k=1, rerank=model, candidates=3, **common)
    plain = tuner.evaluate(corpora, queries, k=3, **common)
    # The first stage is plain dense retrieval at depth 3: its recall is plain recall@3.
    assert reranked.first_stage["candidates"] == 3
    assert reranked.first_stage["recall"].tolist() == plain.scores.at(3)["recall"].tolist()
    texts = [c.text for c in reranked.chunks]
    for q, query in enumerate(queries):
        candidates = [int(r) for r in plain.ranking[q] if r >= 0]
        scores = predicted(model, query.question, [texts[r] for r in candidates])
        assert reranked.ranking[q].tolist() == [candidates[int(np.argmax(scores))]]
    assert reranked.to_dict()["first_stage"]["candidates"] == 3
    from tuner.tuning.core.objective import Scales, Weights
    from tuner.tuning.scoring.measures import ResolvedRates, trial_attributes

    attrs = trial_attributes(reranked, ResolvedRates(0.0, 0.15, 5000.0, 1e6, 2e-7, 1e6), Weights(), Scales())
    assert attrs["first_stage_recall"] == pytest.approx(float(np.mean(plain.scores.at(3)["recall"])))
    assert attrs["rerank_candidates"] == 3
    assert reranked.config.retrieval.describe().endswith(f"+ rerank({model.rsplit('/', 1)[-1]}, 3)")


def test_rerank_settings_spell_one_way_and_refuse_what_they_cannot_do(model, tmp_path):
    config = RetrievalConfig.from_dict({"k": 5, "rerank": {"model": model, "candidates": 40}})
    assert (config.rerank, config.candidates, config.depth) == (model, 40, 40)
    assert config.to_dict()["rerank"] == {"model": model, "candidates": 40}
    assert RetrievalConfig.from_dict(config.to_dict()) == config
    assert RetrievalConfig(rerank=model).candidates == 30
    assert RetrievalConfig(rerank="none") == RetrievalConfig()
    assert "rerank" not in RetrievalConfig().to_dict()  # configurations without one are unchanged
    with pytest.raises(InvalidParameterError, match=r"retrieval\.candidates=20 is invalid; allowed: a count only with"):
        RetrievalConfig(candidates=20)
    with pytest.raises(InvalidParameterError, match=r'rerank=\{"candidates": 20\} is invalid; allowed: a mapping with'):
        RetrievalConfig.from_dict({"rerank": {"candidates": 20}})
    with pytest.raises(InvalidParameterError, match="nothing-here' is invalid; allowed: the folder of a saved cross-"):
        load_cross_encoder(str(tmp_path / "nothing-here"))


def test_a_space_searches_the_reranker_and_its_candidates(model):
    space = parse_search_space({"chunkers": {"token": {"size": 64, "overlap": 0}}, "k": 3,
                                "retrieval": {"rerank": ["none", model],
                                              "candidates": {"type": "int", "low": 10, "high": 100, "step": 45}}},
                               "space.yaml")
    # Without a reranker, no candidates: 1 + 3 points.
    assert [p for p in space.grid() if p.get("rerank") == "none"] == [{"chunker": "token", "k": 3, "rerank": "none"}]
    assert sorted(p["candidates"] for p in space.grid() if p.get("rerank") == model) == [10, 55, 100]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(12):
        retrieval = space.sample_retrieval(study.ask(), 3)
        seen.add((retrieval.rerank, retrieval.candidates))
    assert (None, None) in seen and any(r == model and c in (10, 55, 100) for r, c in seen)
    with pytest.raises(SearchSpaceError, match=r"retrieval\.candidates applies only with a reranker"):
        parse_search_space({"chunkers": {"token": {"size": 64}}, "k": 3, "retrieval": {"candidates": [10]}}, "s")
    with pytest.raises(SearchSpaceError, match=r"rerank='/no/such/folder' is invalid; allowed: the folder of a saved"):
        parse_search_space({"chunkers": {"token": {"size": 64}}, "k": 3,
                            "retrieval": {"rerank": ["none", "/no/such/folder"]}}, "s")
