"""An interrupted baseline is run again (issue 30).

The baselines are what the recommendation is judged against, so every one the study's space
holds must end COMPLETE however its trial ended: interrupted by Ctrl-C or SIGTERM, lost with a
killed process, or failed by an endpoint's outage (which says nothing about the configuration
and must not ban it in the claims table). Here `quick.yaml` holds two of them (see
tests/tuning/test_baselines.py): the token 800/400 default, as ``token 512/256 k=5``, and
``recursive 256/0 dense``.

Each test interrupts a real process at a chosen moment (a hold point, or an embedding request
the stub holds), resumes once with the same command, and checks by hand what the run must have
left: both baselines COMPLETE, nothing RUNNING or WAITING, no configuration banned, and a summary
that compares the recommendation with the token 800/400 default.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from optuna.trial import TrialState
from test_lifecycle import chunkwise, finish, load, wait_held, write_study

from tuner.tuning.core.records import BASELINE_ATTR
from tuner.tuning.search.baselines import DEFAULT_BASELINE
from tuner.tuning.study.storage import make_storage

from openai_stub import EmbeddingGate, OpenAIStub

pytestmark = pytest.mark.slow

#: The baselines quick.yaml holds, in queue order.
QUICK_BASELINES = [DEFAULT_BASELINE, "recursive 256/0 dense"]
#: What the summary says when it compares the recommendation with the token 800/400 default.
DEFAULT_COMPARED = ("against the token 800/400 default", "the recommendation is the token 800/400 default itself")
#: A remote API's latency on every embedding request.
LATENCY_S = 0.2


def baselines_of(storage: str) -> dict[str, list[TrialState]]:
    """The states of the trials of each baseline, by name."""
    found: dict[str, list[TrialState]] = {}
    for trial in load(storage).get_trials():
        if BASELINE_ATTR in trial.user_attrs:
            found.setdefault(trial.user_attrs[BASELINE_ATTR], []).append(trial.state)
    return found


def banned_configurations(storage: str) -> int:
    with make_storage(storage).engine.connect() as conn:
        return conn.execute(sa.text("SELECT COUNT(*) FROM chunkwise_claims WHERE NOT reusable")).scalar_one()


def check_resumed(storage: str, summary: str) -> None:
    """Every baseline COMPLETE, nothing left running or waiting, the default compared with, and
    no configuration banned."""
    trials = load(storage).get_trials()
    assert not [t.number for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    states = baselines_of(storage)
    assert sorted(states) == sorted(QUICK_BASELINES), states
    assert all(TrialState.COMPLETE in states[name] for name in QUICK_BASELINES), states
    assert any(text in summary for text in DEFAULT_COMPARED), summary
    assert "not in this study's space (or not evaluated yet)" not in summary
    assert banned_configurations(storage) == 0  # no interruption or outage is the configuration's fault


def hold_first_embedding(stub) -> EmbeddingGate:
    """Hold the first embedding request from now on (the first baseline's first request)."""
    return EmbeddingGate(stub, close_when=lambda: True)


def wait_for(condition, process, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, (what, process.communicate())
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.05)


# --- one real `chunkwise tune` per interruption, on SQLite and PostgreSQL ----------------------------
@pytest.mark.parametrize("how", ["sigterm", "sigkill-group"])
def test_an_interrupted_baseline_runs_again_after_one_resume(tmp_path, openai_server, storage_url, how):
    # The reproduction: SIGTERM while the token 800/400 baseline is embedding. And on
    # PostgreSQL the whole process group killed (two workers) as the first baseline has just
    # started, before its parameters are sampled: no retry of it can be queued then.
    if how == "sigkill-group" and not storage_url.startswith("postgresql"):
        pytest.skip("SIGKILL of the group: the PostgreSQL case of the issue")
    openai_server.delay_fn = lambda request: LATENCY_S
    if how == "sigterm":
        gate = hold_first_embedding(openai_server)
        study = write_study(tmp_path, openai_server, storage_url, trials=2)
        process = chunkwise(tmp_path, "tune", str(study))
        wait_for(gate.held.is_set, process, "the first baseline embedding")
        process.send_signal(signal.SIGTERM)
        gate.open.set()
    else:
        study = write_study(tmp_path, openai_server, storage_url, trials=2, jobs=2)
        process = chunkwise(tmp_path, "tune", str(study), new_session=True, hold="after_ask")
        wait_held(tmp_path, process)
        os.killpg(process.pid, signal.SIGKILL)
    code, _, err = finish(process, timeout=120)
    assert code == (143 if how == "sigterm" else -signal.SIGKILL), err
    assert TrialState.COMPLETE not in baselines_of(storage_url).get(DEFAULT_BASELINE, [])

    code, out, err = finish(chunkwise(tmp_path, "tune", str(study)))
    assert code == 0, err
    check_resumed(storage_url, out)


def test_an_endpoint_outage_bans_no_configuration(tmp_path, openai_server, storage_url):
    # A short outage: every embedding request fails with HTTP 500 until the client's retries
    # (six attempts, one request at a time) are spent, once; then the server is back.
    openai_server.delay_fn = lambda request: LATENCY_S
    openai_server.script("/v1/embeddings", [500] * 6)
    study = write_study(tmp_path, openai_server, storage_url, trials=3)
    data = yaml.safe_load(study.read_text(encoding="utf-8"))
    data["embedder"]["concurrency"] = 1
    study.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = finish(chunkwise(tmp_path, "tune", str(study)))
    assert code == 0, err
    assert not openai_server.pending("/v1/embeddings")
    failed = [t for t in load(storage_url).get_trials() if t.state == TrialState.FAIL]
    assert len(failed) == 1 and "HTTP 500" in failed[0].user_attrs["error"]
    assert failed[0].user_attrs.get(BASELINE_ATTR) == DEFAULT_BASELINE
    assert banned_configurations(storage_url) == 0
    check_resumed(storage_url, out)  # retried within the run: no resume needed


# --- the interruption campaign ------------------------------------------------------------------
def _run_forked(args: list[str], env: dict[str, str], out: str, err: str) -> None:
    """A forked child: ``chunkwise ARGS`` through :func:`tuner.cli.main`, its output in files."""
    os.environ.update(env)
    for name in ("CHUNKWISE_HOLD", "CHUNKWISE_HOLD_FILE", "CHUNKWISE_FAULT", "CHUNKWISE_FAULT_TOKEN"):
        if name not in env:
            os.environ.pop(name, None)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    code = 99
    with open(out, "w", encoding="utf-8", buffering=1) as sys.stdout, \
            open(err, "w", encoding="utf-8", buffering=1) as sys.stderr:
        try:
            from tuner.cli import main

            code = main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


#: Held while forking, and by this process's threads while they use Optuna: a fork never copies
#: a lock that another thread holds (the child would wait on it forever).
_FORK_GUARD = threading.Lock()


class Forked:
    """A real process running the command line, forked from this one: it gets real signals, but
    not the seconds a fresh interpreter spends importing (what keeps the campaign small)."""

    def __init__(self, folder: Path, args: list[str], env: dict[str, str]) -> None:
        number = len(list(folder.glob("*.out")))
        self.out, self.err = folder / f"{number}.out", folder / f"{number}.err"
        self.out.touch()
        self.process = multiprocessing.get_context("fork").Process(
            target=_run_forked, args=(args, env, str(self.out), str(self.err)))
        with _FORK_GUARD:
            self.process.start()

    def poll(self) -> int | None:
        return self.process.exitcode

    def communicate(self) -> str:
        return self.err.read_text(encoding="utf-8") if self.err.exists() else ""

    def send(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        self.process.join(timeout)
        assert self.process.exitcode is not None, "the run did not end"
        return self.process.exitcode, self.out.read_text(encoding="utf-8"), self.communicate()


#: Moments during the baselines: a hold point (see tuner/tuning/faults.py), or "embedding" (the
#: first baseline's first embedding request, held by the stub).
MOMENTS = ["after_target", "after_ask", "mid_trial", "embedding", "after_ask:2"]
SIGNALS = {"SIGTERM": 143, "SIGINT": 130, "SIGKILL": -signal.SIGKILL}


@pytest.fixture(scope="module")
def _preloaded():
    """What a run imports late (the worker's thread limits, the run note's dashboard module):
    imported once here, so forked runs do not each pay for it."""
    import optuna_dashboard  # noqa: F401
    import threadpoolctl  # noqa: F401
    import torch  # noqa: F401

    import tuner.cli  # noqa: F401


@pytest.fixture
def fast_folder(tmp_path) -> Iterator[Path]:
    """A folder in /dev/shm where there is one: on disk, SQLite's fsyncs take most of a short run."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(dir=shm, prefix="chunkwise-campaign-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _campaign_case(folder: Path, signame: str, moment: str) -> None:
    """Stop a fresh study's `tune` with ``signame`` at ``moment``, resume it once, check it."""
    folder.mkdir()
    storage = f"sqlite:///{folder}/life.db"
    release = folder / "release"
    env = {"OPENAI_API_KEY": "test-key", "CHUNKWISE_CACHE_DIR": str(folder / "cachedir")}
    held = {"CHUNKWISE_HOLD": moment, "CHUNKWISE_HOLD_FILE": str(release)} if moment != "embedding" else {}
    with OpenAIStub() as stub:  # one per case: the cases run side by side
        study = write_study(folder, stub, storage, trials=2)
        gate = hold_first_embedding(stub) if moment == "embedding" else None
        run = Forked(folder, ["tune", str(study)], {**env, **held})
        if gate is None:
            wait_for(Path(f"{release}.reached").exists, run, moment)
        else:
            wait_for(gate.held.is_set, run, moment)
        run.send(signal.Signals[signame])
        release.touch()
        if gate is not None:
            gate.open.set()
        code, _, err = run.finish()
        assert code == SIGNALS[signame], (moment, err)
        assert "Traceback" not in err, (moment, err)
        with _FORK_GUARD:
            assert TrialState.COMPLETE not in baselines_of(storage).get(QUICK_BASELINES[-1], []), moment

        code, out, err = Forked(folder, ["tune", str(study)], env).finish()
        assert code == 0, (moment, err)
        with _FORK_GUARD:
            check_resumed(storage, out)


@pytest.mark.parametrize("signame", SIGNALS)
def test_interruption_campaign_every_baseline_ends_complete_after_one_resume(fast_folder, signame, _preloaded):
    # The five moments run side by side, each with its own study, stub and processes.
    with ThreadPoolExecutor(len(MOMENTS)) as pool:
        cases = [pool.submit(_campaign_case, fast_folder / moment.replace(":", "-"), signame, moment)
                 for moment in MOMENTS]
        for case in cases:
            case.result()
