"""The decision bar (benchmarks/decision_bar.py) on constructed per-question scores whose
verdicts are known by construction."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from bench import import_benchmark

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = 80


@pytest.fixture(scope="module")
def bar():
    return import_benchmark("decision_bar")


def grid(configs: int = 20, seed: int = 1) -> dict[str, np.ndarray]:
    """Configurations whose true means are 0.04 apart (c00 best at 0.95, then 0.91, ...),
    per-question scores uniform within +-0.05 of the mean: every pair is far apart."""
    rng = np.random.default_rng(seed)
    return {f"c{i:02d}": np.clip(0.95 - 0.04 * i + rng.uniform(-0.05, 0.05, QUESTIONS), 0, 1)
            for i in range(configs)}


def test_identical_paths_pass(bar):
    scores = grid()
    verdict = bar.decision_bar(scores, {k: v.copy() for k, v in scores.items()})
    assert verdict.passed and verdict.recommendation_kept and verdict.scores_kept
    assert verdict.mean_abs_difference == 0.0
    assert verdict.reference.recommended == verdict.fast.recommended == "c00"
    assert verdict.configurations == 20 and verdict.questions == QUESTIONS
    # Half-width of a mean of uniform(+-0.05) scores: 1.96 * (0.1 / sqrt(12)) / sqrt(80) = 0.00633.
    assert verdict.median_half_width == pytest.approx(1.96 * 0.1 / math.sqrt(12) / math.sqrt(QUESTIONS), rel=0.15)


def test_recommendation_moved_far_fails_criterion_1(bar):
    scores = grid()
    fast = dict(scores)
    fast["c00"], fast["c19"] = scores["c19"], scores["c00"]  # the worst becomes the best and back
    verdict = bar.decision_bar(scores, fast)
    assert verdict.fast.recommended == "c19" and verdict.reference.recommended == "c00"
    assert not verdict.fast_in_reference_ties and not verdict.reference_in_fast_ties
    assert not verdict.recommendation_kept and not verdict.passed


def test_small_noise_passes(bar):
    scores = grid()
    rng = np.random.default_rng(7)
    fast = {k: v + rng.uniform(-1e-4, 1e-4, QUESTIONS) for k, v in scores.items()}
    verdict = bar.decision_bar(scores, fast)
    # The mean of 80 uniform(+-1e-4) draws is about 1e-5: far below 0.1 x 0.0063.
    assert verdict.mean_abs_difference < 3e-5
    assert verdict.passed


def test_systematic_shift_fails_criterion_2(bar):
    scores = grid()
    fast = {k: v + 0.002 for k, v in scores.items()}  # every configuration, every question: +0.002
    verdict = bar.decision_bar(scores, fast)
    assert verdict.recommendation_kept  # the ranking is untouched
    assert verdict.mean_abs_difference == pytest.approx(0.002)
    assert verdict.threshold == pytest.approx(0.1 * verdict.median_half_width)
    assert not verdict.scores_kept and not verdict.passed  # 0.002 > 0.1 x 0.0063


def test_tied_configurations_and_the_cheapest(bar):
    rng = np.random.default_rng(3)
    best = rng.uniform(0.5, 1.0, QUESTIONS)
    twin = best.copy()
    twin[:2] -= 0.01  # 0.00025 lower on average: statistically tied with the best
    scores = {"a": best, "b": twin, "c": best - 0.3}
    cheap = {"a": (2.0,), "b": (1.0,), "c": (0.0,)}
    verdict = bar.decision_bar(scores, scores, cheapness=cheap)
    assert verdict.reference.best == "a"
    assert set(verdict.reference.tied) == {"a", "b"}  # c is 0.3 worse on every question
    assert verdict.reference.recommended == "b"  # the cheapest of the tied, not c (cheaper but worse)


def test_mismatched_paths_are_refused(bar):
    scores = grid(3)
    with pytest.raises(ValueError, match="same configurations"):
        bar.decision_bar(scores, {"c00": scores["c00"]})
    with pytest.raises(ValueError, match="same questions"):
        bar.decision_bar(scores, {k: v[:10] for k, v in scores.items()})


def test_fidelity_rungs_that_rank_as_full_pass(bar):
    full = grid()
    low = {0.1: {k: float(v.mean()) - 0.3 for k, v in full.items()}}  # same ranking, lower scores
    verdict = bar.judge_fidelity(full, low, (0.1, 1.0), 3, trials=10, simulations=1000)
    # The best of any arrival order outranks everything seen before it, so it is always promoted.
    assert verdict.in_ties == 1.0 and verdict.passed
    assert verdict.simulations == 1000 and verdict.trials == 10


def test_fidelity_rungs_that_invert_the_ranking_fail(bar):
    full = grid()
    low = {0.1: {k: -float(v.mean()) for k, v in full.items()}}  # the best looks worst at 10%
    verdict = bar.judge_fidelity(full, low, (0.1, 1.0), 3, trials=10, simulations=1000, seeds=(0, 1))
    assert len(verdict.by_seed) == 2 and verdict.in_ties == min(verdict.by_seed)
    # The trials' best (tied with nothing) is promoted only when it arrives first: 1 order in 10.
    assert verdict.in_ties == pytest.approx(0.1, abs=0.03)
    assert not verdict.passed


def test_fidelity_needs_a_thousand_orders(bar):
    full = grid(3)
    with pytest.raises(ValueError, match="at least 1000"):
        bar.judge_fidelity(full, {0.1: {k: 0.0 for k in full}}, (0.1, 1.0), 3, simulations=999)


def test_criterion_1_in_simulated_studies(bar):
    scores = grid()
    assert bar.studies_kept(scores, dict(scores), trials=10) == 1.0
    fast = dict(scores)
    fast["c00"], fast["c19"] = scores["c19"], scores["c00"]
    # A study keeps its recommendation only when it holds neither swapped configuration:
    # C(18, 10) / C(20, 10) = 43758 / 184756 = 0.237 of the 10-trial studies.
    assert bar.studies_kept(scores, fast, trials=10) == pytest.approx(43758 / 184756, abs=0.04)


def test_confirming_the_proxys_best_keeps_the_recommendation_when_the_best_is_confirmed(bar):
    full = grid()
    means = {k: float(v.mean()) for k, v in full.items()}
    assert bar.judge_confirmed(full, means, 1, trials=10).in_ties == 1.0
    swapped = dict(means)
    swapped["c00"], swapped["c01"] = means["c01"], means["c00"]  # the proxy puts the best second
    # Confirming one misses exactly when a study holds both c00 and c01:
    # C(18, 8) / C(20, 10) = 43758 / 184756 = 0.237 of the 10-trial studies.
    one = bar.judge_confirmed(full, swapped, 1, trials=10)
    assert one.in_ties == pytest.approx(1 - 43758 / 184756, abs=0.04) and not one.passed
    three = bar.judge_confirmed(full, swapped, 3, trials=10)
    assert three.in_ties == 1.0 and three.passed and three.work == pytest.approx(0.3)
    with pytest.raises(ValueError, match="at least 1000"):
        bar.judge_confirmed(full, means, 1, simulations=10)


def test_a_random_pick_is_in_the_ties_as_often_as_chance_says(bar):
    full = grid()
    # Every pair is far apart, so one random confirmation of 10 trials is the study's best 1 time in 10.
    said = bar.judge_rule(full, bar.at_random(1), trials=10)
    assert said.in_ties == pytest.approx(0.1, abs=0.03) and not said.passed and said.confirmed == 1


def test_distinct_chunkings_reach_a_best_the_proxys_top_three_all_share_a_chunking_with_others(bar):
    full = grid()
    names = sorted(full)
    proxy = {name: -i for i, name in enumerate(names)}
    proxy["c00"] = -3.5  # the true best, fourth by proxy, behind c01-c03
    chunking = {name: "x" if name in ("c01", "c02", "c03") else name for name in names}
    plain = bar.judge_rule(full, bar.top_by(proxy, names, 3), trials=20)
    assert plain.in_ties == 0.0  # c01, c02, c03 confirmed; c00 never
    # c01, then c02 and c03 passed over (chunking x again), c00, then c04.
    distinct = bar.judge_rule(full, bar.top_by(proxy, names, 3, chunking), trials=20)
    assert distinct.in_ties == 1.0 and distinct.regret == 0.0 and distinct.confirmed == 3
    only_one = {name: "x" for name in names}  # fewer distinct chunkings than asked: the next best by proxy
    assert bar.top_by(proxy, names, 3, only_one)(list(range(20)), None) == [1, 2, 3]


def test_weights_draw_the_studies_trials_and_the_regret_is_in_score_points(bar):
    full = grid()
    names = sorted(full)
    weights = [1.0 if i < 10 else 1e-12 for i in range(len(names))]
    means = {name: float(np.mean(full[name])) for name in names}
    said = bar.judge_rule(full, bar.at_random(1), trials=10, weights=weights, simulations=2000)
    # The ten heavy configurations are (almost) always the study; a random one is picked from them.
    expected = 100 * np.mean([means["c00"] - means[f"c{i:02d}"] for i in range(10)])
    assert said.regret == pytest.approx(expected, rel=0.08)


def test_the_examples_in_the_decision_bars_docstrings_hold(bar):
    import doctest

    assert doctest.testmod(bar).failed == 0
