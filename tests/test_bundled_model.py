"""The bundled question writer's model file (issue 40, item 1): assembled from its parts in order,
checked by size and sha256 before every use; a wrong, partial or missing piece is one message.

The parts are small packages the test writes (the real model is 1.1 GB); the expected size and
sha256 are computed here from the bytes written, independently of the code under test.
"""

from __future__ import annotations

import hashlib
import os
import sys

import pytest

from tuner.cli import main
from tuner.llm.local_server import QUESTION_WRITER, BundledModel, LLMServerUnavailable, assembled

PARTS = (b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5)


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """Three installed packages ``fakepart1..3``, each holding ``data/partNN.bin``."""
    site = tmp_path / "site"
    for i, data in enumerate(PARTS, start=1):
        folder = site / f"fakepart{i}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{i:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    return site


def _model(*, size: int | None = None, sha256: str | None = None) -> BundledModel:
    whole = b"".join(PARTS)
    return BundledModel("fake", "fakepart1", "Fake 1B", 10, parts=("fakepart1", "fakepart2", "fakepart3"),
                        size=len(whole) if size is None else size,
                        sha256=hashlib.sha256(whole).hexdigest() if sha256 is None else sha256)


def test_the_parts_are_assembled_in_order_once(parts, tmp_path):
    path = assembled(_model(), tmp_path / "models")
    assert path == tmp_path / "models" / "fake.gguf" and path.read_bytes() == b"".join(PARTS)
    assert os.listdir(tmp_path / "models") == ["fake.gguf"]  # no partial file left behind
    before = path.stat().st_mtime_ns
    assert assembled(_model(), tmp_path / "models") == path and path.stat().st_mtime_ns == before  # checked, kept


def test_an_assembly_killed_midway_leaves_nothing_for_good(parts, tmp_path):
    # A process killed while it concatenated left its partial file; one still running keeps its own.
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    models = tmp_path / "models"
    models.mkdir()
    (models / f".fake.gguf.{gone.pid}.partial").write_bytes(b"GGUF" + b"a" * 10)
    running = models / f".fake.gguf.{os.getppid()}.partial"
    running.write_bytes(b"x")
    assembled(_model(), models)
    assert not (models / f".fake.gguf.{gone.pid}.partial").exists()
    assert running.exists() and (models / "fake.gguf").read_bytes() == b"".join(PARTS)


def test_bundled_takes_no_other_model(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The scheduler runs each job once per window, in the order the jobs arrived.\n")
    code = main(["generate", str(docs), "-o", str(tmp_path / "q.jsonl"), "--bundled", "--model", "gpt-4o-mini",
                 "--embedder", "openai:none"])
    err = capsys.readouterr().err
    assert code == 2 and "chunkwise: error: --bundled runs its own model: leave out --model and --base-url" in err


def test_a_partial_file_is_one_message(parts, tmp_path):
    path = assembled(_model(), tmp_path / "models")
    with open(path, "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(LLMServerUnavailable, match=r"fake.gguf is 100 bytes, not the 1,786 of Fake 1B \(a partial"):
        assembled(_model(), tmp_path / "models")


def test_a_changed_file_of_the_right_size_is_one_message(parts, tmp_path):
    path = assembled(_model(), tmp_path / "models")
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    path.write_bytes(bytes(data))
    changed = r"fake.gguf has sha256 [0-9a-f]{16}\.\.\., not .* \(it was changed\)"
    with pytest.raises(LLMServerUnavailable, match=changed):
        assembled(_model(), tmp_path / "models")


def test_a_missing_part_is_named_and_nothing_is_written(parts, tmp_path):
    sys.modules.pop("fakepart2", None)
    (parts / "fakepart2" / "__init__.py").unlink()
    (parts / "fakepart2" / "data" / "part02.bin").unlink()
    (parts / "fakepart2" / "data").rmdir()
    (parts / "fakepart2").rmdir()
    with pytest.raises(LLMServerUnavailable, match=r"needs the Python package 'fakepart2', which is not installed"):
        assembled(_model(), tmp_path / "models")
    assert not (tmp_path / "models").exists()


def test_a_file_where_the_models_folder_should_be_is_named(parts, tmp_path):
    # Issue 54: this said "File exists".
    (tmp_path / "models").write_text("not a folder")
    with pytest.raises(LLMServerUnavailable) as raised:
        assembled(_model(), tmp_path / "models")
    assert str(raised.value) == (f"cannot assemble Fake 1B in {tmp_path / 'models'}: {tmp_path / 'models'} is a "
                                 "file, not a folder: move it away")
    assert (tmp_path / "models").read_text() == "not a folder"


def test_parts_of_another_version_leave_no_file(parts, tmp_path):
    with pytest.raises(LLMServerUnavailable, match=r"give a file of 1,786 bytes and sha256 .* install the pinned"):
        assembled(_model(sha256="0" * 64), tmp_path / "models")
    assert os.listdir(tmp_path / "models") == []


def test_generate_bundled_refuses_a_wrong_model_file_in_one_line(tmp_path, monkeypatch, capsys):
    # The real writer's definition, the real command: a truncated file where the model belongs.
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    (models / QUESTION_WRITER.file_name).write_bytes(b"GGUF" + b"\0" * 60)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The scheduler runs each job once per window, in the order the jobs arrived.\n")
    out = tmp_path / "q.jsonl"
    code = main(["generate", str(docs), "-o", str(out), "--bundled", "--embedder", "openai:none"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    [line] = [x for x in err.splitlines() if x.startswith("chunkwise: error:")]
    assert f"{QUESTION_WRITER.file_name} is 64 bytes, not the 1,117,320,768 of {QUESTION_WRITER.description}" in line
    assert "Traceback" not in err


@pytest.mark.parametrize(("flag", "critiqued"), [(None, False), ("--critique", True), ("--no-critique", False)])
def test_the_bundled_writer_skips_its_own_critique_unless_asked(openai_server, tmp_path, monkeypatch, capsys, flag,
                                                                 critiqued):
    """Its ratings were measured uninformative (QUESTION_WRITER.critiques is False): ``--bundled``
    keeps questions without the critique's request unless ``--critique`` asks for it. The bundled
    server is stood in for by the OpenAI stub, which tells the two requests apart by their text."""
    import contextlib
    import json

    import tuner.cli.generate as generate_cli
    from tuner.llm.client import LLMClient

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    critiques = []

    def reply(body):
        content = body["messages"][-1]["content"]
        if "<excerpt>" in content:
            critiques.append(content)
            return json.dumps({"answered": 5})
        sentence = content.split("<passage>\n", 1)[1].split("\n</passage>", 1)[0].strip().splitlines()[0]
        return json.dumps({"question": "In which order does the scheduler start queued work?",
                           "references": [{"content": sentence}]})

    openai_server.chat_handler = reply
    monkeypatch.setattr(generate_cli, "bundled_writer", lambda args: contextlib.nullcontext(
        LLMClient(model="qwen2.5-coder-1.5b", base_url=openai_server.base_url, api_key="none")))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The scheduler runs each job once per window, in the order the jobs arrived.\n")
    out = tmp_path / "q.jsonl"
    argv = ["generate", str(docs), "-o", str(out), "--n", "1", "--bundled", "--embedder", "openai:stub-embed",
            "--relevance-threshold", "-1"] + ([flag] if flag else [])
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert len(critiques) == (1 if critiqued else 0)
    assert ("its questions are kept without its critique (--critique asks for it anyway)" in err) == (flag is None)
    assert len(out.read_text().splitlines()) == 1
