"""A late-chunking proxy rung (``fidelity: {proxy: late, ...}``): each trial is first scored with
vectors pooled from the documents' token embeddings, computed once per embedder; the best
``1/reduction`` climb to full fidelity, whose results are those of an ordinary evaluation."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState

import tuner
from tuner.embedding.config import EmbedderConfig
from tuner.evaluation.config import EvaluationConfig
from tuner.evaluation.fidelity import Fidelity
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.study.storage import make_storage

from fakes import save_sentence_transformer, word_corpus

SPACE = """
k: {type: int, low: 1, high: 3}
chunkers:
  token:
    size: {type: int, low: 6, high: 16, step: 2}
    overlap: {type: fraction, of: size, choices: [0.0, 0.25]}
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("proxy")
    model = save_sentence_transformer(root / "model", max_seq_length=16)
    folder, questions = word_corpus(root, "words")
    space = root / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    spec = StudySpec(name="p", corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{root}/p.db", trials=10, cache=str(root / "cache.sqlite3"), validation=0,
                     fidelity=Fidelity(rungs=(1.0,), reduction=2, proxy="late"))
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = optuna.load_study(study_name="p/words", storage=make_storage(spec.storage, heartbeat_interval=None)).trials
    return spec, root, folder, questions, outcome, trials


def test_trials_climb_from_the_proxy_rung_and_only_some_reach_full_fidelity(study):
    *_, outcome, trials = study
    rung = [t for t in trials if "rung_scores" in t.user_attrs]
    assert rung and all(set(t.user_attrs["rung_scores"]) == {"late"} for t in rung)
    stopped = [t for t in rung if t.state == TrialState.PRUNED]
    climbed = [t for t in rung if t.state == TrialState.COMPLETE]
    assert stopped and climbed
    assert all(t.user_attrs["stopped_at_fidelity"] == "late" for t in stopped)
    assert all("stopped_at_fidelity" not in t.user_attrs for t in climbed)
    # The summary says how many configurations were seen only at the proxy.
    assert outcome.summary.stopped_at == {"late": len(stopped)}
    assert f"{len(stopped)} stopped at low fidelity ({len(stopped)} at the late proxy)" in outcome.summary.describe()


def test_a_trial_that_climbed_scores_as_an_ordinary_full_evaluation(study):
    _, _, folder, questions, _, trials = study
    climbed = next(t for t in trials if t.state == TrialState.COMPLETE and "rung_scores" in t.user_attrs)
    config = EvaluationConfig.from_dict(json.loads(climbed.user_attrs["config"]))
    assert not config.embedder.late_chunking  # the full rung embeds each chunk's text, as production does
    corpus = tuner.load_corpus(folder)
    result = tuner.evaluate(corpus, tuner.load_evaluation_set(questions, corpus), config, cache=None)
    assert climbed.user_attrs["recall"] == pytest.approx(result.metrics["overall"]["recall"]["mean"], abs=1e-12)


def test_the_pass_over_the_corpus_is_paid_once(study):
    _, root, _, _, _, trials = study
    cached = sorted((root / "cache-late-chunking").rglob("*.npz"))
    assert len(cached) == 3  # one file per document, however many trials were scored by the proxy
    assert len([t for t in trials if "rung_scores" in t.user_attrs]) > 3


def test_the_dry_run_prices_the_proxy_pass_once(study):
    from tuner.tuning.search.plan import format_plan, plan_run

    spec, *_ = study
    text = format_plan(spec, plan_run(spec))
    assert "a late-chunking proxy rung first: one pass over the corpus per embedder" in text


def _objective(spec, folder, questions, cache):
    from tuner.embedding import EmbeddingCache
    from tuner.tuning.run.trial import TrialObjective
    from tuner.tuning.study.settings import StudySettings

    stored = optuna.load_study(study_name="p/words", storage=make_storage(spec.storage, heartbeat_interval=None))
    corpus = tuner.load_corpus(folder, name="words")
    objective = TrialObjective(corpus, tuner.load_evaluation_set(questions, corpus), StudySettings.of(stored),
                               EmbeddingCache(cache))
    return stored, corpus, objective


def test_a_proxy_trial_is_priced_by_its_first_rung_and_the_pass_only_while_it_is_unpaid(study, tmp_path):
    import statistics
    from types import SimpleNamespace

    from tuner.text.tokens import count_tokens

    spec, root, folder, questions, _, trials = study
    stopped = [t for t in trials if t.user_attrs.get("stopped_at_fidelity") == "late"]
    config = EvaluationConfig.from_dict(json.loads(stopped[0].user_attrs["config"]))
    first_rung = statistics.median((t.datetime_complete - t.datetime_start).total_seconds() for t in stopped)

    # The study's own cache: every document's token embeddings are there, so only the proxy rung is paid.
    stored, corpus, objective = _objective(spec, folder, questions, root / "cache.sqlite3")
    asking = SimpleNamespace(user_attrs={}, study=stored)
    assert objective.expected_seconds(asking, config) == pytest.approx(first_rung)
    # A baseline is never scored by the proxy: priced as the study's whole dense evaluations.
    whole = statistics.median((t.datetime_complete - t.datetime_start).total_seconds()
                              for t in trials if t.state == TrialState.COMPLETE)
    baseline = SimpleNamespace(user_attrs={"baseline": "token 800/400"}, study=stored)
    assert objective.expected_seconds(baseline, config) == pytest.approx(whole)

    # A cache without them: the pass over every document comes first. The model reads 16 tokens,
    # 2 of them special, so a window holds 14 document tokens and repeats a quarter (3) of the last.
    *_, cold = _objective(spec, folder, questions, tmp_path / "empty.sqlite3")
    pass_tokens = sum(count_tokens(doc.text) for doc in corpus) * 14 / (14 - 3)
    rate = cold._rate(config.embedder)
    assert cold.expected_seconds(asking, config) == pytest.approx(pass_tokens / rate + first_rung)


def test_a_promoted_trial_whose_next_rung_the_budget_cannot_hold_stops_at_the_proxy(tmp_path, monkeypatch):
    from tuner.tuning.run.trial import TrialObjective

    model = save_sentence_transformer(tmp_path / "model", max_seq_length=16)
    folder, questions = word_corpus(tmp_path, "words")
    space = tmp_path / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    # A full rung priced at an hour, a 10-minute budget: no dense evaluation at full fidelity fits.
    monkeypatch.setattr(TrialObjective, "cold_seconds", lambda self, config: 3600.0 if config.retrieval.embeds else 0)
    spec = StudySpec(name="b", corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{tmp_path}/b.db", trials=5, timeout=600.0,
                     cache=str(tmp_path / "cache.sqlite3"), validation=0,
                     fidelity=Fidelity(rungs=(1.0,), reduction=2, proxy="late"))
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = optuna.load_study(study_name="b/words", storage=make_storage(spec.storage, heartbeat_interval=None)).trials
    assert not [t.number for t in trials if t.state == TrialState.COMPLETE]
    left = [t for t in trials if "not_climbed_for_budget_s" in t.user_attrs]
    # The first proxy score is the best of its rung so far: that trial at least was promoted.
    assert left and all(t.state == TrialState.PRUNED and t.user_attrs["stopped_at_fidelity"] == "late"
                        and t.user_attrs["not_climbed_for_budget_s"] == 3600.0 for t in left)
    assert [t for t in trials if "out_of_budget" in t.user_attrs]  # the baselines: full fidelity only
    assert f"{len(left)} of them promoted, but left there for the time budget" in outcome.summary.describe()


def test_a_resumed_study_keeps_its_proxy(study, tmp_path):
    import dataclasses
    import shutil

    from tuner.errors import StudyError

    spec, root, *_ = study
    copy = tmp_path / "p.db"
    shutil.copy(root / "p.db", copy)
    before = {t.number for t in study[-1]}
    # `auto` resumes at the study's own rungs: the proxy rung first, on the same token cache.
    resumed = dataclasses.replace(spec, storage=f"sqlite:///{copy}", trials=4, fidelity="auto")
    run_study_spec(resumed, progress=False, echo=lambda _: None)
    storage = make_storage(resumed.storage, heartbeat_interval=None)
    trials = optuna.load_study(study_name="p/words", storage=storage).trials
    added = [t for t in trials if t.number not in before and "rung_scores" in t.user_attrs]
    assert added and all("late" in t.user_attrs["rung_scores"] for t in added)
    assert len(sorted((root / "cache-late-chunking").rglob("*.npz"))) == 3  # the pass was not paid again
    # Asking for full fidelity on it is another study: refused, naming the proxy.
    with pytest.raises(StudyError, match=r"fidelity\.proxy: \"late\" -> \(absent\)"):
        run_study_spec(dataclasses.replace(resumed, fidelity=Fidelity()), progress=False, echo=lambda _: None)


def test_a_configuration_with_a_context_header_skips_the_proxy_and_climbs_the_rungs(tmp_path):
    # Late chunking pools a chunk from its document alone, so it cannot score a context header: such
    # a trial goes to the rungs after the proxy (here full fidelity) instead of failing (it did, on 20 MB).
    model = save_sentence_transformer(tmp_path / "model", max_seq_length=16)
    folder, questions = word_corpus(tmp_path, "words")
    space = tmp_path / "space.yaml"
    space.write_text(SPACE + "retrieval:\n  context: [none, title]\n", encoding="utf-8")
    spec = StudySpec(name="h", corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{tmp_path}/h.db", trials=10, cache=str(tmp_path / "cache.sqlite3"),
                     validation=0, fidelity=Fidelity(rungs=(1.0,), reduction=2, proxy="late"))
    run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = optuna.load_study(study_name="h/words", storage=make_storage(spec.storage, heartbeat_interval=None)).trials
    assert not [t.user_attrs.get("error") for t in trials if t.state == TrialState.FAIL]
    sampled = [t for t in trials if "baseline" not in t.user_attrs and "config" in t.user_attrs]
    titled = [t for t in sampled if json.loads(t.user_attrs["config"])["retrieval"].get("context") == "title"]
    plain = [t for t in sampled if t not in titled]
    assert titled and all(t.state == TrialState.COMPLETE and "rung_scores" not in t.user_attrs for t in titled)
    assert plain and all("late" in t.user_attrs["rung_scores"] for t in plain)
