"""The weighted score and the latency/cost model against hand computations."""

from __future__ import annotations

import pytest

from tuner.errors import InvalidParameterError
from tuner.tuning.core.objective import Rates, Scales, Weights, utilities, weighted_score
from tuner.tuning.scoring.measures import ResolvedRates, model_latency_and_cost


def test_weighted_score_by_hand():
    # u_recall 0.8; u_iou 0.05/(0.05+0.05) = 0.5; u_latency 1/(0.5+1) = 2/3; u_cost 1/(1+1) = 0.5.
    # score = (1*0.8 + 0.5*0.5 + 0.1*2/3 + 0.1*0.5) / 1.7
    expected = (0.8 + 0.25 + 0.1 * 2 / 3 + 0.05) / 1.7
    assert weighted_score(0.8, 0.05, 0.5, 1.0, Weights(), Scales()) == pytest.approx(expected)
    assert expected == pytest.approx(0.686275, abs=1e-6)


def test_weights_scale_only_their_term():
    only_recall = Weights(recall=2.0, iou=0.0, latency=0.0, cost=0.0)
    assert weighted_score(0.37, 0.9, 9.0, 9.0, only_recall, Scales()) == pytest.approx(0.37)
    u = utilities(0.5, 0.1, 2.0, 3.0, Scales(iou_half=0.1, latency_half_s=2.0, cost_half_usd=1.0))
    assert u == pytest.approx({"recall": 0.5, "iou": 0.5, "latency": 0.5, "cost": 0.25})


def test_latency_and_cost_model_by_hand():
    rates = ResolvedRates(embed_usd_per_mtok=0.02, reader_usd_per_mtok=0.15, reader_tokens_per_s=5000,
                          embed_tokens_per_s=2000, search_s_per_chunk=2e-7, amortize_queries=1e6)
    latency, cost = model_latency_and_cost(query_tokens=10, retrieved_tokens=1000, chunks_searched=500,
                                           index_tokens=50_000, rates=rates)
    # 10/2000 + 500*2e-7 + 1000/5000
    assert latency == pytest.approx(0.005 + 0.0001 + 0.2)
    # 1000 queries * (10*0.02 + 1000*0.15)/1e6, plus 50k*0.02/1e6 spread over 1e6 queries (per 1000)
    assert cost == pytest.approx(0.1502 + 0.001 / 1000)


def test_parse_weights():
    assert Weights.parse("recall=2, iou=0") == Weights(recall=2.0, iou=0.0, latency=0.1, cost=0.1)
    with pytest.raises(InvalidParameterError, match="weights='recall:2' is invalid; allowed: NAME=NUMBER pairs"):
        Weights.parse("recall:2")
    with pytest.raises(InvalidParameterError, match=r"weights: speed=1\.0 is invalid; allowed: the keys "):
        Weights.parse("speed=1")


@pytest.mark.parametrize(("factory", "message"), [
    (lambda: Weights(recall=-1), "weights.recall=-1 is invalid; allowed: a number >= 0"),
    (lambda: Weights(recall=0, iou=0, latency=0, cost=0), "weights of which at least one is > 0"),
    (lambda: Rates(reader_tokens_per_s=0), "rates.reader_tokens_per_s=0 is invalid; allowed: a number > 0"),
    (lambda: Scales(iou_half=float("nan")), "scales.iou_half=nan is invalid"),
    (lambda: Rates.from_dict({"gpu": 1}), "rates: gpu=1 is invalid; allowed: the keys amortize_queries"),
])
def test_invalid_objective_settings(factory, message):
    with pytest.raises(InvalidParameterError) as error:
        factory()
    assert message in str(error.value)


# --- any metric in the score, constraints, Pareto axes ------------------------------------------

def test_the_score_weighs_rank_and_context_metrics_by_hand():
    weights = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0, mrr=2.0, context_tokens=1.0)
    # u_recall 0.6; u_mrr 0.5; u_context = 1000 / (3000 + 1000) = 0.25: (0.6 + 2*0.5 + 0.25) / 4.
    score = weighted_score(0.6, 0.1, 1.0, 1.0, weights, Scales(), {"mrr": 0.5, "context_tokens": 3000.0})
    assert score == pytest.approx(1.85 / 4)
    with pytest.raises(InvalidParameterError, match=r"weights\.mrr=2\.0 is invalid; allowed: 0: the MRR of this "
                                                    "configuration"):
        weighted_score(0.6, 0.1, 1.0, 1.0, weights, Scales())


def test_weights_speak_the_metric_vocabulary():
    from tuner.tuning.core.objective import weighable

    built_in = {"recall", "precision", "iou", "precision_omega", "hit_rate", "mrr", "ndcg", "doc_recall",
                "context_tokens"}
    assert set(Weights().as_dict()) == set(weighable()) >= {*built_in, "latency", "cost"}
    assert Weights.parse("mrr=1,ndcg=0.5").used() == {"recall": 1.0, "iou": 0.5, "latency": 0.1, "cost": 0.1,
                                                     "mrr": 1.0, "ndcg": 0.5}
    with pytest.raises(InvalidParameterError) as error:
        Weights.parse("mmr=1")
    assert "weights: mmr=1.0 is invalid; allowed: the keys context_tokens, cost, doc_recall, hit_rate, iou, latency, " \
           "mrr, ndcg" in str(error.value)


def test_constraints_and_pareto_axes_are_checked():
    from tuner.tuning.core.objective import Constraints, check_pareto, pareto_directions

    assert Constraints(context_tokens=1000).violations({"context_tokens": 800.0}) == {"context_tokens": -200.0}
    assert Constraints().violations({"context_tokens": 1e9}) == {}
    assert not Constraints(context_tokens=1000).feasible({"context_tokens": 1000.5})
    with pytest.raises(InvalidParameterError, match="constraints: tokens=5 is invalid; allowed: the keys context_"):
        Constraints.from_dict({"tokens": 5})
    with pytest.raises(InvalidParameterError, match=r"constraints\.context_tokens=0 is invalid; allowed: a number > 0"):
        Constraints(context_tokens=0)
    assert pareto_directions(check_pareto("recall, context_tokens")) == ["maximize", "minimize"]
    with pytest.raises(InvalidParameterError, match=r'pareto=\["recall"\] is invalid; allowed: a list of two or more '
                                                    "distinct metrics of recall, precision"):
        check_pareto(["recall"])
    with pytest.raises(InvalidParameterError, match=r'\["recall", "speed"\] is invalid'):
        check_pareto(["recall", "speed"])
