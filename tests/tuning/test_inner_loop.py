"""The inner loop (``inner_loop: true``): a trial samples the chunking, method and context, and scores
every ``k`` and every fusion with each of its values from one ranking per question. Each point must
score what a separate evaluation of that configuration scores, the trial must record its best point,
and any point must export."""

from __future__ import annotations

import dataclasses
import json

import optuna
import pytest
from optuna.trial import TrialState

import tuner
from tuner.cli import main
from tuner.embedding.config import EmbedderConfig
from tuner.evaluation.config import EvaluationConfig
from tuner.evaluation.fidelity import Fidelity
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.search.domains import SearchSpaceError
from tuner.tuning.search.space_file import parse_search_space
from tuner.tuning.study.storage import make_storage

from fakes import save_sentence_transformer, word_corpus

SPACE = """
inner_loop: true
k: {type: int, low: 1, high: 3}
chunkers:
  token:
    size: {type: int, low: 6, high: 16, step: 2}
    overlap: {type: fraction, of: size, choices: [0.0, 0.25]}
retrieval:
  method: [bm25, hybrid]
  fusion: [rrf, weighted]
  alpha: {type: float, low: 0.0, high: 1.0, step: 0.5}
  rrf_k: [10, 60]
"""
#: A hybrid trial's points: 3 cut-offs x (rrf at 10 and 60, weighted at alpha 0, 0.5 and 1).
HYBRID_POINTS = {(k, "rrf", 10) for k in (1, 2, 3)} | {(k, "rrf", 60) for k in (1, 2, 3)} | {
    (k, "weighted", alpha) for k in (1, 2, 3) for alpha in (0.0, 0.5, 1.0)}


def _run(root, name: str, fidelity: Fidelity | None = None, trials: int = 8):
    model = save_sentence_transformer(root / "model", max_seq_length=16)
    folder, questions = word_corpus(root, "words")
    space = root / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    spec = StudySpec(name=name, corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{root}/{name}.db", trials=trials, cache=str(root / "cache.sqlite3"),
                     validation=0, **({"fidelity": fidelity} if fidelity is not None else {}))
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = optuna.load_study(study_name=f"{name}/words",
                               storage=make_storage(spec.storage, heartbeat_interval=None)).trials
    return spec, folder, questions, outcome, trials


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("inner"), "inner")


def _evaluate(folder, questions, config: EvaluationConfig):
    corpus = tuner.load_corpus(folder)
    return tuner.evaluate(corpus, tuner.load_evaluation_set(questions, corpus), config, cache=None)


def _sampled(trials):
    return [t for t in trials if t.state == TrialState.COMPLETE and "baseline" not in t.user_attrs]


def test_a_trial_samples_no_query_time_setting_and_scores_every_point(study):
    *_, trials = study
    sampled = _sampled(trials)
    assert sampled
    for trial in sampled:
        assert not {"k", "fusion", "alpha", "rrf_k"} & set(trial.params)
        points = {(p["k"], p.get("fusion"), p.get("alpha", p.get("rrf_k"))) for p in trial.user_attrs["inner_points"]}
        if trial.params["retrieval"] == "hybrid":
            assert points == HYBRID_POINTS
        else:
            assert points == {(1, None, None), (2, None, None), (3, None, None)}
    # The summary counts the points: 15 per hybrid trial, 3 per BM25 trial.
    outcome = study[3]
    expected = sum(15 if t.params["retrieval"] == "hybrid" else 3 for t in sampled)
    assert outcome.summary.points == expected
    assert f"; {expected:,} query-time points scored in their inner loops" in outcome.summary.describe()
    # A baseline is the configuration it names: sampled k, no inner loop.
    baselines = [t for t in trials if "baseline" in t.user_attrs and t.state == TrialState.COMPLETE]
    assert baselines and all("k" in t.params and "inner_points" not in t.user_attrs for t in baselines)


def test_every_point_scores_as_its_own_evaluation(study):
    _, folder, questions, _, trials = study
    trial = next(t for t in _sampled(trials) if t.params["retrieval"] == "hybrid")
    recorded = EvaluationConfig.from_dict(json.loads(trial.user_attrs["config"]))
    for point in trial.user_attrs["inner_points"]:
        retrieval = dataclasses.replace(recorded.retrieval, k=point["k"], fusion=point["fusion"],
                                        alpha=point.get("alpha"), rrf_k=point.get("rrf_k"))
        result = _evaluate(folder, questions, dataclasses.replace(recorded, retrieval=retrieval))
        for metric in ("recall", "iou", "precision"):
            assert point[metric] == pytest.approx(result.metrics["overall"][metric]["mean"], abs=1e-9), (point, metric)


def test_the_trial_records_its_best_point(study):
    _, folder, questions, _, trials = study
    for trial in _sampled(trials):
        points = trial.user_attrs["inner_points"]
        best = max(points, key=lambda p: p["score"])
        assert trial.user_attrs["score"] == pytest.approx(best["score"], abs=1e-12)
        config = json.loads(trial.user_attrs["config"])
        assert config["retrieval"]["k"] == trial.user_attrs["k"]
        assert trial.user_attrs["recall"] == pytest.approx(
            _evaluate(folder, questions, EvaluationConfig.from_dict(config)).metrics["overall"]["recall"]["mean"],
            abs=1e-9)


def test_under_a_constraint_the_trial_records_its_best_feasible_point(study, tmp_path):
    # A context budget that the largest k breaks on some trials: the trial records the best point within
    # the budget, not the best point that the constraint would then make infeasible.
    spec, *_, trials = study
    at_two = [p["context_tokens"] for t in _sampled(trials) for p in t.user_attrs["inner_points"] if p["k"] == 2]
    limit = sorted(at_two)[len(at_two) // 2]
    root = tmp_path
    constrained = dataclasses.replace(spec, name="budget", storage=f"sqlite:///{root}/budget.db",
                                      constraints=dataclasses.replace(spec.constraints, context_tokens=limit))
    run_study_spec(constrained, progress=False, echo=lambda _: None)
    finished = optuna.load_study(study_name="budget/words",
                                 storage=make_storage(constrained.storage, heartbeat_interval=None)).trials
    checked = 0
    for trial in _sampled(finished):
        points = trial.user_attrs["inner_points"]
        within = [p for p in points if p["context_tokens"] <= limit]
        if not within:
            continue
        best = max(within, key=lambda p: p["score"])
        assert trial.user_attrs["context_tokens"] <= limit
        assert trial.user_attrs["score"] == pytest.approx(best["score"], abs=1e-12)
        checked += 1
    assert checked and any(max(p["context_tokens"] for p in t.user_attrs["inner_points"]) > limit
                           for t in _sampled(finished))  # the budget did rule points out


def test_any_point_exports(study, tmp_path, capsys):
    spec, folder, questions, _, trials = study
    trial = next(t for t in _sampled(trials) if t.params["retrieval"] == "hybrid")
    out = tmp_path / "point.json"
    code = main(["export", "--study", "inner", "--storage", spec.storage, "--trial", str(trial.number),
                 "--point", "k=2,fusion=weighted,alpha=0.5", "-o", str(out)])
    assert code == 0
    said = capsys.readouterr().out
    assert f"trial {trial.number} of inner/words" in said and "k=2, hybrid weighted(alpha=0.5)" in said
    exported = json.loads(out.read_text())
    retrieval = exported["config"]["retrieval"]
    assert (retrieval["k"], retrieval["fusion"], retrieval["alpha"]) == (2, "weighted", 0.5)
    assert "rrf_k" not in retrieval
    result = _evaluate(folder, questions, EvaluationConfig.from_dict(exported["config"]))
    assert exported["metrics"]["recall"] == pytest.approx(result.metrics["overall"]["recall"]["mean"], abs=1e-9)
    # A point the trial did not score: exit 2, the points it has, nothing written.
    missing = tmp_path / "missing.json"
    code = main(["export", "--study", "inner", "--storage", spec.storage, "--trial", str(trial.number),
                 "--point", "k=7", "-o", str(missing)])
    err = capsys.readouterr().err
    assert code == 2 and "scored no point" in err and "k 1, 2, 3" in err and "Traceback" not in err
    assert not missing.exists()


def test_the_proxy_scores_points_and_its_best_is_confirmed_at_full_fidelity(tmp_path):
    *_, folder, questions, _, trials = _run(tmp_path, "proxied", Fidelity(rungs=(1.0,), proxy="late"), trials=6)
    screened = [t for t in trials if t.user_attrs.get("stopped_at_fidelity") == "late"]
    assert screened and all("inner_points" in t.user_attrs for t in screened)
    confirmations = [t for t in trials if "confirms_trial" in t.user_attrs and t.state == TrialState.COMPLETE]
    assert confirmations
    for trial in confirmations:  # its best point at full fidelity, as a separate evaluation scores it
        config = EvaluationConfig.from_dict(json.loads(trial.user_attrs["config"]))
        assert not config.embedder.late_chunking
        assert trial.user_attrs["recall"] == pytest.approx(
            _evaluate(folder, questions, config).metrics["overall"]["recall"]["mean"], abs=1e-9)


def test_an_inner_loop_needs_a_finite_list_of_fusion_values():
    with pytest.raises(SearchSpaceError, match=r"retrieval\.alpha"):
        parse_search_space({"inner_loop": True, "k": 3, "chunkers": {"token": {"size": 64}},
                            "retrieval": {"method": "hybrid", "fusion": "weighted",
                                          "alpha": {"type": "float", "low": 0.0, "high": 1.0}}})
    with pytest.raises(SearchSpaceError, match="inner_loop='yes' is invalid; allowed: true or false"):
        parse_search_space({"inner_loop": "yes", "k": 3, "chunkers": {"token": {"size": 64}}})
    space = parse_search_space({"inner_loop": True, "k": {"type": "int", "low": 1, "high": 4},
                                "chunkers": {"token": {"size": {"type": "categorical", "choices": [64, 128]}}},
                                "retrieval": {"method": ["dense", "hybrid"], "fusion": ["rrf", "weighted"],
                                              "alpha": [0.2, 0.8], "rrf_k": [60]}})
    # An exhaustive grid leaves out what each trial scores inside: 2 sizes x 2 methods.
    assert sorted((p["token.size"], p["retrieval"]) for p in space.grid()) == [
        (64, "dense"), (64, "hybrid"), (128, "dense"), (128, "hybrid")]
    assert space.inner_ks() == [1, 2, 3, 4]
