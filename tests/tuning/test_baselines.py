"""Strong baselines, the never-worse rule and the time budget (issue 17).

The expectations are written by hand: where a baseline lands in a space (nearest allowed
values worked out below), which baseline the rule falls back to on constructed per-question
scores, and which trial kinds fit in a budget given trials of known durations.
"""

from __future__ import annotations

import base64
import datetime
import json
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from tuner.embedding.config import EmbedderConfig
from tuner.evaluation.config import EvaluationConfig
from tuner.tuning import StudySpec, Weights, run_study_spec
from tuner.tuning.core.objective import Scales
from tuner.tuning.core.records import (
    BASELINE_ATTR,
    BUDGET_ATTR,
    CONFIG_ATTR,
    DUPLICATE_ATTR,
    ERROR_ATTR,
    INTERRUPTED,
    LOST_ATTR,
    RETRYABLE_ATTR,
    SKIPPED_ATTR,
    TrialRecord,
)
from tuner.tuning.outcome.summary import format_outcomes
from tuner.tuning.run.progress import EmbeddingReport
from tuner.tuning.scoring.comparisons import candidate, compare
from tuner.tuning.scoring.crossval import search_gain
from tuner.tuning.scoring.decision import decide
from tuner.tuning.scoring.optimism import optimism
from tuner.tuning.search.baselines import BASELINES, baseline_points, queue_baselines, unqueue_baselines
from tuner.tuning.search.cost import kind_of, trial_seconds
from tuner.tuning.search.domains import Domain
from tuner.tuning.search.space_file import load_search_space, parse_search_space
from tuner.tuning.study.spec import StudyError, parse_duration
from tuner.tuning.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[2]
SPACES = ROOT / "search_spaces"
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
RECALL_ONLY = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)


# --- where the baselines land ---------------------------------------------------------------------
def test_nearest_values_of_each_kind_of_domain():
    assert Domain("int", low=64, high=512, step=64).nearest(800) == 512  # clipped to the top
    assert Domain("int", low=64, high=512, step=64).nearest(300) == 320  # 64 + 4*64 is nearer than 256
    assert Domain("int", low=50, high=1000, log=True).nearest(256) == 256
    assert Domain("float", low=0.0, high=0.5).nearest(0.75) == 0.5
    assert Domain("categorical", choices=(0.0, 0.25)).nearest(0.5) == 0.25
    assert Domain("categorical", choices=("dense", "bm25")).nearest("hybrid") is None


def test_the_default_space_holds_all_nine_baselines_cheapest_first():
    points = baseline_points(load_search_space(SPACES / "default.yaml"))
    names = [name for name, _ in points]
    assert names == [b.name for b in BASELINES] and len(names) == 9
    assert [p["retrieval"] for _, p in points] == ["bm25"] * 3 + ["dense"] * 3 + ["hybrid"] * 3
    token_bm25 = dict(points)["token 800/400 bm25"]
    assert token_bm25 == {"chunker": "token", "token.size": 800, "token.overlap_fraction": 0.5, "k": 5,
                          "retrieval": "bm25", "context": "none"}
    hybrid = dict(points)["markdown 256/0 hybrid"]
    assert (hybrid["fusion"], hybrid["rrf_k"], hybrid["markdown.overlap_fraction"]) == ("rrf", 60, 0.0)


def test_baselines_are_projected_into_a_smaller_space():
    # quick.yaml: sizes 64..512 by 64, overlap shares {0, 0.25, 0.5} for token, {0, 0.25} for
    # recursive, k 1..8, dense only, no markdown chunker.
    points = dict(baseline_points(load_search_space(SPACES / "quick.yaml")))
    assert list(points) == ["token 800/400 dense", "recursive 256/0 dense"]
    assert points["token 800/400 dense"] == {"chunker": "token", "token.size": 512, "token.overlap_fraction": 0.5,
                                             "k": 5}
    assert points["recursive 256/0 dense"] == {"chunker": "recursive", "recursive.size": 256,
                                               "recursive.overlap_fraction": 0.0, "k": 5}


def test_baselines_that_project_onto_one_point_are_queued_once():
    space = parse_search_space({"k": 3, "chunkers": {"token": {"size": 100, "overlap": 0}}})
    assert [name for name, _ in baseline_points(space)] == ["token 800/400 dense"]


# --- queued once ---------------------------------------------------------------------------------
def _memory_study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(directions=["maximize", "maximize"])


def test_baselines_are_queued_once_and_again_only_when_skipped():
    space = load_search_space(SPACES / "default.yaml")
    study = _memory_study()
    assert queue_baselines(study, space, 3) == ["token 800/400 bm25", "recursive 256/0 bm25", "markdown 256/0 bm25"]
    # A second process checking in now sees them waiting: it queues the next ones, not these again.
    assert queue_baselines(study, space, 2) == ["token 800/400 dense", "recursive 256/0 dense"]
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 5
    # The run ends early: nothing is left waiting, and the next run queues them again.
    assert len(unqueue_baselines(study)) == 5
    assert not study.get_trials(states=(TrialState.WAITING,))
    assert all(SKIPPED_ATTR in t.user_attrs and t.state == TrialState.PRUNED for t in study.get_trials())
    assert len(queue_baselines(study, space, 100)) == 9
    assert queue_baselines(study, space, 100) == []


def test_a_baseline_that_failed_through_no_fault_of_its_configuration_is_queued_again():
    """Issue 30: interrupted, lost with its worker, or failed by an endpoint's outage: queued
    again; failed by its configuration, or pruned as a duplicate of a trial that settles it: not."""
    space = load_search_space(SPACES / "quick.yaml")  # two baselines: token 800/400 and recursive 256/0
    token, recursive = (name for name, _ in baseline_points(space))
    cases = {
        "interrupted": ({LOST_ATTR: INTERRUPTED}, TrialState.FAIL, True),
        "lost": ({LOST_ATTR: "its worker stopped before the trial ended"}, TrialState.FAIL, True),
        "outage": ({ERROR_ATTR: "HTTP 500 after 5 retries", RETRYABLE_ATTR: True}, TrialState.FAIL, True),
        "its own error": ({ERROR_ATTR: "input too long"}, TrialState.FAIL, False),
        "complete": ({}, TrialState.COMPLETE, False),
    }
    for case, (attrs, state, again) in cases.items():
        study = _memory_study()
        study.add_trial(optuna.trial.create_trial(state=state, values=[0.5, 0.1] if state == TrialState.COMPLETE
                                                  else None, user_attrs={BASELINE_ATTR: token, **attrs}))
        assert queue_baselines(study, space, 5) == ([token, recursive] if again else [recursive]), case
    # A duplicate counts as what its holder (trial 0) became.
    for holder_attrs, again in (({LOST_ATTR: INTERRUPTED}, True), ({ERROR_ATTR: "input too long"}, False)):
        study = _memory_study()
        for attrs, state in ((holder_attrs, TrialState.FAIL), ({DUPLICATE_ATTR: 0}, TrialState.PRUNED)):  # trials 0, 1
            study.add_trial(optuna.trial.create_trial(state=state, user_attrs={BASELINE_ATTR: token, **attrs}))
        assert queue_baselines(study, space, 5) == ([token, recursive] if again else [recursive]), holder_attrs


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def _spec(tmp_path, stub, **changes) -> StudySpec:
    values = dict(name="b", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES),
                  space=str(SPACES / "retrieval.yaml"),
                  embedder=EmbedderConfig("openai", "stub-embed", base_url=stub.base_url),
                  storage=f"sqlite:///{tmp_path}/b.db", trials=2, cache=str(tmp_path / "cache.sqlite3"))
    values.update(changes)
    return StudySpec(**values)


def _trials(spec: StudySpec) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=spec.study_name("handbook"), storage=make_storage(spec.storage)).get_trials()


def test_a_study_runs_its_baselines_first_and_a_resume_does_not_repeat_them(tmp_path, openai_server):
    spec = _spec(tmp_path, openai_server)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    # retrieval.yaml has token and recursive with dense, bm25 and hybrid: six baselines, BM25 first.
    assert [t.user_attrs.get(BASELINE_ATTR) for t in _trials(spec)] == ["token 800/400 bm25",
                                                                        "recursive 256/0 bm25"]
    outcome = run_study_spec(spec.with_options(trials=6), progress=False, echo=lambda _: None)[0]
    trials = _trials(spec)
    names = [t.user_attrs.get(BASELINE_ATTR) for t in trials]
    assert names[:6] == [b.name for b in BASELINES if b.chunker != "markdown"]
    assert names[6:] == [None, None]  # sampled trials after the baselines
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len({t.user_attrs[CONFIG_ATTR] for t in trials}) == 8
    # The summary compares with the best baseline and with the token 800/400 default.
    text = format_outcomes([outcome])
    assert "token 800/400 default" in text and "baseline" in text


# --- never worse than a baseline without saying so -----------------------------------------------
def _record(number: int, recall: list[float], *, baseline: str | None = None, cost: float = 0.1,
            search: np.ndarray) -> TrialRecord:
    recall_arr = np.asarray(recall, dtype="<f4")
    encoded = {metric: base64.b64encode((recall_arr if metric == "recall" else np.zeros_like(recall_arr))
                                        .tobytes()).decode("ascii")
               for metric in ("recall", "precision", "iou", "precision_omega")}
    attrs = {"score": float(np.mean(recall_arr[search])), "recall": float(np.mean(recall_arr[search])),
             "latency_ms": 100.0, "cost_usd_per_1k_queries": cost, "chunks": 10}
    if baseline:
        attrs[BASELINE_ATTR] = baseline
    return TrialRecord.from_attrs(number, attrs, TrialState.COMPLETE,
                                  {"k": 5, "queries": len(recall), **encoded})


SEARCH = np.array([True] * 40 + [False] * 40)


def _decided(records: list[TrialRecord], baselines: list[TrialRecord]):
    """The product's decision (:func:`decide`) on ``records``, with its cross-validated gain."""
    candidates = [candidate(r) for r in records]
    reference = [candidate(r) for r in baselines]
    gain = search_gain(candidates, reference, None, RECALL_ONLY, Scales())
    return decide(candidates, reference, gain, RECALL_ONLY, Scales())


def test_a_search_choice_better_on_every_question_stands():
    tuned = _record(7, [0.9] * 80, search=SEARCH)
    base = _record(1, [0.5] * 80, baseline="token 800/400 dense", search=SEARCH)
    decision = _decided([tuned, base], [base])
    assert (decision.search_choice, decision.recommended, decision.fell_back) == (7, 7, False)
    # Every fold gains exactly 0.4: nothing varies, so the gain is significant at any level.
    assert decision.gain.over_best_baseline.score == pytest.approx(0.4) and decision.gain.beats


def test_a_search_choice_that_only_wins_by_selection_falls_back_to_the_best_baseline():
    # 40 questions; candidate i answers question i fully and the others at 0.3, like the baselines
    # everywhere. On all questions each looks 0.0175 better than the baselines, so the highest score is
    # candidate 10 (the lowest number of the tied); but on any fold the one chosen on the other folds
    # answers a question outside the fold: it scores 0.3, exactly the baseline. The gain is 0.
    search = np.ones(40, dtype=bool)
    choices = [_record(10 + i, [1.0 if q == i else 0.3 for q in range(40)], search=search) for i in range(40)]
    best_base = _record(1, [0.3] * 40, baseline="recursive 256/0 hybrid", cost=0.5, search=search)
    cheap_tied = _record(2, [0.3] * 40, baseline="recursive 256/0 bm25", cost=0.01, search=search)
    decision = _decided([*choices, best_base, cheap_tied], [best_base, cheap_tied])
    assert decision.search_choice == 10 and decision.fell_back
    assert decision.gain.over_best_baseline.score == pytest.approx(0.0)
    # The best baseline itself is recommended (the lower trial number of the two tied): no rule picks
    # among the baselines a second time by cost (issue 27).
    assert decision.recommended == 1


def test_a_search_choice_tied_with_a_baseline_on_every_question_mean_is_the_baseline():
    rng = np.random.default_rng(3)
    scores = rng.random(80)
    tuned = _record(7, list(scores), search=SEARCH)
    base = _record(1, list(scores[::-1]), baseline="markdown 256/0 hybrid", search=SEARCH)
    decision = _decided([tuned, base], [base])
    # The same mean: the lower trial number is the highest score, and it is a baseline.
    assert decision.search_choice == 1 and decision.recommended == 1 and not decision.fell_back


def test_compare_is_paired_over_the_chosen_questions():
    a = candidate(_record(1, [1.0, 0.0] * 20 + [0.5] * 40, search=SEARCH))
    b = candidate(_record(2, [0.0, 1.0] * 20 + [0.25] * 40, search=SEARCH))
    on_search = compare(a, b, RECALL_ONLY, Scales(), SEARCH)
    on_held_out = compare(a, b, RECALL_ONLY, Scales(), ~SEARCH)
    assert on_search.difference == pytest.approx(0.0) and not on_search.better and not on_search.worse
    # Held out: 0.5 - 0.25 on every question, so every resample gives exactly +0.25.
    assert (on_held_out.difference, on_held_out.low, on_held_out.high) == pytest.approx((0.25, 0.25, 0.25))
    assert on_held_out.recall_difference == pytest.approx(0.25) and on_held_out.questions == 40


def test_an_optimism_gap_beyond_the_held_out_interval_is_flagged():
    record = _record(1, [1.0] * 40 + [0.5, 0.6] * 20, search=SEARCH)
    found = optimism(record, SEARCH, RECALL_ONLY, Scales())
    assert found.gap == pytest.approx(0.45, abs=1e-6) and found.beyond_interval
    steady = optimism(_record(2, [0.5, 0.6] * 40, search=SEARCH), SEARCH, RECALL_ONLY, Scales())
    assert steady.gap == pytest.approx(0.0, abs=1e-6) and not steady.beyond_interval


# --- the time budget ------------------------------------------------------------------------------
def test_durations_parse_as_a_user_writes_them():
    assert parse_duration("45m", "timeout") == 2700
    assert parse_duration("2h", "timeout") == 7200
    assert parse_duration("90s", "timeout") == 90
    assert parse_duration(30, "timeout") == 30
    for bad in ("0", "-5m", "soon", "", True):
        with pytest.raises(StudyError, match="timeout="):
            parse_duration(bad, "timeout")


def test_a_trial_is_priced_by_the_median_of_its_kind_else_cold():
    dense = {"chunker": {"name": "token"}, "retrieval": {"method": "dense"}}
    bm25 = {"chunker": {"name": "token"}, "retrieval": {"method": "bm25"}}
    semantic = {"chunker": {"name": "kamradt"}, "retrieval": {"method": "bm25"}}
    assert (kind_of(dense), kind_of(bm25), kind_of(semantic)) == ("dense", "bm25", "semantic")
    study = optuna.create_study(directions=["maximize", "maximize"])
    for _ in range(3):
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE, values=[0.5, 0.1],
            user_attrs={CONFIG_ATTR: json.dumps(dense)}))
    trials = study.get_trials(deepcopy=False)  # the stored trials themselves: set their durations
    start = datetime.datetime(2026, 1, 1)
    for trial, seconds in zip(trials, (100, 300, 200)):
        trial.datetime_start = start
        trial.datetime_complete = start + datetime.timedelta(seconds=seconds)
    assert trial_seconds(study, dense, cold_seconds=999) == 200  # the median of 100, 300, 200
    assert trial_seconds(study, bm25, cold_seconds=3) == 3  # no BM25 trial yet: its cold price


def test_a_configuration_that_cannot_finish_in_the_budget_is_not_started(tmp_path, openai_server):
    """A budget that ends at once: every proposal is pruned as out of budget before it claims a
    slot, the worker stops, no trial is left waiting or running, and the summary says why."""
    spec = _spec(tmp_path, openai_server, trials=None, timeout=0.001)
    outcome = run_study_spec(spec, progress=False, echo=lambda _: None)[0]
    trials = _trials(spec)
    assert outcome.budget_ended and outcome.added == 0
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert "the time budget" in format_outcomes([outcome])
    assert "before its end" not in format_outcomes([outcome])  # it ended at its end


def test_a_budget_lets_cheap_trials_run_and_stops_expensive_ones(tmp_path, openai_server):
    """BM25 baselines (priced at their cold price, 0 s: they embed nothing) fit; dense ones are
    priced from the calibrated embedding throughput, made here to say an hour per trial."""
    from tuner.tuning.run import trial as trial_module
    spec = _spec(tmp_path, openai_server, trials=None, timeout=60, full_budget=True)  # the budget's own end
    original = trial_module.TrialObjective.cold_seconds
    trial_module.TrialObjective.cold_seconds = lambda self, config: 0.0 if not config.retrieval.embeds else 3600.0
    try:
        outcome = run_study_spec(spec, progress=False, echo=lambda _: None)[0]
    finally:
        trial_module.TrialObjective.cold_seconds = original
    trials = _trials(spec)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert complete and all(json.loads(t.user_attrs[CONFIG_ATTR])["retrieval"]["method"] == "bm25"
                            for t in complete)
    assert [t.user_attrs[BASELINE_ATTR] for t in complete[:2]] == ["token 800/400 bm25", "recursive 256/0 bm25"]
    over = [t for t in trials if BUDGET_ATTR in t.user_attrs]
    assert over and all(t.state == TrialState.PRUNED for t in over)
    assert outcome.budget_ended
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]


def test_a_budget_nothing_fits_in_says_it_ended_the_run_early(tmp_path, openai_server):
    """Every configuration priced at an hour against a 10-minute budget: nothing starts, the worker
    stops after its proposals in a row do not fit, and the summary says the budget ended the run
    minutes before its end because nothing fitted (not only that it ended)."""
    from tuner.tuning.run import trial as trial_module
    spec = _spec(tmp_path, openai_server, trials=None, timeout=600, full_budget=True)
    original = trial_module.TrialObjective.cold_seconds
    trial_module.TrialObjective.cold_seconds = lambda self, config: 3600.0
    try:
        outcome = run_study_spec(spec, progress=False, echo=lambda _: None)[0]
    finally:
        trial_module.TrialObjective.cold_seconds = original
    assert outcome.budget_ended and outcome.added == 0
    assert outcome.budget_left > 500  # the proposals are refused in seconds
    said = format_outcomes([outcome])
    assert "ended the run after 0 trial(s), " in said
    assert " min before its end: no trial the sampler proposed fitted in what was left" in said


# --- honest progress -------------------------------------------------------------------------------
def test_a_quiet_trial_still_says_something_every_interval():
    now = [0.0]
    lines: list[str] = []
    with EmbeddingReport(3, every_s=30.0, write=lines.append, clock=lambda: now[0]):
        now[0] = 31.0
        deadline = time.monotonic() + 5
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
    assert lines == ["trial 3: still working (chunking or scoring), 31 s so far"]


def test_the_eta_comes_from_the_rate_measured_in_this_trial():
    now = [0.0]
    lines: list[str] = []
    report = EmbeddingReport(5, write=lines.append, clock=lambda: now[0])
    report(0, 1000)
    now[0] = 60.0
    report(100, 1000)  # 100 texts in 60 s: 900 more take 540 s = 9 min
    assert lines == ["trial 5: embedded 100 of 1,000 texts (10%), about 9 min left"]


# --- labels -----------------------------------------------------------------------------------------
def test_labels_show_every_parameter():
    sentence = TrialRecord.from_attrs(1, {"chunker": "sentence", "params": {"sentences": 4, "overlap": 1}, "k": 5})
    kamradt = TrialRecord.from_attrs(2, {"chunker": "kamradt", "params": {"buffer_size": 1,
                                                                         "threshold_type": "percentile",
                                                                         "threshold": 95.0}, "k": 7})
    token = TrialRecord.from_attrs(3, {"chunker": "token", "params": {"size": 256, "overlap": 64}, "k": 5,
                                       "retrieval": "bm25"})
    assert sentence.label() == "sentence sentences=4 overlap=1 k=5"
    assert kamradt.label() == "kamradt buffer_size=1 threshold_type=percentile threshold=95 k=7"
    assert token.label() == "token 256/64 k=5 bm25"


def test_config_kind_matches_evaluation_config_spelling():
    config = EvaluationConfig.from_dict({"chunker": {"name": "recursive", "params": {"size": 100, "overlap": 0}},
                                         "retrieval": {"k": 3, "method": "hybrid"}})
    assert kind_of(config.to_dict()) == "dense"


def test_the_cold_price_counts_each_embedding_pass():
    """A corpus of 1,000 tokens at 100 tokens/s: BM25 alone embeds nothing; dense retrieval
    embeds the chunks once (10 s); a semantic chunker embeds its units too, with BM25 (10 s)
    or with dense retrieval (20 s)."""
    from types import SimpleNamespace

    from tuner.tuning.run.trial import TrialObjective

    fake = SimpleNamespace(_corpus_tokens=None, corpus=SimpleNamespace(token_count=lambda: 1000),
                           rates_for=lambda _: SimpleNamespace(embed_tokens_per_s=100.0),
                           _calibrated=lambda _: None)  # no machine calibration: the study's rate
    fake._rate = lambda embedder: TrialObjective._rate(fake, embedder)
    fake.corpus_tokens = lambda: TrialObjective.corpus_tokens(fake)

    def price(chunker: dict, method: str) -> float:
        config = EvaluationConfig.from_dict({"chunker": chunker, "retrieval": {"k": 3, "method": method}})
        return TrialObjective.cold_seconds(fake, config)

    token = {"name": "token", "params": {"size": 100, "overlap": 0}}
    semantic = {"name": "kamradt", "params": {}}
    assert (price(token, "bm25"), price(token, "dense")) == (0.0, 10.0)
    assert (price(semantic, "bm25"), price(semantic, "dense")) == (10.0, 20.0)


def test_a_comparison_on_some_questions_cuts_every_weighed_metric_alike():
    """Weights on another metric than recall and IoU (here MRR) are read on the same questions as
    recall: comparing on the held-out part must not lose the MRR arrays (it raised before)."""
    from tuner.tuning.scoring.comparisons import Candidate

    mrr_a, mrr_b = np.array([1.0, 1.0, 0.5, 0.5]), np.array([0.5, 0.5, 0.5, 0.5])
    a = Candidate(1, np.ones(4), np.zeros(4), 0.0, 0.0, 1, {"mrr": mrr_a})
    b = Candidate(2, np.ones(4), np.zeros(4), 0.0, 0.0, 1, {"mrr": mrr_b})
    mrr_only = Weights(recall=0.0, iou=0.0, latency=0.0, cost=0.0, mrr=1.0)
    held_out = np.array([False, False, True, True])
    # On the held-out questions both have MRR 0.5: no difference at all in any resample.
    same = compare(a, b, mrr_only, Scales(), held_out)
    assert (same.difference, same.low, same.high, same.better) == (0.0, 0.0, 0.0, False)
    # On the search questions, A's MRR is 1.0 against 0.5 in every resample.
    ahead = compare(a, b, mrr_only, Scales(), ~held_out)
    assert (ahead.difference, ahead.low, ahead.high) == (0.5, 0.5, 0.5)
