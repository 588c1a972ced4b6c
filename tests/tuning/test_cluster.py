"""A study's workers on a real Dask cluster (a LocalCluster of worker processes on 127.0.0.1),
submitted through joblib's dask backend, against the test PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.embedding.config import EmbedderConfig
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.run import dask_cluster as cluster_module
from tuner.tuning.run.dask_cluster import ClusterError
from tuner.tuning.study.storage import make_storage

from openai_stub import EmbeddingGate

pytest.importorskip("distributed", reason="the Dask backend needs distributed: pip install -e '.[dask]'")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
QUICK = ROOT / "search_spaces" / "quick.yaml"


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch):
    # Set before the cluster starts: its worker processes inherit the environment.
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


@pytest.fixture
def dask_cluster(_openai_key):
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster


def make_spec(tmp_path, stub, storage: str, scheduler: str | None, **changes) -> StudySpec:
    values = dict(
        name="c", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES), space=str(QUICK),
        embedder=EmbedderConfig("openai", "stub-embed", base_url=stub.base_url),
        storage=storage, trials=4, heartbeat_interval=1, grace_period=2, backend="dask", scheduler=scheduler,
    )
    values.update(changes)
    return StudySpec(**values)


def trials_of(spec: StudySpec) -> list[optuna.trial.FrozenTrial]:
    storage = make_storage(spec.storage, heartbeat_interval=None)
    return optuna.load_study(study_name=spec.study_name("handbook"), storage=storage).get_trials()


def test_sqlite_is_refused_for_a_cluster(tmp_path, openai_server):
    spec = make_spec(tmp_path, openai_server, f"sqlite:///{tmp_path}/c.db", "tcp://127.0.0.1:8786")
    with pytest.raises(ClusterError, match=r"backend=dask needs a study database every node reaches \(PostgreSQL"):
        run_study_spec(spec, progress=False, echo=lambda _: None)
    assert not (tmp_path / "c.db").exists()


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, openai_server, monkeypatch):
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT_S", 1.0)
    spec = make_spec(tmp_path, openai_server, "postgresql+psycopg://u@127.0.0.1:1/db", "tcp://127.0.0.1:9")
    with pytest.raises(ClusterError, match=r"cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        run_study_spec(spec, progress=False, echo=lambda _: None)


def test_a_small_study_completes_exactly_on_the_cluster(tmp_path, openai_server, fresh_postgres_url, dask_cluster):
    spec = make_spec(tmp_path, openai_server, fresh_postgres_url, dask_cluster.scheduler_address)
    messages: list[str] = []
    (outcome,) = run_study_spec(spec, progress=False, echo=messages.append)
    assert any("2 workers on the Dask cluster at " + dask_cluster.scheduler_address in m for m in messages)
    trials = trials_of(spec)
    complete = [t for t in trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    assert outcome.complete == len(complete) == 4
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    configs = [t.user_attrs["config"] for t in complete]
    assert len(set(configs)) == len(configs)  # no configuration evaluated twice
    # The trials ran in the cluster's worker processes, not here.
    pids = {int(t.user_attrs["worker"].split(":")[1]) for t in trials if "worker" in t.user_attrs}
    assert pids and os.getpid() not in pids


def test_a_dask_worker_killed_mid_trial_leaves_nothing_running(tmp_path, openai_server, fresh_postgres_url,
                                                               monkeypatch):
    # The cluster's worker processes hold at "mid_trial" (a configuration claimed, its evaluation
    # not begun) until released: the trial killed is in flight whatever the load. (Waiting for a
    # held embedding request instead, the trial first seen RUNNING could be another worker's that
    # needed none, which ended before the kill.)
    from distributed import LocalCluster

    release = tmp_path / "release"
    monkeypatch.setenv("CHUNKWISE_HOLD", "mid_trial")
    monkeypatch.setenv("CHUNKWISE_HOLD_FILE", str(release))
    killed: list[int] = []

    def kill_one(spec: StudySpec) -> None:
        try:
            reached = Path(f"{release}.reached")
            while not reached.exists():  # the run fails the test if it ends first (killed stays empty)
                if done.wait(0.1):
                    return
            pid = int(reached.read_text())  # a held worker: its trial is RUNNING until released
            storage = make_storage(spec.storage, heartbeat_interval=None)
            study = optuna.load_study(study_name=spec.study_name("handbook"), storage=storage)
            (held,) = [t for t in study.get_trials(states=(TrialState.RUNNING,))
                       if int(t.user_attrs["worker"].split(":")[1]) == pid]
            os.kill(pid, signal.SIGKILL)
            killed.append(held.number)
        finally:
            release.touch()  # the other worker, and the killed one's replacement, go on

    done = threading.Event()
    # Started after the variables are set: its worker processes inherit them (this process runs no trial).
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        spec = make_spec(tmp_path, openai_server, fresh_postgres_url, cluster.scheduler_address, trials=3)
        killer = threading.Thread(target=kill_one, args=(spec,), daemon=True)
        killer.start()
        try:
            (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
        finally:
            done.set()
            killer.join(60)
    assert killed, "no worker was held mid-trial"
    trials = trials_of(spec)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    complete = [t for t in trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    assert outcome.complete == len(complete) == 3
    lost = next(t for t in trials if t.number == killed[0])
    assert lost.state == TrialState.FAIL and "lost" in lost.user_attrs
    configs = [json.loads(t.user_attrs["config"])["chunker"] for t in complete]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == 3


def test_the_dry_run_prices_the_run_for_the_clusters_workers(tmp_path, openai_server, fresh_postgres_url,
                                                             dask_cluster, capsys):
    from tuner.cli import main

    space = tmp_path / "plain.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\n", encoding="utf-8")
    args = ["tune", "--name", "dry", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES), "--space",
            str(space), "--embedder", "openai:stub-embed", "--base-url", openai_server.base_url, "--n-trials", "8",
            "--storage", fresh_postgres_url]
    assert main([*args, "--dry-run", "--backend", "dask", "--scheduler", dask_cluster.scheduler_address]) == 0
    out = capsys.readouterr().out
    assert f"2 worker(s) on the Dask cluster at {dask_cluster.scheduler_address}" in out
    assert main([*args, "--dry-run", "--backend", "dask", "--scheduler", dask_cluster.scheduler_address,
                 "--storage", f"sqlite:///{tmp_path}/d.db"]) == 2
    assert "--backend dask needs a study database every node reaches" in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DaskProcesses:
    """``dask scheduler`` and ``dask worker`` as processes of their own (so the scheduler can die)."""

    def __init__(self, port: int) -> None:
        import shutil
        import subprocess
        import sys

        dask = shutil.which("dask") or str(Path(sys.executable).with_name("dask"))
        self.address = f"tcp://127.0.0.1:{port}"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
        self.scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                           "--no-dashboard"], **quiet)
        self.workers = subprocess.Popen([dask, "worker", self.address, "--nthreads", "1", "--nworkers", "2",
                                         "--no-dashboard"], **quiet)

    def kill_scheduler(self) -> None:
        os.killpg(self.scheduler.pid, signal.SIGKILL)
        self.scheduler.wait()

    def stop(self) -> None:
        for process in (self.workers, self.scheduler):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.mark.slow
def test_the_scheduler_gone_mid_run_is_a_clear_error_and_the_run_resumes(tmp_path, openai_server,
                                                                         fresh_postgres_url):
    port = _free_port()
    spec = make_spec(tmp_path, openai_server, fresh_postgres_url, f"tcp://127.0.0.1:{port}", trials=3, jobs=2)
    gate = EmbeddingGate(openai_server)
    gate.open.clear()
    first = DaskProcesses(port)
    try:
        def kill_scheduler() -> None:
            if gate.held.wait(120):
                first.kill_scheduler()
            gate.open.set()

        threading.Thread(target=kill_scheduler, daemon=True).start()
        with pytest.raises(ClusterError, match=r"did not finish the run's tasks.*run the same command to resume"):
            run_study_spec(spec, progress=False, echo=lambda _: None)
    finally:
        first.stop()  # its workers, still running their tasks, die here with their trials
    before = len([t for t in trials_of(spec) if t.state == TrialState.COMPLETE])
    second = DaskProcesses(port)
    try:
        (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    finally:
        second.stop()
    trials = trials_of(spec)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    complete = [t for t in trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    # Resuming adds the trials asked for to those complete (the first run was cut short).
    assert outcome.complete == len(complete) == outcome.target == before + 3



def test_a_one_thread_cluster_still_runs_the_tasks_there(tmp_path, openai_server, fresh_postgres_url):
    # joblib runs a call sequentially in the calling process when its backend offers one slot.
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        spec = make_spec(tmp_path, openai_server, fresh_postgres_url, cluster.scheduler_address, trials=2)
        (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    assert outcome.complete == 2
    pids = {int(t.user_attrs["worker"].split(":")[1]) for t in trials_of(spec) if "worker" in t.user_attrs}
    assert pids and os.getpid() not in pids


def test_ctrl_c_stops_the_clusters_tasks_after_their_trial(tmp_path, openai_server, fresh_postgres_url,
                                                            dask_cluster, monkeypatch):
    import time

    from tuner.tuning.run.study_run import StudyRun
    spec = make_spec(tmp_path, openai_server, fresh_postgres_url, dask_cluster.scheduler_address, trials=40)

    def interrupt_after_a_trial(run: StudyRun, bar) -> None:
        if run.progress() >= 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(StudyRun, "_poll", interrupt_after_a_trial)
    with pytest.raises(KeyboardInterrupt):
        run_study_spec(spec, progress=False, echo=lambda _: None)
    # Each task ends its trial, then stops: nothing runs on and the study stays far from its target.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [t for t in trials_of(spec) if t.state == TrialState.RUNNING]:
        time.sleep(0.5)
    settled = len(trials_of(spec))
    time.sleep(3)
    trials = trials_of(spec)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert len(trials) == settled < 40


def test_the_backend_comes_from_the_study_file(tmp_path):
    from tuner.tuning.study.spec import StudyError, load_study_file

    base = (f"name: s\ncorpora: {{handbook: {EXAMPLE}}}\nqueries: {QUERIES}\nspace: {QUICK}\n"
            "storage: postgresql+psycopg://u@db/chunkwise\n")
    study = tmp_path / "s.yaml"
    study.write_text(base + "backend: dask\nscheduler: tcp://10.0.0.5:8786\n", encoding="utf-8")
    spec = load_study_file(study)
    assert (spec.backend, spec.scheduler) == ("dask", "tcp://10.0.0.5:8786")
    study.write_text(base + "backend: spark\n", encoding="utf-8")
    with pytest.raises(StudyError, match=r"backend='spark' is invalid; allowed: local, dask"):
        load_study_file(study)
