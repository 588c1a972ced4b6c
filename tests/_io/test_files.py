"""Writing files safely: atomic replacement, symlinks, special files, full disks, private modes."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import stat
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tuner._io.files import atomic_writer, private_dir, private_file, write_atomically, write_stdout
from tuner.embedding.cache import EmbeddingCache, EmbeddingCacheError, text_key
from tuner.errors import ChunkwiseError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _umask_022():
    """The common umask, so modes are what a user would see (and independent of the CI's)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


# --- atomic replacement ---------------------------------------------------------------

def test_new_file_is_created_private(tmp_path):
    target = tmp_path / "best.json"
    write_atomically(target, '{"a": 1}\n')
    assert target.read_text(encoding="utf-8") == '{"a": 1}\n'
    assert mode(target) == 0o600
    assert listing(tmp_path) == ["best.json"]


def test_existing_file_keeps_its_mode_when_replaced(tmp_path):
    target = tmp_path / "shared.jsonl"
    target.write_text("old\n")
    os.chmod(target, 0o644)
    write_atomically(target, "new\r\nline\n")
    assert target.read_bytes() == b"new\r\nline\n"  # no newline translation
    assert mode(target) == 0o644
    assert listing(tmp_path) == ["shared.jsonl"]


def test_symlink_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "config.json"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "current.json"
    link.symlink_to(Path("real") / "config.json")  # relative link
    write_atomically(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real/config.json"
    assert real.read_text() == "new" and mode(real) == 0o640
    assert listing(tmp_path / "real") == ["config.json"] and listing(tmp_path) == ["current.json", "real"]


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "target.jsonl")
    write_atomically(link, "x\n")
    assert link.is_symlink() and (tmp_path / "target.jsonl").read_text() == "x\n"


def _fifo(path):
    os.mkfifo(path)


def _socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.mark.parametrize(("make", "kind"), [
    (_fifo, "a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "a directory"),
    (_socket, "a socket"),
])
def test_special_files_are_refused_and_left_alone(tmp_path, make, kind):
    target = tmp_path / "out.json"
    keep = make(target)
    try:
        with pytest.raises(ChunkwiseError) as error:
            write_atomically(target, "data")  # a FIFO would block here if it were opened
        assert str(error.value).startswith(f"refusing to write {target}: it is {kind}, not a regular file")
        assert "'-' to write to standard output" in str(error.value)
        assert listing(tmp_path) == ["out.json"]  # no temporary file either
        # A link to it is refused just the same (the message names the path given).
        link = tmp_path / "link.json"
        link.symlink_to(target)
        with pytest.raises(ChunkwiseError, match=re.escape(f"refusing to write {link}: it is {kind}")):
            write_atomically(link, "data")
    finally:
        if keep is not None:
            keep.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_device_node_is_refused():
    with pytest.raises(ChunkwiseError, match="refusing to write /dev/full: it is a character device"):
        write_atomically("/dev/full", "data")


def test_missing_folder_is_named(tmp_path):
    target = tmp_path / "nope" / "out.json"
    with pytest.raises(ChunkwiseError, match=f"cannot write {target}: folder {tmp_path / 'nope'} does not exist"):
        write_atomically(target, "data")


def test_full_disk_leaves_target_unchanged_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    monkeypatch.setattr(os, "write", enospc)
    with pytest.raises(ChunkwiseError) as error:
        write_atomically(target, "new\n" * 1000)
    assert str(error.value) == (f"cannot write {target}: No space left on device (free some space or write "
                                f"elsewhere); {target} is unchanged")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert listing(tmp_path) == ["out.jsonl"]
    # A new file is not created at all.
    monkeypatch.setattr(os, "write", enospc)
    with pytest.raises(ChunkwiseError, match="No space left on device"):
        write_atomically(tmp_path / "new.jsonl", "x")
    assert listing(tmp_path) == ["out.jsonl"]


def test_full_disk_while_syncing_also_cleans_up(tmp_path, monkeypatch):
    target = tmp_path / "out.jsonl"
    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(ChunkwiseError, match="No space left"):
        write_atomically(target, "x")
    assert listing(tmp_path) == []


def test_streaming_writer_commits_only_a_complete_file(tmp_path):
    target = tmp_path / "big.jsonl"
    with atomic_writer(target) as out:
        for i in range(3):
            out.write(f"{i}\n")
        assert not target.exists()  # nothing visible before the block ends
    assert target.read_text() == "0\n1\n2\n"
    with pytest.raises(KeyError), atomic_writer(target) as out:
        out.write("partial\n")
        raise KeyError("interrupted")  # the caller's own error goes through unchanged
    assert target.read_text() == "0\n1\n2\n"
    assert listing(tmp_path) == ["big.jsonl"]


@contextlib.contextmanager
def tiny_tmpfs(folder: Path, size: str = "64k"):
    """A real, tiny file system to fill; skips the test where mounting is not allowed."""
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_really_full_disk(tmp_path):
    with tiny_tmpfs(tmp_path / "small") as small:
        target = small / "out.txt"
        target.write_text("old")
        with pytest.raises(ChunkwiseError, match=f"cannot write {target}: No space left on device"):
            write_atomically(target, "x" * 200_000)
        assert target.read_text() == "old"
        assert listing(small) == ["out.txt"]

        cache = EmbeddingCache(small / "cache" / "embeddings.sqlite3")
        with pytest.raises(EmbeddingCacheError) as error:
            for round_ in range(50):
                keys = [text_key(f"{round_}-{i}") for i in range(50)]
                cache.put_many("m", keys, np.ones((50, 64), dtype=np.float32))
        assert error.value.fatal
        assert f"the embedding cache {small / 'cache' / 'embeddings.sqlite3'} cannot grow: the disk is full" \
            in str(error.value)
        cache.close()
        names = listing(small / "cache")
        assert set(names) <= {"embeddings.sqlite3", "embeddings.sqlite3-wal", "embeddings.sqlite3-shm"}


# --- standard output --------------------------------------------------------------------

def test_dash_means_standard_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_atomically("-", "line 1\n")
    with atomic_writer("-") as out:
        out.write("line 2\n")
    assert capsys.readouterr().out == "line 1\nline 2\n"
    assert listing(tmp_path) == []  # no file named "-"
    write_atomically(Path("-"), "a file")  # a Path is always a file
    assert (tmp_path / "-").read_text() == "a file"


class FailingStdout:
    def __init__(self, exc):
        self.exc = exc

    def write(self, text):
        raise self.exc

    def flush(self):
        raise self.exc


@pytest.mark.parametrize(("exc", "message"), [
    (BrokenPipeError(errno.EPIPE, "Broken pipe"),
     "cannot write to standard output: the program reading it has stopped (broken pipe)"),
    (OSError(errno.ENOSPC, "No space left on device"), "cannot write to standard output: No space left on device"),
])
def test_standard_output_failures_are_clear_errors(monkeypatch, exc, message):
    monkeypatch.setattr(sys, "stdout", FailingStdout(exc))
    with pytest.raises(ChunkwiseError) as error:
        write_stdout("data\n")
    assert str(error.value) == message


def _validate_to_stdout(stdout, tmp_path):
    corpus = tmp_path / "doc.md"
    corpus.write_text("The warranty lasts two years.\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"question": "How long?", "references": [{"document": "doc.md", "start_index": 4, '
                       '"end_index": 12, "content": "warranty"}]}\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuner", "validate", "--corpus", str(corpus),
                           "--queries", str(queries), "-o", "-"],
                          stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, timeout=60)


def test_cli_output_to_a_closed_pipe_or_full_device(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the first write fails with EPIPE
    try:
        done = _validate_to_stdout(write_end, tmp_path)
    finally:
        os.close(write_end)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == ("chunkwise: error: cannot write to standard output: the program "
                                            "reading it has stopped (broken pipe)")
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            done = _validate_to_stdout(full, tmp_path)
        assert done.returncode == 2
        assert done.stderr.splitlines()[-1] == ("chunkwise: error: cannot write to standard output: "
                                                "No space left on device")
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


# --- private folders and files ------------------------------------------------------------

def test_private_dir_creates_missing_folders_0700_and_leaves_existing_ones(tmp_path):
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    created = private_dir(existing / "a" / "b")
    assert created == existing / "a" / "b"
    assert (mode(existing), mode(existing / "a"), mode(existing / "a" / "b")) == (0o755, 0o700, 0o700)
    private_dir(existing / "a" / "b")  # again: nothing to do
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        private_dir(tmp_path / "file")


def test_private_file_creates_an_empty_0600_file_once(tmp_path):
    path = tmp_path / "db.sqlite3"
    assert private_file(path) is True
    assert (path.read_bytes(), mode(path)) == (b"", 0o600)
    path.write_text("data")
    os.chmod(path, 0o644)
    assert private_file(path) is False
    assert (path.read_text(), mode(path)) == ("data", 0o644)


def test_embedding_cache_files_and_folders_are_private(tmp_path):
    path = tmp_path / "new" / "cache" / "embeddings.sqlite3"
    cache = EmbeddingCache(path)
    cache.put_many("m", [text_key("a")], np.ones((1, 4), dtype=np.float32))
    assert mode(tmp_path / "new") == 0o700 and mode(tmp_path / "new" / "cache") == 0o700
    files = listing(path.parent)
    assert files == ["embeddings.sqlite3", "embeddings.sqlite3-shm", "embeddings.sqlite3-wal"]
    assert [mode(path.parent / f) for f in files] == [0o600, 0o600, 0o600]
    cache.close()


def test_llm_response_cache_is_private(tmp_path):
    from tuner.llm.client import LLMClient

    path = tmp_path / "llm" / "llm.sqlite3"
    client = LLMClient(model="m", api_key="k", cache_path=path)
    client._store("key", {"content": "hi"})
    assert client._cached("key") == {"content": "hi"}
    assert mode(tmp_path / "llm") == 0o700
    assert {f: mode(path.parent / f) for f in listing(path.parent)} == {
        "llm.sqlite3": 0o600, "llm.sqlite3-shm": 0o600, "llm.sqlite3-wal": 0o600}


class FakeLocalEmbedder:
    identity = "fake-local:v1"
    batch_size = 16

    def embed_uncached(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


def test_calibration_file_is_private_and_never_half_written(tmp_path, monkeypatch):
    from tuner.tuning.scoring import calibration
    path = tmp_path / "cache" / "calibration.json"
    monkeypatch.setattr(calibration, "calibration_file", lambda: path)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 2))
    with monkeypatch.context() as full_disk:
        full_disk.setattr(os, "write", enospc)
        assert calibration.calibrated_throughput(FakeLocalEmbedder()) > 0  # only costs a re-measurement later
    assert listing(path.parent) == []  # and leaves no temporary file behind
    calibration.calibrated_throughput(FakeLocalEmbedder())
    assert listing(path.parent) == ["calibration.json"] and mode(path) == 0o600
    assert list(json.loads(path.read_text())) == ["fake-local:v1|threads=2"]


def test_a_study_says_it_measures_throughput_only_when_it_does(tmp_path, monkeypatch):
    from tuner.embedding.config import EmbedderConfig
    from tuner.tuning.core.objective import Rates
    from tuner.tuning.scoring import calibration
    from tuner.tuning.study import settings

    from fakes import study_settings
    monkeypatch.setattr(calibration, "calibration_file", lambda: tmp_path / "calibration.json")
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 2))
    monkeypatch.setattr(settings, "shared_embedder", lambda config, cache: FakeLocalEmbedder())
    said: list[str] = []
    for _ in range(2):  # two new studies on one machine: the second reuses the measurement
        resolved = settings.resolve_study_rates(study_settings(), Rates(), [EmbedderConfig()], None, said.append)
        assert resolved.resolved_rates
    assert len(said) == 1 and "measuring its throughput" in said[0]


# --- the embedding cache on a full disk ---------------------------------------------------

def test_full_embedding_cache_is_a_clear_fatal_error(tmp_path):
    path = tmp_path / "embeddings.sqlite3"
    cache = EmbeddingCache(path)
    cache.put_many("m", [text_key("first")], np.ones((1, 4), dtype=np.float32))
    cache._connection().execute("PRAGMA max_page_count = 3")  # SQLite reports this like a full disk
    keys = [text_key(str(i)) for i in range(500)]
    with pytest.raises(EmbeddingCacheError) as error:
        cache.put_many("m", keys, np.ones((500, 64), dtype=np.float32))
    assert str(error.value) == (f"the embedding cache {path} cannot grow: the disk is full. Free some space there, "
                                "give cache=FILE on another disk, or run without a cache (cache=None)")
    assert error.value.fatal
    assert cache.count("m") == 1  # the failed batch left nothing half-stored
    cache.close()
    assert set(listing(tmp_path)) <= {"embeddings.sqlite3", "embeddings.sqlite3-wal", "embeddings.sqlite3-shm"}


def test_damaged_embedding_cache_is_a_clear_error(tmp_path):
    path = tmp_path / "embeddings.sqlite3"
    path.write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(EmbeddingCacheError) as error:
        EmbeddingCache(path).count()
    assert str(error.value) == (f"cannot use the embedding cache {path}: file is not a database. Give cache=FILE "
                                "elsewhere, or run without a cache (cache=None)")
    assert not error.value.fatal
