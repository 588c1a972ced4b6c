"""Safe at the edges, for runs and their storage: secrets, names, private files, clear failures.

Each test runs the real command line and asserts exit status 2 (or success), a message naming
the storage or value, no traceback, no password or key anywhere, and nothing left half-written.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from tuner.cli import main
from tuner.tuning.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
PASSWORD = "hunter2-s3cret"


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def tune_args(stub, storage: str, *extra: str, name: str = "safe") -> list[str]:
    return ["tune", "--name", name, "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
            "--space", "quick", "--embedder", "openai:stub-embed", "--base-url", stub.base_url,
            "--storage", storage, "--n-trials", "2", *extra]


def with_password(url: str) -> str:
    head, _, tail = url.partition("://")
    user, _, host = tail.partition("@")
    return f"{head}://{user.split(':')[0]}:{PASSWORD}@{host}"


@pytest.mark.slow
def test_a_postgresql_password_is_never_printed_or_stored(tmp_path, fresh_postgres_url, openai_server, capsys,
                                                          monkeypatch):
    # The test server trusts loopback connections, so any password is accepted (and ignored).
    url = with_password(fresh_postgres_url)
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    assert main(tune_args(openai_server, url)) == 0
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    assert ":***@" in err  # the "running ... in URL" line shows that a password is hidden
    portable = fresh_postgres_url  # no password at all in the commands printed to run elsewhere
    assert f"chunkwise dashboard --storage {portable}" in out
    assert "set CHUNKWISE_STORAGE_PASSWORD or PGPASSWORD" in out

    export = tmp_path / "best.json"
    assert main(["export", "--storage", url, "--study", "safe", "-o", str(export)]) == 0
    assert PASSWORD not in export.read_text(encoding="utf-8") + "".join(capsys.readouterr())
    assert ":***@" in json.loads(export.read_text(encoding="utf-8"))["source"]["storage"]
    study = optuna.load_study(study_name="safe/handbook", storage=make_storage(url))
    assert PASSWORD not in json.dumps(study.user_attrs) + json.dumps([t.user_attrs for t in study.trials])

    # A worker elsewhere takes the password from its environment.
    monkeypatch.setenv("CHUNKWISE_STORAGE_PASSWORD", PASSWORD)
    assert main(["worker", "--storage", fresh_postgres_url, "--study", "safe", "--n-trials", "1"]) == 0
    assert PASSWORD not in "".join(capsys.readouterr())


def test_an_unreachable_storage_is_named_without_its_password(capsys):
    pytest.importorskip("psycopg")
    url = f"postgresql+psycopg://alice:{PASSWORD}@127.0.0.1:1/studies"
    assert main(["export", "--storage", url, "--study", "x", "-o", "x.json"]) == 2
    err = capsys.readouterr().err
    assert "postgresql+psycopg://alice:***@127.0.0.1:1/studies" in err
    assert PASSWORD not in err and "Traceback" not in err
    assert not Path("x.json").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--name", "a?b"], "run name='a?b' is invalid; allowed: 1-100 letters"),
    (["--name", "../up"], "run name='../up' is invalid"),
    (["--corpus", f"x y={EXAMPLE}"], "corpus name='x y' is invalid"),
])
def test_unsafe_names_are_refused(tmp_path, args, message, capsys):
    base = {"--name": "ok", "--corpus": f"handbook={EXAMPLE}"}
    base.update(dict(zip(args[::2], args[1::2])))
    argv = ["tune", "--queries", str(QUERIES), "--storage", f"sqlite:///{tmp_path}/n.db",
            *[item for pair in base.items() for item in pair]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "n.db").exists()


def test_a_study_file_cannot_name_a_corpus_outside(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump({"name": "s", "corpora": {"../../evil": str(EXAMPLE)}, "queries": str(QUERIES),
                                     "space": "quick"}), encoding="utf-8")
    assert main(["tune", str(study)]) == 2
    assert "corpus name='../../evil' is invalid" in capsys.readouterr().err


def test_new_databases_are_private_quoted_and_leave_no_lock_file(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "my studies"
    storage = f"sqlite:///{folder}/run.db"
    assert main(tune_args(openai_server, storage)) == 0
    out = capsys.readouterr().out
    assert stat.S_IMODE((folder / "run.db").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("run.db-")) == ["run.db"]
    # The printed commands survive the space in the path.
    assert f"chunkwise dashboard --storage '{storage}'" in out


def test_a_busy_port_is_refused_before_listening(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    storage = f"sqlite:///{tmp_path}/d.db"
    make_storage(storage)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dashboard", "--storage", storage, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "optuna-dashboard on" not in err


def test_a_bad_key_stops_the_run_at_the_first_trial(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    openai_server.api_key = "the-right-key"
    storage = f"sqlite:///{tmp_path}/k.db"
    assert main(tune_args(openai_server, storage, "--n-trials", "10")) == 2
    err = capsys.readouterr().err
    assert "401" in err or "key" in err.lower()
    assert "test-key" not in err and "Traceback" not in err
    trials = optuna.load_study(study_name="safe/handbook", storage=make_storage(storage)).get_trials()
    # Stopped at once, not after five failures; the baselines it had queued behind the first
    # trial are settled as skipped (a later run queues them again), none is left waiting.
    assert [t.state.name for t in trials if "skipped" not in t.user_attrs] == ["FAIL"]
    assert all(t.state.name == "PRUNED" for t in trials if "skipped" in t.user_attrs)


def test_config_that_is_a_folder_and_yaml_configs(tmp_path, capsys):
    assert main(["chunk", "--config", str(tmp_path), str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "Traceback" not in err
    config = tmp_path / "c.yaml"
    config.write_text("chunker: {name: token, params: {size: 64}}\n", encoding="utf-8")
    out = tmp_path / "chunks.jsonl"
    assert main(["chunk", "--config", str(config), str(EXAMPLE), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").count("\n") > 10


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size: str):
    path.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_tune_on_a_full_disk_is_one_clear_error(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    with tiny_tmpfs(tmp_path / "full", "160k") as disk:
        storage = f"sqlite:///{disk}/run.db"
        code = main(tune_args(openai_server, storage, "--n-trials", "200"))
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"study storage sqlite:///{disk}/run.db" in err and "the disk is full: free some space" in err
        assert "Traceback" not in err
        if (disk / "run.db").exists():
            with sqlite3.connect(disk / "run.db") as db:
                assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            trials = optuna.load_study(study_name="safe/handbook", storage=make_storage(storage)).get_trials()
            assert not [t for t in trials if t.state.name == "RUNNING"]


def test_a_report_on_a_full_disk_leaves_no_truncated_file(tmp_path, openai_server, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    storage = f"sqlite:///{tmp_path}/r.db"
    assert main(tune_args(openai_server, storage)) == 0
    with tiny_tmpfs(tmp_path / "full", "1m") as disk:
        code = main(["report", "--study", "safe", "--storage", storage, "-o", str(disk / "report"),
                     "--bootstrap", "50", "--top", "1"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "No space left on device" in err and "Traceback" not in err
        leftovers = [p.name for p in (disk / "report").iterdir()] if (disk / "report").exists() else []
        assert not [name for name in leftovers if name.endswith(".tmp")]
        for name in leftovers:  # whatever was written is whole (the 4 MB plots did not fit)
            assert not name.endswith(".html"), leftovers


@pytest.mark.slow
def test_the_installed_wheel_tunes_from_an_empty_folder(tmp_path, openai_server):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(ROOT)], check=True, capture_output=True)
    (wheel,) = wheels.glob("chunkwise-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    # The fresh venv gets the wheel itself; its dependencies come from this environment's
    # site-packages (on the path, but not its .pth files: not this checkout's editable install).
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    deps = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "optuna").is_dir())
    (site / "deps.pth").write_text(deps + "\n", encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OPENAI_API_KEY="test-key", CHUNKWISE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "tuner", "tune", "--name", "w", "--corpus", f"handbook={EXAMPLE}",
         "--queries", str(QUERIES), "--space", "quick", "--embedder", "openai:stub-embed", "--base-url",
         openai_server.base_url, "--n-trials", "2"], cwd=empty, env=env, capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0, result.stderr
    assert (empty / "studies" / "w.db").is_file()
    located = subprocess.run([str(venv / "bin" / "python"), "-c", "import tuner; print(tuner.__file__)"],
                             cwd=empty, env=env, capture_output=True, text=True, check=True).stdout
    assert str(site) in located  # the wheel, not this checkout


# --- storage failures, told apart by cause -----------------------------------------------------

def _made_study(url: str) -> None:
    from tuner.tuning.run.ledger import Ledger

    storage = make_storage(url)
    optuna.create_study(storage=storage, study_name="safe/handbook", directions=["maximize", "maximize"])
    Ledger(storage)
    storage.engine.dispose()


@contextlib.contextmanager
def immutable(path: Path):
    """``chattr +i``: even root cannot write it (chmod does not stop root); skips where unsupported."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


READ_ONLY_HINT = ("the database cannot be written (read-only; for SQLite, the file or its folder, where SQLite writes "
                  "a journal beside it): make both writable, or give --storage URL elsewhere")


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_sqlite_study_says_so(tmp_path, capsys, what):
    folder = tmp_path / "studies"
    folder.mkdir()
    url = f"sqlite:///{folder}/run.db"
    _made_study(url)
    with immutable(folder / "run.db" if what == "file" else folder):
        code = main(["worker", "--storage", url, "--study", "safe", "--n-trials", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"chunkwise: error: study storage {url}: ")
    assert READ_ONLY_HINT in err and "disk" not in err


def test_a_stopped_postgresql_server_is_reported_as_gone(capsys):
    pytest.importorskip("psycopg")
    from postgres import ENV_VAR, PostgresUnavailable, postgres_server

    if os.environ.get(ENV_VAR):
        pytest.skip(f"{ENV_VAR} names a server the tests must not stop")
    try:
        with postgres_server() as url:
            storage = make_storage(url)
            study = optuna.create_study(storage=storage, study_name="safe/handbook",
                                        directions=["maximize", "maximize"])
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    # The server is stopped now; the run's storage object is what a running tune holds.
    from tuner.tuning.study.storage import StorageError, storage_errors

    with pytest.raises(StorageError) as raised, storage_errors(url):
        study.set_user_attr("x", 1)
    message = str(raised.value)
    assert "the database server cannot be reached or closed the connection: check that it is running" in message
    assert "disk" not in message and "exceeding max length" not in message


def _optuna_wrapped(error: Exception) -> Exception:
    """``error`` as Optuna raises a failed commit: a generic StorageInternalError ("... e.g.
    exceeding max length") from SQLAlchemy's wrapper of the driver's error."""
    import sqlalchemy as sa

    try:
        try:
            raise sa.exc.OperationalError("INSERT ...", {}, error) from error
        except sa.exc.OperationalError as wrapped:
            raise optuna.exceptions.StorageInternalError(
                "An exception is raised during the commit. This typically happens due to invalid data in the "
                "commit, e.g. exceeding max length. ") from wrapped
    except optuna.exceptions.StorageInternalError as outer:
        return outer


def test_a_lock_timeout_is_told_from_a_full_disk(tmp_path):
    from tuner.tuning.study.storage import storage_cause, storage_detail

    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    waiter = sqlite3.connect(path, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as raised:
        waiter.execute("INSERT INTO t VALUES (1)")
    holder.close()
    waiter.close()
    error = _optuna_wrapped(raised.value)
    assert storage_cause(error) == "locked"
    assert storage_detail(error) == "database is locked"
    # Optuna's generic words alone say nothing about the disk.
    assert storage_cause(optuna.exceptions.StorageInternalError("e.g. exceeding max length")) == "unknown"
