"""One clear message for each input the issue-30 campaign found answered badly (item 8): the
real command line, exit status 2, the message naming what is wrong, and nothing said twice."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from tuner.cli import main
from tuner.embedding.openai import OpenAIEmbedder
from tuner.errors import EmbeddingError
from tuner.tuning.run.processes import WorkerPool
from tuner.tuning.run.workers import WorkerOptions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


def error_of(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("chunkwise: error:") == 1, err
    return err


def test_a_key_given_twice_in_a_study_file_is_refused_with_both_lines(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(f"name: dup\ntrials: 2\ncorpora: {{handbook: {EXAMPLE}}}\nqueries: {QUERIES}\n"
                     "space: quick\ntrials: 3\n", encoding="utf-8")
    err = error_of(capsys, ["tune", str(study)])
    assert str(study) in err and "duplicate key 'trials' on lines 2 and 6" in err


def test_a_key_given_twice_in_a_search_space_is_refused(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("chunkers:\n  token:\n    size: [256, 512]\n    size: [128]\n", encoding="utf-8")
    err = error_of(capsys, ["tune", "--name", "dup", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                            "--space", str(space), "--dry-run"])
    assert "duplicate key 'size' on lines 3 and 4" in err


def test_a_negative_timeout_is_explained(tmp_path, capsys):
    for command in (["tune", "--name", "t", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES)],
                    ["worker", "--storage", f"sqlite:///{tmp_path}/none.db", "--study", "t"]):
        err = error_of(capsys, [*command, "--timeout", "-5m"])
        assert "--timeout='-5m' is invalid; allowed: a duration above 0 (a negative one is no time budget)" in err
        assert "expected one argument" not in err


def test_an_unknown_storage_scheme_is_named_with_the_supported_ones(tmp_path, capsys):
    err = error_of(capsys, ["export", "--storage", "foo://bar", "--study", "x", "-o", str(tmp_path / "x.json")])
    assert "unknown URL scheme 'foo'" in err and "sqlite:///" in err and "postgresql+psycopg://" in err
    assert "Can't load plugin" not in err and "reachable" not in err


def test_a_missing_postgresql_database_is_not_an_unreachable_server(postgres_url, tmp_path, capsys):
    missing = sa.make_url(postgres_url).set(database="chunkwise_no_such_db").render_as_string(hide_password=False)
    err = error_of(capsys, ["export", "--storage", missing, "--study", "x", "-o", str(tmp_path / "x.json")])
    assert "database does not exist" in err and "cannot be reached" not in err


def test_a_corpus_name_with_a_slash_is_named_invalid(capsys):
    err = error_of(capsys, ["tune", "--name", "c", "--corpus", f"../x={EXAMPLE}", "--queries", str(QUERIES)])
    assert "'../x' is not a valid corpus name" in err and "does not exist" not in err
    err = error_of(capsys, ["tune", "--name", "c", "--corpus", "../x=nowhere/docs", "--queries", str(QUERIES)])
    assert "'../x' is not a valid corpus name" in err and "'nowhere/docs' does not exist" in err


def test_an_unknown_weight_in_a_study_file_names_the_file_once(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(f"name: w\ncorpora: {{handbook: {EXAMPLE}}}\nqueries: {QUERIES}\nspace: quick\n"
                     "weights: {recal: 1}\n", encoding="utf-8")
    err = error_of(capsys, ["tune", str(study)])
    assert err.count(str(study)) == 1 and "recal" in err


@pytest.fixture
def cut_short_server():
    """An HTTP server that announces 1,000 bytes of JSON, sends 20, and closes the connection."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                while len(body) < length:
                    body += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                             b'{"object": "list", "')

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    server.close()


def test_a_truncated_embedding_reply_is_not_an_unreachable_endpoint(cut_short_server):
    embedder = OpenAIEmbedder("stub-embed", base_url=cut_short_server, api_key="k", max_retries=1)
    with pytest.raises(EmbeddingError) as error:
        embedder.embed(["a text"])
    message = str(error.value)
    assert "truncated reply" in message and "cannot reach" not in message and cut_short_server in message


def test_workers_failing_alike_report_their_error_once(capfd):
    pytest.importorskip("psycopg")
    storage = "postgresql+psycopg://nobody@127.0.0.1:1/studies"  # nothing listens on port 1
    options = [WorkerOptions(storage=storage, study="s/handbook", seed=i, threads=1) for i in range(3)]
    report = WorkerPool(options, echo=print).run(lambda: True)
    assert len(report.errors) == 1 and "127.0.0.1:1" in report.errors[0], report.errors
    out, err = capfd.readouterr()
    assert "127.0.0.1:1" not in out + err  # the workers print nothing: the run prints the pool's errors
