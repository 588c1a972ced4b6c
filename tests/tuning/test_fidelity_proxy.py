"""A late-chunking proxy rung (``fidelity: {proxy: late, ...}``): each trial is scored with vectors
pooled from the documents' token embeddings, computed once per embedder, and stops there; when the
run's trials are done, the ``confirm`` best by proxy score are evaluated again at full fidelity,
and those results are an ordinary evaluation's."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState

import tuner
from tuner.embedding.config import EmbedderConfig
from tuner.evaluation.config import EvaluationConfig
from tuner.evaluation.fidelity import PROXY_VERSION, Fidelity
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


def test_proxy_trials_stop_at_the_proxy_and_its_best_are_confirmed_at_full_fidelity(study):
    *_, outcome, trials = study
    scored = [t for t in trials if "rung_scores" in t.user_attrs]
    assert len(scored) > 3 and all(set(t.user_attrs["rung_scores"]) == {"late"} for t in scored)
    assert all(t.state == TrialState.PRUNED and t.user_attrs["stopped_at_fidelity"] == "late" for t in scored)
    # The three best proxy scores of distinct settings (confirm: 3), each confirmed once, by a trial of the
    # same parameters but k, which it chooses (issue 61: its parameter is the k it chose). One that chose a
    # baseline's configuration is that complete baseline's duplicate (issue 61).
    confirmations = [t for t in trials if "confirms_trial" in t.user_attrs]
    best = next_to_confirm([t for t in trials if t not in confirmations], 3)
    assert sorted(t.user_attrs["confirms_trial"] for t in confirmations) == sorted(t.number for t in best)
    by_number = {t.number: t for t in trials}
    for t in confirmations:
        proxy = by_number[t.user_attrs["confirms_trial"]]
        assert {**t.params, "k": None} == {**proxy.params, "k": None}
        if t.state == TrialState.PRUNED:
            holder = by_number[t.user_attrs["duplicate_of"]]
            assert holder.state == TrialState.COMPLETE and holder.params == t.params
        else:
            assert t.state == TrialState.COMPLETE and t.params["k"] == t.user_attrs["k"]
    # They ran after every sampled trial, and the recommendation is a full-fidelity trial.
    assert min(t.number for t in confirmations) > max(t.number for t in scored)
    assert by_number[outcome.recommended.number].state == TrialState.COMPLETE
    # The summary says how many configurations were seen only at the proxy, and how many confirmed.
    assert outcome.summary.stopped_at == {"late": len(scored)}
    said = outcome.summary.describe()
    assert "(3 of them the proxy's best, confirmed)" in said
    assert f"{len(scored)} stopped at low fidelity ({len(scored)} at the late proxy)" in said


def test_a_confirmation_chooses_its_k_at_full_fidelity(study):
    # The proxy's k is its own guess: a confirmation ranks each question once at the largest k (3) and records
    # the k that scores best at full fidelity; every k it scored is a point, as a separate evaluation scores it.
    _, _, folder, questions, _, trials = study
    corpus = tuner.load_corpus(folder)
    evalset = tuner.load_evaluation_set(questions, corpus)
    by_number = {t.number: t for t in trials}
    confirmations = [t for t in trials if "confirms_trial" in t.user_attrs and t.state == TrialState.COMPLETE]
    assert confirmations
    for trial in confirmations:
        assert trial.params["k"] == trial.user_attrs["k"]  # the k it chose (issue 61), not its proxy trial's
        assert trial.user_attrs["confirms_trial"] in by_number
        points = trial.user_attrs["inner_points"]
        assert sorted(point["k"] for point in points) == [1, 2, 3]
        config = EvaluationConfig.from_dict(json.loads(trial.user_attrs["config"]))
        for point in points:
            at_k = EvaluationConfig.from_dict({**config.to_dict(), "retrieval": {**config.to_dict()["retrieval"],
                                                                                 "k": point["k"]}})
            result = tuner.evaluate(corpus, evalset, at_k, cache=None)
            assert point["recall"] == pytest.approx(result.metrics["overall"]["recall"]["mean"], abs=1e-12)
        best = max(points, key=lambda point: (point["score"], -point["k"]))
        assert trial.user_attrs["k"] == config.retrieval.k == best["k"]
        assert trial.user_attrs["score"] == pytest.approx(best["score"], abs=1e-12)


def test_a_confirmation_scores_as_an_ordinary_full_evaluation(study):
    _, _, folder, questions, _, trials = study
    confirmed = next(t for t in trials if "confirms_trial" in t.user_attrs)
    config = EvaluationConfig.from_dict(json.loads(confirmed.user_attrs["config"]))
    assert not config.embedder.late_chunking  # full fidelity embeds each chunk's text, as production does
    corpus = tuner.load_corpus(folder)
    result = tuner.evaluate(corpus, tuner.load_evaluation_set(questions, corpus), config, cache=None)
    assert confirmed.user_attrs["recall"] == pytest.approx(result.metrics["overall"]["recall"]["mean"], abs=1e-12)


def test_the_pass_over_the_corpus_is_paid_once(study):
    _, root, _, _, _, trials = study
    cached = sorted((root / "cache-late-chunking").rglob("*.npz"))
    assert len(cached) == 3  # one file per document, however many trials were scored by the proxy
    assert len([t for t in trials if "rung_scores" in t.user_attrs]) > 3


def test_the_summary_counts_the_embedding_work_in_corpus_passes(study):
    # Issue 30, item 4, and issue 51, item 3: the work each trial's models did, known here by replaying the
    # study by hand: in trial order, the texts each trial needs (a dense trial its chunks and the questions, a
    # proxy trial the questions and, the first time, the documents for the pass), each counted the first time
    # only (one cache); in cl100k tokens (model_tokens), and as the model does it (the summary's corpus
    # passes): its own word pieces (the tokenizer the model was saved with, read here with transformers), each
    # text up to the 14 it reads (16 less [CLS] and [SEP]), the pass in windows of 14 every 11 (3 repeated),
    # the last one ending at the document's end, over the corpus's word pieces.
    import math

    from transformers import BertTokenizerFast

    from tuner.text.tokens import count_tokens
    from tuner.tuning.outcome.summary import trial_phase

    _, root, folder, questions, outcome, trials = study
    tokenizer = BertTokenizerFast.from_pretrained(str(root / "model" / "transformer"))

    def pieces(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def windows_read(n: int) -> int:
        if n <= 14:
            return n
        count = (n - 14) // 11 + 1
        return 14 * (count + (1 if (count - 1) * 11 + 14 < n else 0))

    corpus = tuner.load_corpus(folder, name="words")
    asked = [q.question for q in tuner.load_evaluation_set(questions, corpus)]
    corpus_tokens = sum(count_tokens(doc.text) for doc in corpus)
    corpus_pieces = sum(pieces(doc.text) for doc in corpus)
    the_pass = sum(windows_read(pieces(doc.text)) for doc in corpus)
    assert the_pass > corpus_pieces  # the windows overlap
    seen: set[str] = set()
    passed, work = False, {}
    for trial in sorted(trials, key=lambda t: t.number):
        evaluated = trial.state == TrialState.COMPLETE or "stopped_at_fidelity" in trial.user_attrs
        if not evaluated:  # failed, or pruned before it embedded anything (a duplicate configuration)
            continue
        config = EvaluationConfig.from_dict(json.loads(trial.user_attrs["config"]))
        phase = trial_phase(trial.user_attrs)
        if phase == "proxy trials":
            texts = asked
            assert trial.user_attrs["proxy_pass_tokens"] == (0 if passed else corpus_tokens)
            assert trial.user_attrs["model_passes"][1] == pytest.approx(0 if passed else the_pass / corpus_pieces,
                                                                        abs=1e-6)
            passed = True
        elif config.retrieval.embeds:
            splitter = config.chunker.build()
            texts = [chunk.text for doc in corpus for chunk in splitter.split(doc)] + asked
        else:
            texts = []
        new = set(texts) - seen
        seen |= new
        assert trial.user_attrs["model_tokens"] == sum(count_tokens(text) for text in new), trial.number
        work[phase] = work.get(phase, 0) + sum(min(pieces(text), 14) for text in new)
    assert passed and work["baselines"] > 0 and work["confirmations"] > 0
    expected = {"baselines": work["baselines"] / corpus_pieces, "proxy pass": the_pass / corpus_pieces,
                "proxy trials": work["proxy trials"] / corpus_pieces,
                "confirmations": work["confirmations"] / corpus_pieces}
    assert outcome.summary.passes == pytest.approx(expected, abs=1e-5)
    assert math.isclose(sum(outcome.summary.passes.values()), sum(expected.values()), abs_tol=1e-4)
    said = tuner.tuning.outcome.summary.format_outcomes([outcome], details=True)  # the embedding work is reasoning
    assert f"embedding work: {sum(outcome.summary.passes.values()):.2f} corpus passes: baselines " in said


def test_the_dry_run_prices_the_proxy_pass_once(study):
    from tuner.tuning.run.plan import format_plan, plan_run

    spec, *_ = study
    text = format_plan(spec, plan_run(spec))
    assert "a late-chunking proxy rung first: one pass over the corpus per embedder" in text
    assert "its best 3 and the dense baselines at full fidelity" in text
    # Its embedding work in corpus passes, phase by phase as the summary counts it: the pass once, as the
    # model reads it: windows of 14 word pieces (16 less [CLS] and [SEP]), each repeating 3 (a quarter) of
    # the one before, so 14 read for every 11 of the document.
    (plan,) = plan_run(spec)
    assert list(plan.passes) == ["baselines", "proxy pass", "proxy trials", "confirmations"]
    assert plan.passes["proxy pass"] == pytest.approx(14 / 11) and plan.passes["proxy trials"] == 0.0
    assert f"embedding work: at most {sum(plan.passes.values()):.2f} corpus passes (baselines " in text


def test_the_dry_run_of_a_time_budget_keeps_to_it_after_the_work_a_proxy_always_does(study):
    # Issue 42: realdocs' dry run with --timeout 30m said "at most 58 min", although the run keeps
    # its confirmations inside the budget (it took 28 min). The fixed work (the pass, the dense
    # baselines and the confirmations at full fidelity, priced from the same passes the summary
    # counts) comes out of the budget first; sampled trials get what is left.
    from dataclasses import replace

    from tuner.tuning.run.plan import format_plan, plan_run

    spec, *_ = study
    (unbounded,) = plan_run(spec)
    rate = unbounded.passes["proxy pass"] * unbounded.tokens / unbounded.proxy_seconds  # the pass, windows overlapping
    assert unbounded.full_seconds == pytest.approx(
        (unbounded.passes["baselines"] + unbounded.passes["confirmations"]) * unbounded.tokens / rate)
    fixed = unbounded.proxy_seconds + unbounded.full_seconds / unbounded.jobs
    dense_s, bm25_s = 5.0, unbounded.kind_seconds["bm25"]  # a proxy's trial is priced as a BM25 one
    mean_s = unbounded.kinds["dense"] * dense_s + unbounded.kinds["bm25"] * bm25_s + \
        unbounded.kinds["semantic"] * unbounded.kind_seconds["semantic"]
    roomy = replace(spec, timeout=fixed + 10 * mean_s / unbounded.jobs + 1)
    (plan,) = plan_run(roomy)
    assert plan.trials == min(spec.trials_to_add, 10) and plan.wall_seconds <= roomy.timeout
    assert "beyond the budget" not in format_plan(roomy, [plan])
    tight = replace(spec, timeout=fixed / 2)
    (plan,) = plan_run(tight)
    assert plan.trials == 0 and plan.wall_seconds == pytest.approx(tight.timeout)
    assert "beyond the budget's" in format_plan(tight, [plan])


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
    # The first proxy trial paid the pass over the documents: the others say what one more chunking costs.
    first_rung = statistics.median((t.datetime_complete - t.datetime_start).total_seconds() for t in stopped[1:])

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


def setting(trial) -> str:
    """A trial's configuration but for k: what a confirmation evaluates (it scores every k)."""
    config = json.loads(trial.user_attrs["config"])
    del config["retrieval"]["k"]
    return json.dumps(config, sort_keys=True)


def next_to_confirm(trials, count: int) -> list:
    """The ``count`` best proxy trials, one per setting, of settings no confirmation evaluated."""
    by_number = {t.number: t for t in trials}
    taken = {setting(by_number[t.user_attrs["confirms_trial"]]) for t in trials if "confirms_trial" in t.user_attrs}
    ranked = sorted((t for t in trials if t.user_attrs.get("stopped_at_fidelity") == "late"),
                    key=lambda t: (-t.user_attrs["rung_scores"]["late"], t.number))
    chosen = []
    for trial in ranked:
        if setting(trial) not in taken and len(chosen) < count:
            chosen.append(trial)
            taken.add(setting(trial))
    return chosen


def test_under_a_time_budget_a_sampled_trial_leaves_the_price_of_its_confirmations(study):
    from types import SimpleNamespace

    spec, root, folder, questions, _, trials = study
    stored, _, objective = _objective(spec, folder, questions, root / "cache.sqlite3")
    rate = objective._rate(objective.settings.embedder)
    by_number = {t.number: t for t in trials}
    # A confirmation is priced by the tokens its proxy trial counted (chunks with overlaps, and the questions).
    confirmation = next(t for t in trials if "confirms_trial" in t.user_attrs)
    proxy = by_number[confirmation.user_attrs["confirms_trial"]]
    assert proxy.user_attrs["tokens_embedded"] > 0
    config = EvaluationConfig.from_dict(json.loads(confirmation.user_attrs["config"]))
    asking = SimpleNamespace(user_attrs={"confirms_trial": proxy.number}, study=stored)
    assert objective.expected_seconds(asking, config) == pytest.approx(proxy.user_attrs["tokens_embedded"] / rate)
    # A sampled trial keeps in reserve the price of the confirm (3) best proxy trials of settings not yet confirmed.
    unconfirmed = next_to_confirm(trials, 3)
    assert len(unconfirmed) == 3
    expected = sum(t.user_attrs["tokens_embedded"] for t in unconfirmed[:3]) / rate
    sampled = SimpleNamespace(user_attrs={}, study=stored)
    assert objective.confirmation_reserve(sampled) == pytest.approx(expected)
    for own in ({"baseline": "token 800/400 dense"}, {"confirms_trial": 3}):  # these are what it is kept for
        assert objective.confirmation_reserve(SimpleNamespace(user_attrs=own, study=stored)) == 0.0


def test_two_workers_share_the_confirmations_so_the_reserve_is_their_longest_share(study):
    from types import SimpleNamespace

    spec, root, folder, questions, _, trials = study
    stored, _, objective = _objective(spec, folder, questions, root / "cache.sqlite3")
    rate = objective._rate(objective.settings.embedder)
    first, second, third = sorted((t.user_attrs["tokens_embedded"] / rate for t in next_to_confirm(trials, 3)),
                                  reverse=True)
    objective.workers = lambda: 2
    # Longest first: the first worker takes the longest, the second the next two.
    sampled = SimpleNamespace(user_attrs={}, study=stored)
    assert objective.confirmation_reserve(sampled) == pytest.approx(max(first, second + third))
    objective.workers = lambda: 3
    assert objective.confirmation_reserve(sampled) == pytest.approx(first)


def test_pricing_follows_the_throughput_the_studys_latest_trials_observed(study, monkeypatch):
    from tuner.tuning.run import embedding_work
    from tuner.tuning.run import trial as trial_module

    spec, root, folder, questions, _, trials = study
    stored, _, objective = _objective(spec, folder, questions, root / "cache.sqlite3")
    config = objective.settings.embedder
    monkeypatch.setattr(trial_module, "stored_throughput", lambda _: 12_345.0)  # the calibration
    assert objective._rate(config) == 12_345.0  # a worker that reads no study prices by the calibration
    # Every trial recorded what its models read (texts up to the window, the pass) and how long they took.
    evaluated = [t for t in trials if "model_tokens" in t.user_attrs]  # not a duplicate, say
    read = sorted(evaluated, key=lambda t: t.datetime_complete, reverse=True)
    assert len(read) >= 4 and all(len(t.user_attrs["model_read"]) == 2 for t in read)
    tokens = [t.user_attrs["model_read"][0] for t in read]
    seconds = [t.user_attrs["model_read"][1] for t in read]
    assert tokens[-1] > 0  # the first trial paid the pass
    # The newest trials until they hold enough tokens: here, set to the newest three's.
    enough = sum(tokens[:3])
    assert tokens[2] > 0, "the third newest trial must have read something for this check"
    monkeypatch.setattr(embedding_work, "RECALIBRATE_MIN_TOKENS", enough)
    objective.study = stored
    assert objective._rate(config) == pytest.approx(enough / sum(seconds[:3]))
    # Until they read enough, the calibration.
    monkeypatch.setattr(embedding_work, "RECALIBRATE_MIN_TOKENS", sum(tokens) + 1)
    objective._observed.clear()
    assert objective._rate(config) == 12_345.0


def test_a_resumed_study_keeps_its_proxy(study, tmp_path):
    import dataclasses
    import shutil

    from tuner.errors import StudyError

    spec, root, *_ = study
    copy = tmp_path / "p.db"
    shutil.copy(root / "p.db", copy)
    before = {t.number for t in study[-1]}
    kept = {t.number: (t.state, t.user_attrs.get("recall"), t.user_attrs.get("rung_scores")) for t in study[-1]
            if "confirms_trial" in t.user_attrs or "rung_scores" in t.user_attrs}
    # `auto` resumes at the study's own rungs: the proxy rung first, on the same token cache.
    resumed = dataclasses.replace(spec, storage=f"sqlite:///{copy}", trials=4, fidelity="auto")
    run_study_spec(resumed, progress=False, echo=lambda _: None)
    storage = make_storage(resumed.storage, heartbeat_interval=None)
    trials = optuna.load_study(study_name="p/words", storage=storage).trials
    added = [t for t in trials if t.number not in before and "rung_scores" in t.user_attrs]
    assert added and all("late" in t.user_attrs["rung_scores"] for t in added)
    assert len(sorted((root / "cache-late-chunking").rglob("*.npz"))) == 3  # the pass was not paid again
    # Its confirmations are of configurations no earlier run confirmed: none is evaluated twice.
    confirmed = [t.user_attrs["confirms_trial"] for t in trials if "confirms_trial" in t.user_attrs]
    assert len(confirmed) > 3 and len(confirmed) == len(set(confirmed))
    # The first run's proxy scores and confirmations are kept as they were, at the proxy version it stored.
    by_number = {t.number: t for t in trials}
    assert {n: (by_number[n].state, by_number[n].user_attrs.get("recall"), by_number[n].user_attrs.get("rung_scores"))
            for n in kept} == kept
    stored = optuna.load_study(study_name="p/words", storage=storage).user_attrs["settings"]["fidelity"]
    assert stored["proxy"] == "late" and stored["proxy_version"] == PROXY_VERSION == 2
    # Asking for full fidelity on it is another study: refused, naming the proxy.
    with pytest.raises(StudyError, match=r"fidelity\.proxy: \"late\" -> \(absent\)"):
        run_study_spec(dataclasses.replace(resumed, fidelity=Fidelity()), progress=False, echo=lambda _: None)


def test_a_study_whose_proxy_pooled_every_token_is_not_resumed_with_the_proxy_that_reads_the_window(study, tmp_path):
    # Issue 30, item 1: a study stored before the proxy pooled only what the model reads (no proxy_version)
    # holds proxy scores that rank large chunkings otherwise; new proxy scores must not join them.
    import dataclasses
    import shutil

    from tuner.errors import StudyError

    spec, root, *_ = study
    copy = tmp_path / "old.db"
    shutil.copy(root / "p.db", copy)
    storage = make_storage(f"sqlite:///{copy}", heartbeat_interval=None)
    old = optuna.load_study(study_name="p/words", storage=storage)
    settings = old.user_attrs["settings"]
    settings["fidelity"].pop("proxy_version")
    old.set_user_attr("settings", settings)
    with pytest.raises(StudyError, match=r"fidelity\.proxy_version: 1 -> 2"):
        run_study_spec(dataclasses.replace(spec, storage=f"sqlite:///{copy}", trials=2), progress=False,
                       echo=lambda _: None)
    # A study without a proxy stores no version, as before.
    assert "proxy_version" not in Fidelity(rungs=(0.1, 1.0)).to_dict()
    assert Fidelity.from_stored(Fidelity(proxy="late").to_dict()).proxy_version == PROXY_VERSION


def test_a_configuration_with_a_context_header_is_scored_by_the_proxy_and_confirmed_with_its_header(tmp_path):
    # Late chunking pools a chunk from its document alone; the proxy of a configuration with a title
    # header pools the header's tokens too (it failed at the proxy on 20 MB, then skipped it).
    model = save_sentence_transformer(tmp_path / "model", max_seq_length=16)
    folder, questions = word_corpus(tmp_path, "words")
    space = tmp_path / "space.yaml"
    space.write_text(SPACE + "retrieval:\n  context: [none, title]\n", encoding="utf-8")
    spec = StudySpec(name="h", corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{tmp_path}/h.db", trials=12, cache=str(tmp_path / "cache.sqlite3"),
                     validation=0, fidelity=Fidelity(rungs=(1.0,), reduction=2, proxy="late", confirm=12))
    run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = optuna.load_study(study_name="h/words", storage=make_storage(spec.storage, heartbeat_interval=None)).trials
    assert not [t.user_attrs.get("error") for t in trials if t.state == TrialState.FAIL]
    sampled = [t for t in trials if not {"baseline", "confirms_trial"} & set(t.user_attrs) and "config" in t.user_attrs]
    titled = [t for t in sampled if json.loads(t.user_attrs["config"])["retrieval"].get("context") == "title"]
    assert titled and all(t.user_attrs["stopped_at_fidelity"] == "late" for t in sampled)
    # Each confirmed at full fidelity (confirm: 12), the title header embedded with its chunk's text.
    corpus = tuner.load_corpus(folder)
    evalset = tuner.load_evaluation_set(questions, corpus)
    by_number = {t.number: t for t in trials}
    confirmed = {setting(by_number[t.user_attrs["confirms_trial"]]): t
                 for t in trials if "confirms_trial" in t.user_attrs}
    for proxy_trial in titled:  # one confirmation per setting (the configuration but for k, which it chooses)
        full = confirmed[setting(proxy_trial)]
        config = EvaluationConfig.from_dict(json.loads(full.user_attrs["config"]))
        result = tuner.evaluate(corpus, evalset, config, cache=None)
        assert full.user_attrs["recall"] == pytest.approx(result.metrics["overall"]["recall"]["mean"], abs=1e-12)


def test_the_time_the_confirmations_did_not_need_goes_back_to_the_proxy_search(tmp_path, monkeypatch):
    """Priced high until one has run (a calibration taken under other load), the confirmations stop the
    proxy search early; once they show what they cost, the search resumes and its new best are confirmed."""
    from tuner.tuning.run.trial import TrialObjective

    model = save_sentence_transformer(tmp_path / "model", max_seq_length=16)
    folder, questions = word_corpus(tmp_path, "words")
    space = tmp_path / "space.yaml"
    space.write_text(SPACE.replace("high: 16, step: 2", "high: 40, step: 2"), encoding="utf-8")
    spec = StudySpec(name="r", corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{tmp_path}/r.db", trials=None, timeout=16.0, full_budget=True,
                     cache=str(tmp_path / "cache.sqlite3"), validation=0,
                     fidelity=Fidelity(rungs=(1.0,), reduction=2, proxy="late", confirm=2))

    def price(self, study, proxy):
        done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if "confirms_trial" in t.user_attrs]
        return 0.5 if done else 4.0

    monkeypatch.setattr(TrialObjective, "confirmation_seconds", price)
    lines: list[str] = []
    run_study_spec(spec, progress=False, echo=lines.append)
    trials = optuna.load_study(study_name="r/words", storage=make_storage(spec.storage, heartbeat_interval=None)).trials
    first_confirmed = min(t.datetime_complete for t in trials if "confirms_trial" in t.user_attrs
                          and t.state == TrialState.COMPLETE)
    resumed = [t for t in trials if t.user_attrs.get("stopped_at_fidelity") == "late"
               and t.datetime_start > first_confirmed]
    assert resumed, "no proxy trial ran after the first confirmations"
    assert sum("confirming at full fidelity" in line for line in lines) >= 2  # the new best confirmed too
    assert not [t for t in trials if t.state == TrialState.RUNNING]


def test_a_trial_that_fails_after_its_model_ran_records_the_work_it_did(study, tmp_path, monkeypatch):
    import shutil

    from tuner.errors import ChunkwiseError
    from tuner.tuning.run.ledger import Claim, ClaimResult
    from tuner.tuning.run.trial import TrialObjective

    _, root, folder, questions, _, _ = study
    shutil.copy(root / "p.db", tmp_path / "p.db")  # the module's study stays as it is
    copied = optuna.load_study(study_name="p/words", storage=make_storage(f"sqlite:///{tmp_path}/p.db",
                                                                          heartbeat_interval=None))
    corpus = tuner.load_corpus(folder, name="words")
    from tuner.embedding import EmbeddingCache
    from tuner.tuning.study.settings import StudySettings

    objective = TrialObjective(corpus, tuner.load_evaluation_set(questions, corpus), StudySettings.of(copied),
                               EmbeddingCache(tmp_path / "cold.sqlite3"))
    text = "the red apple is sweet and the river boat is fast"  # 11 word pieces, each a word of the model's

    def climb(self, trial, config, report):
        self.embedder(config.embedder).embed([text])
        raise ChunkwiseError("the model ran out of memory")

    monkeypatch.setattr(TrialObjective, "_climb", climb)
    monkeypatch.setattr(TrialObjective, "ladder", lambda self, trial, config: (Fidelity(), None))
    trial = copied.ask()
    with pytest.raises(ChunkwiseError):
        objective(trial, lambda key: ClaimResult(Claim.GRANTED))
    recorded = copied.trials[-1].user_attrs
    corpus_pieces = objective.corpus_own_tokens(objective.embedder(objective.settings.embedder))
    assert recorded["model_passes"] == [pytest.approx(11 / corpus_pieces, abs=1e-6), 0.0]
