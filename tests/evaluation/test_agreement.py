"""Agreement between two evaluation sets (issue 49, item 1): τ-b and its bootstrap interval
against figures computed here by hand or by brute force (no scipy), where each set's best
lands, the verdict, the refusals, and the shared scoring against ``tuner.evaluate`` run alone."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tuner import evaluate, load_corpus, load_evaluation_set
from tuner.data.evalset import EvaluationSet
from tuner.data.generate.trust import PARITY_CLOSER, SCREEN_CLOSER
from tuner.evaluation.agreement import (
    GRID,
    Agreement,
    AgreementError,
    GridRow,
    ScoreTable,
    agreement,
    check_comparable,
    grid_rows,
    score_grid,
)
from tuner.evaluation.config import EvaluationConfig
from tuner.evaluation.head_to_head import MIN_QUESTIONS, HeadToHead, head_to_head

from fakes import brute_tau_b

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


def table(name: str, rows, labels=("a", "b", "c", "d")) -> ScoreTable:
    return ScoreTable(name, tuple(labels[:len(rows[0])]), np.array(rows, dtype=float))


def same_rows(name: str, row, questions: int = MIN_QUESTIONS) -> ScoreTable:
    """Every question scores the configurations alike: each resample ranks as the whole set does."""
    return table(name, [row] * questions)


def test_brute_force_tau_b_matches_the_hand_counts():
    # 4 configurations: one pair of 6 swapped -> (5 - 1) / 6.
    assert brute_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    # Ties: pairs (2,3) tied in x only, (3,4) tied in y only, the 4 others concordant -> 4 / sqrt(5 * 5).
    assert brute_tau_b([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(0.8)


@pytest.mark.parametrize(("made", "own", "expected"), [
    ([0.1, 0.2, 0.3, 0.4], [0.1, 0.3, 0.2, 0.4], 2 / 3),
    ([0.1, 0.2, 0.2, 0.3], [0.1, 0.2, 0.3, 0.3], 0.8),
    ([0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], -1.0),
])
def test_tau_is_that_of_the_mean_scores_and_a_constant_ranking_has_a_point_interval(made, own, expected):
    found = agreement(same_rows("made", made), same_rows("own", own), resamples=300)
    assert found.tau == pytest.approx(expected)
    # Every question ranks as its set does, so every resample gives the same τ.
    assert found.interval == pytest.approx((expected, expected))
    assert found.undefined == 0


def test_identical_sets_agree_fully_but_the_interval_is_one_only_when_every_resample_agrees():
    agreeing = same_rows("own", [0.2, 0.5, 0.7, 0.9])
    found = agreement(agreeing, agreeing, resamples=300)
    assert (found.tau, found.interval) == (1.0, (1.0, 1.0))
    # The same questions, but they disagree among themselves: resampled independently, the two
    # copies no longer rank alike every time.
    split = table("own", [[1, 0, 0.5, 0.2], [0, 1, 0.5, 0.2], [0.9, 0.1, 0.6, 0.2], [0.2, 0.8, 0.4, 0.3],
                          [0.5, 0.5, 0.5, 0.1], [0.7, 0.2, 0.3, 0.9]])
    found = agreement(split, split, resamples=500)
    assert found.tau == 1.0
    assert found.interval[0] < 1.0 and found.interval[1] <= 1.0


def exact_bootstrap(made: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of resamples (as multisets, weighted by how many draws give each): the exact
    bootstrap distribution of τ-b, as values and probabilities (undefined resamples left out)."""

    def multisets(scores: np.ndarray):
        n = len(scores)
        for draw in itertools.combinations_with_replacement(range(n), n):
            counts = Counter(draw)
            ways = math.factorial(n)
            for count in counts.values():
                ways //= math.factorial(count)
            yield scores[list(draw)].mean(axis=0), ways / n ** n

    weights: dict[float, float] = {}
    own_draws = list(multisets(own))
    for made_means, p in multisets(made):
        for own_means, q in own_draws:
            tau = brute_tau_b(list(made_means), list(own_means))
            if not math.isnan(tau):
                key = round(tau, 9)
                weights[key] = weights.get(key, 0.0) + p * q
    values = np.array(sorted(weights))
    probabilities = np.array([weights[v] for v in values])
    return values, probabilities / probabilities.sum()


def test_the_interval_is_the_percentile_interval_of_the_exact_bootstrap():
    made = np.array([[0.9, 0.1, 0.4], [0.8, 0.3, 0.2], [0.1, 0.9, 0.5], [0.7, 0.5, 0.6], [0.6, 0.2, 0.3]])
    own = np.array([[0.8, 0.3, 0.5], [0.2, 0.6, 0.3], [0.9, 0.1, 0.2], [0.5, 0.4, 0.7], [0.6, 0.6, 0.1]])
    values, probabilities = exact_bootstrap(made, own)
    cdf = np.cumsum(probabilities)
    low, high = values[np.searchsorted(cdf, 0.025)], values[np.searchsorted(cdf, 0.975)]
    # The data are chosen so that 2.5% and 97.5% fall well inside a step of the exact distribution,
    # where a sampled percentile cannot land on a neighbouring value.
    assert np.min(np.abs(cdf - 0.025)) > 0.01 and np.min(np.abs(cdf - 0.975)) > 0.01
    found = agreement(table("made", made), table("own", own), resamples=5000)
    assert found.tau == pytest.approx(brute_tau_b(made.mean(axis=0), own.mean(axis=0)))
    assert found.interval == pytest.approx((low, high))


def test_resamples_that_rank_nothing_are_counted_and_left_out():
    # Two questions of five score every configuration alike: a resample of only those ranks nothing.
    own = table("own", [[1, 1, 1], [1, 1, 1], [0.2, 0.5, 0.9], [0.1, 0.6, 0.8], [0.3, 0.4, 1.0]])
    found = agreement(own, own, resamples=4000)
    # P(a resample of own holds only the two flat questions) = (2/5)^5, per copy, either copy.
    expected = 1 - (1 - (2 / 5) ** 5) ** 2
    assert found.undefined / 4000 == pytest.approx(expected, abs=0.006)
    assert not math.isnan(found.interval[0]) and found.interval[1] == 1.0


def test_where_each_best_lands_in_the_other_ranking():
    made = same_rows("made", [0.9, 0.8, 0.3, 0.1])
    own = same_rows("own", [0.6, 0.7, 0.2, 0.65])  # ranks a=3, b=1, c=4, d=2
    found = agreement(made, own, resamples=200)
    placed = found.candidate_best_on_reference
    assert (placed.labels, placed.ranks, placed.of) == (("a",), (3, 3), 4)
    assert placed.scores == pytest.approx((0.6, 0.6)) and placed.shortfall == pytest.approx(0.1)
    back = found.reference_best_on_candidate
    assert (back.labels, back.ranks, back.shortfall) == (("b",), (2, 2), pytest.approx(0.1))


def test_configurations_tied_for_best_are_placed_together():
    found = agreement(same_rows("made", [0.9, 0.9, 0.3, 0.9]), same_rows("own", [0.2, 0.7, 0.4, 0.7]),
                      resamples=200)
    placed = found.candidate_best_on_reference
    # a, b and d tie on made; on own they rank 4, 1 and 1.
    assert (placed.labels, placed.ranks) == (("a", "b", "d"), (1, 4))
    assert placed.scores == pytest.approx((0.2, 0.7)) and placed.shortfall == pytest.approx(0.5)


@pytest.mark.parametrize(("tau", "low", "verdict"), [
    (0.8, 0.6, "stand-in"), (0.7, 0.5, "stand-in"), (0.9, 0.3, "unconfirmed"), (0.69, 0.6, "screen"),
    (0.4, 0.1, "screen"), (0.39, 0.2, "own"), (-0.5, -0.9, "own")])
def test_without_a_head_to_head_the_verdict_follows_tau_and_the_interval(tau, low, verdict):
    tables = same_rows("made.jsonl", [0.1, 0.2, 0.3]), same_rows("own.jsonl", [0.1, 0.2, 0.3])
    found = Agreement(*tables, tau=tau, interval=(low, 1.0), confidence=0.95, resamples=1000)
    assert (found.basis, found.verdict) == ("tau", verdict)
    sentence = found.sentence()
    assert "made.jsonl" in sentence and "own.jsonl" in sentence and f"{tau:.2f}" in sentence
    assert ("can stand in" in sentence) == (verdict == "stand-in")
    assert ("tune on own.jsonl" in sentence) == (verdict == "own")


def versus(closer: float, splits: int = 100) -> HeadToHead:
    """A head-to-head whose candidate ranks closer than the reference's own part in ``closer`` of the splits."""
    wins = round(closer * splits)
    return HeadToHead(20, 40, np.array([0.6] * wins + [0.2] * (splits - wins)), np.full(splits, 0.4))


@pytest.mark.parametrize(("tau", "low", "closer", "verdict"), [
    # The case issue 63 saw: tau-b 0.57 said "only roughly", the head-to-head beside it parity.
    (0.57, 0.15, 0.56, "stand-in"), (0.2, -0.1, PARITY_CLOSER, "stand-in"),
    (0.9, 0.8, PARITY_CLOSER - 0.01, "screen"), (0.9, 0.8, SCREEN_CLOSER, "screen"),
    (0.9, 0.8, SCREEN_CLOSER - 0.01, "own"), (0.61, 0.11, 0.05, "own")])
def test_the_verdict_follows_the_head_to_head_where_there_is_one(tau, low, closer, verdict):
    tables = same_rows("made.jsonl", [0.1, 0.2, 0.3]), same_rows("own.jsonl", [0.1, 0.2, 0.3])
    found = Agreement(*tables, tau=tau, interval=(low, 1.0), confidence=0.95, resamples=1000,
                      head_to_head=versus(closer))
    assert found.head_to_head.closer == pytest.approx(closer)
    assert (found.basis, found.verdict) == ("head-to-head", verdict)
    sentence = found.sentence()
    assert f"{closer:.0%} of the splits" in sentence and "tau-b" not in sentence
    assert ("can stand in for own.jsonl as well as 20 more of own.jsonl's own questions" in sentence) == (
        verdict == "stand-in")
    assert ("use it only to shortlist" in sentence) == (verdict == "screen")
    assert ("tune on own.jsonl" in sentence) == (verdict == "own")
    shown = found.to_dict()
    assert (shown["verdict"], shown["verdict_basis"], shown["sentence"]) == (verdict, "head-to-head", sentence)


def test_a_head_to_head_where_no_split_compares_leaves_the_verdict_to_tau():
    tables = same_rows("made.jsonl", [0.1, 0.2, 0.3]), same_rows("own.jsonl", [0.1, 0.2, 0.3])
    nothing = HeadToHead(20, 40, np.full(10, np.nan), np.full(10, np.nan))
    found = Agreement(*tables, tau=0.5, interval=(0.2, 0.8), confidence=0.95, resamples=1000, head_to_head=nothing)
    assert (found.basis, found.verdict) == ("tau", "screen") and "tau-b 0.50" in found.sentence()


def test_too_few_questions_different_configurations_and_a_flat_set_are_refused():
    few = same_rows("own.jsonl", [0.1, 0.2, 0.3], questions=MIN_QUESTIONS - 1)
    refused = rf"own\.jsonl holds {MIN_QUESTIONS - 1} question.*at least {MIN_QUESTIONS}"
    with pytest.raises(AgreementError, match=refused):
        agreement(same_rows("made", [0.1, 0.2, 0.3]), few)
    with pytest.raises(AgreementError, match="different configurations"):
        agreement(same_rows("made", [0.1, 0.2, 0.3]), table("own", [[0.1, 0.2, 0.3]] * 5, labels=("x", "y", "z")))
    with pytest.raises(AgreementError, match=r"flat\.jsonl: every configuration scores the same"):
        agreement(same_rows("made", [0.1, 0.2, 0.3]), same_rows("flat.jsonl", [1.0, 1.0, 1.0]))
    with pytest.raises(AgreementError, match="at least 3"):
        agreement(same_rows("made", [0.1, 0.2]), same_rows("own", [0.2, 0.1]))


def test_the_grid_is_declared_once_and_filtered_by_method():
    assert len(GRID) == 20 and len({row.label for row in GRID}) == 20
    assert {row.method for row in grid_rows(["bm25"])} == {"bm25"} and len(grid_rows(["bm25"])) == 12
    assert [row.label for row in grid_rows(["dense"])] == [row.label for row in GRID if row.method == "dense"]


@pytest.fixture(scope="module")
def handbook():
    corpus = load_corpus(EXAMPLE, "handbook")
    return corpus, load_evaluation_set(QUERIES, corpus)


def test_sets_about_different_corpora_or_too_small_are_refused_before_scoring(handbook):
    _, full = handbook
    elsewhere = EvaluationSet(tuple(q.__class__(q.id, q.question, "other", q.references) for q in full.queries))
    with pytest.raises(AgreementError, match=r"made\.jsonl asks about corpus handbook and own\.jsonl about other"):
        check_comparable(full, elsewhere, "made.jsonl", "own.jsonl")
    with pytest.raises(AgreementError, match=r"own\.jsonl holds 4 question"):
        check_comparable(full, EvaluationSet(full.queries[:4]), "made.jsonl", "own.jsonl")


def test_scoring_both_sets_together_gives_each_set_what_evaluate_gives_it_alone(handbook):
    corpus, full = handbook
    subset = EvaluationSet(full.queries[::3])
    grid = (*(GridRow("token", {"size": 256, "overlap": 64}, method) for method in ("dense", "bm25", "hybrid")),
            GridRow("recursive", {"size": 120, "overlap": 0}, "bm25"))
    config = EvaluationConfig()
    model = config.embedder.build(None)
    progress = []
    made, own = score_grid(corpus, [full, subset], ["full", "subset"], grid, config=config, embedder=model,
                           on_chunking=progress.append)
    embedded = model.stats.texts
    assert [(p.done, p.total, p.chunking, p.methods) for p in progress] == [
        (1, 2, "token size=256 overlap=64", ("dense", "bm25", "hybrid")),
        (2, 2, "recursive size=120 overlap=0", ("bm25",))]
    assert made.labels == own.labels == tuple(row.label for row in grid)
    assert made.scores.shape == (len(full), 4) and own.scores.shape == (len(subset), 4)
    for column, row in enumerate(grid):
        for scores, evaluation_set in ((made, full), (own, subset)):
            alone = evaluate(corpus, evaluation_set, row.config(config), embedder=model, cache=None)
            assert np.array_equal(scores.scores[:, column], alone.scores.at(5)["recall"]), (row.label, scores.name)
    # One pass embedded the chunking's chunks once and every question of both sets (the BM25 chunking nothing).
    chunks = len(evaluate(corpus, subset, grid[1].config(config), embedder=model).chunks)
    assert embedded == chunks + len(full) + len(subset)


def test_head_to_head_sizes_its_parts_and_needs_a_reference_it_can_split():
    own = table("own", [[0.2, 0.5, 0.9], [0.1, 0.4, 0.8], [0.3, 0.6, 0.7], [0.0, 0.5, 1.0]] * 5)  # 20 questions
    assert head_to_head(same_rows("made", [0.1, 0.2, 0.3], questions=7), own, splits=20).size == 7
    both = head_to_head(same_rows("made", [0.1, 0.2, 0.3], questions=40), own, splits=20)
    assert (both.size, both.held_out, both.splits) == (10, 10, 20)  # half the reference at most
    # A reference of 9 splits into parts of 4 and 5, fewer than MIN_QUESTIONS on a side: no head-to-head.
    assert head_to_head(same_rows("made", [0.1, 0.2, 0.3]), table("own", [[0.2, 0.5, 0.9]] * 9), splits=20) is None
    # None asked for (splits=0): the agreement holds none.
    assert agreement(same_rows("made", [0.1, 0.2, 0.3]), own, resamples=100, splits=0).head_to_head is None


def test_a_candidate_ranking_backwards_never_comes_as_close_as_the_reference():
    own = table("own", [[0.2, 0.5, 0.9], [0.1, 0.4, 0.8], [0.3, 0.6, 0.7]] * 4)
    found = agreement(table("made", [[0.9, 0.5, 0.2], [0.8, 0.3, 0.1]] * 4), own, resamples=100, splits=200)
    versus = found.head_to_head
    # Every question of own ranks a < b < c and every one of made c < b < a: -1 and 1 in every split.
    assert (versus.candidate_median, versus.own_median, versus.closer, versus.compared) == (-1.0, 1.0, 0.0, 200)
    text = versus.sentence("made", "own")
    assert text.startswith("On equal terms (200 random splits of own into 6 and 6 questions): against the 6, 6 of "
                           "made rank the configurations at tau-b -1.00 (median) and the other 6 of own at 1.00")
    assert "made ranks closer in 0% of the splits (ties counted half)." in text and "do not reach" not in text


def test_ties_count_half_and_a_split_that_ranks_nothing_is_not_compared():
    # Every question ranks a < b < c on both sides: every split ties at 1.0, counted half.
    alike = table("own", [[0.2, 0.5, 0.9]] * 10)
    assert head_to_head(alike, alike, splits=50).closer == 0.5
    # Four questions of ten separate the configurations, the rest score them all the same: a part
    # without any of the four ranks nothing, and that split is left out of the share.
    own = table("own", [[0.2, 0.5, 0.9]] * 4 + [[1.0, 1.0, 1.0]] * 6)
    versus = head_to_head(table("made", [[0.9, 0.5, 0.2]] * 5), own, splits=400)
    undefined = int(np.sum(np.isnan(versus.own_taus) | np.isnan(versus.candidate_taus)))
    assert undefined > 0 and versus.compared == 400 - undefined and versus.closer == 0.0
    assert f"of the {versus.compared} where both rank something" in versus.sentence("made", "own")
    # A reference whose questions all score every configuration the same: nothing compares.
    flat = head_to_head(table("made", [[0.9, 0.5, 0.2]] * 5), table("own", [[1.0, 1.0, 1.0]] * 10), splits=20)
    assert flat.compared == 0 and math.isnan(flat.closer)
    assert "no split compares" in flat.sentence("made", "own")


def test_head_to_head_draws_splits_uniformly():
    # Against the exact distribution, enumerated over every split of own (5 of 10 its own part) and
    # every draw of 5 of made's 8: the share of splits where made ranks closer (ties half), and the
    # median of own's τ-b.
    rng = np.random.default_rng(3)
    own_rows, made_rows = rng.random((10, 4)), rng.random((8, 4))
    own_taus, closer, defined = [], 0.0, 0
    for part in itertools.combinations(range(10), 5):
        held = [i for i in range(10) if i not in part]
        held_means = own_rows[held].mean(axis=0)
        own_tau = brute_tau_b(own_rows[list(part)].mean(axis=0), held_means)
        own_taus.append(own_tau)
        for drawn in itertools.combinations(range(8), 5):
            made_tau = brute_tau_b(made_rows[list(drawn)].mean(axis=0), held_means)
            if not (math.isnan(made_tau) or math.isnan(own_tau)):
                defined += 1
                closer += (made_tau > own_tau) + 0.5 * (made_tau == own_tau)
    splits = 4000
    found = head_to_head(table("made", made_rows), table("own", own_rows), splits=splits, seed=1)
    share = closer / defined
    assert found.closer == pytest.approx(share, abs=4 * math.sqrt(share * (1 - share) / splits))
    values, counts = np.unique(np.round(own_taus, 9), return_counts=True)
    cdf = np.cumsum(counts) / counts.sum()
    assert np.min(np.abs(cdf - 0.5)) > 0.03  # the exact median is not at a step, where sampling could move it
    assert found.own_median == pytest.approx(values[np.searchsorted(cdf, 0.5)])
    assert set(np.round(found.own_taus, 9)) <= set(values)
