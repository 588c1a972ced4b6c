"""The review's questions file without a browser: actions saved atomically and valid at every moment,
revisions refusing a stale edit, many writers losing nothing, stale questions, a file that does not
match its corpus, the loader's states, and ``chunkwise review`` as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.data.corpus import load_corpus
from tuner.data.evalset import load_evaluation_set
from tuner.errors import EvaluationSetError
from tuner.review import ReviewError, ReviewServer, ReviewStore

TEXT = "Intro line.\n\nThe warranty lasts two years.\nReturns are accepted within 30 days.\n"


def ref(text: str, excerpt: str, document: str = "a.md") -> dict:
    start = text.index(excerpt)
    return {"document": document, "start_index": start, "end_index": start + len(excerpt), "content": excerpt}


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def records(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(TEXT, encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    write(queries, [{"id": f"q{i}", "question": f"Question {i}?", "origin": "generated", "model": "m",
                     "references": [ref(TEXT, "The warranty lasts two years.")]} for i in range(1, 9)])
    return folder, queries


def test_each_action_leaves_a_valid_file_and_the_loader_counts_states(files):
    folder, queries = files
    corpus = load_corpus(folder)
    store = ReviewStore(queries, corpus)
    assert store.open().describe() == "8 questions"
    before = load_evaluation_set(queries, corpus).sha256
    store.act({"action": "accept", "id": "q1", "revision": 0})
    assert load_evaluation_set(queries, corpus).sha256 == before  # accepting changes no question
    store.act({"action": "reject", "id": "q2", "revision": 0})
    done = store.act({"action": "edit", "id": "q3", "revision": 0, "question": "  How long is the warranty? ",
                      "references": [ref(TEXT, "two years")]})
    assert done["question"]["review"] == "edited" and done["question"]["revision"] == 1
    store.act({"action": "new", "question": "Within how many days?", "references": [ref(TEXT, "30 days")]})
    evalset = load_evaluation_set(queries, corpus)
    assert len(evalset) == 8  # q2 left out, r0001 added
    assert evalset.states == {"generated": 5, "accepted": 1, "edited": 1, "hand": 1, "rejected": 1}
    assert evalset.describe_states() == ("read 9 questions: 1 hand-written, 5 generated not reviewed, 1 accepted, "
                                         "1 edited; 1 rejected, left out")
    saved = records(queries)
    assert saved["q3"]["question"] == "How long is the warranty?"
    assert saved["q3"]["references"] == [ref(TEXT, "two years")]
    assert saved["r0001"] == {"id": "r0001", "question": "Within how many days?", "corpus": "docs",
                              "references": [ref(TEXT, "30 days")], "origin": "hand"}
    assert len(load_evaluation_set(queries, corpus, rejected=True)) == 9
    assert not list(queries.parent.glob("*.tmp*"))  # no temporary file left behind


def test_an_edit_made_on_an_older_revision_is_refused(files):
    folder, queries = files
    store = ReviewStore(queries, load_corpus(folder))
    store.open()
    store.act({"action": "accept", "id": "q1", "revision": 0})
    with pytest.raises(ReviewError, match="changed elsewhere") as refused:
        store.act({"action": "edit", "id": "q1", "revision": 0, "question": "Old?",
                   "references": [ref(TEXT, "two years")]})
    assert refused.value.status == 409
    assert records(queries)["q1"]["review"] == "accepted" and records(queries)["q1"]["question"] == "Question 1?"


@pytest.mark.parametrize(("action", "message"), [
    ({"action": "edit", "id": "q1", "revision": 0, "question": "", "references": [ref(TEXT, "two years")]},
     "the question is empty"),
    ({"action": "edit", "id": "q1", "revision": 0, "question": "Q?", "references": []}, "at least one excerpt"),
    ({"action": "edit", "id": "q1", "revision": 0, "question": "Q?",
      "references": [{"document": "../a.md", "start_index": 0, "end_index": 3}]}, "no document '../a.md'"),
    ({"action": "edit", "id": "q1", "revision": 0, "question": "Q?",
      "references": [{"document": "a.md", "start_index": 5, "end_index": 500}]}, r"offsets \[5:500\]"),
    ({"action": "edit", "id": "q1", "revision": 0, "question": "Q?",
      "references": [{"document": "a.md", "start_index": 0, "end_index": 5, "content": "other"}]}, "does not match"),
    ({"action": "accept", "id": "q99", "revision": 0}, "no question 'q99'"),
    ({"action": "delete", "id": "q1"}, "one of accept, reject, edit, new"),
])
def test_bad_actions_are_refused_with_a_message_and_change_nothing(files, action, message):
    folder, queries = files
    store = ReviewStore(queries, load_corpus(folder))
    store.open()
    before = queries.read_bytes()
    with pytest.raises(ReviewError, match=message):
        store.act(action)
    assert queries.read_bytes() == before


def test_many_writers_at_once_lose_no_write(files):
    folder, queries = files
    corpus = load_corpus(folder)
    server = ReviewServer(ReviewStore(queries, corpus))
    server.store.open()
    server.start()
    base, token = server.url.split("?token=")
    errors = []

    def post(action: dict) -> None:
        request = urllib.request.Request(base + "api/action", data=json.dumps(action).encode(), method="POST",
                                         headers={"X-Chunkwise-Token": token})
        try:
            urllib.request.urlopen(request, timeout=30).read()
        except urllib.error.HTTPError as exc:
            errors.append(exc.read())

    actions = [{"action": "accept" if i % 2 else "reject", "id": f"q{i}", "revision": 0} for i in range(1, 9)]
    actions += [{"action": "new", "question": f"New {i}?", "references": [ref(TEXT, "30 days")]} for i in range(8)]
    threads = [threading.Thread(target=post, args=(a,)) for a in actions]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.stop()
    assert errors == []
    saved = records(queries)
    assert {i: saved[f"q{i}"]["review"] for i in range(1, 9)} == {i: "accepted" if i % 2 else "rejected"
                                                                 for i in range(1, 9)}
    assert sorted(r["question"] for r in saved.values() if r["id"].startswith("r")) == [f"New {i}?" for i in range(8)]
    assert len(load_evaluation_set(queries, corpus)) == 12


def test_two_reviews_of_one_file_lose_no_write(files):
    folder, queries = files  # two servers (two processes' stores) on one file: each action waits for the other's
    corpus = load_corpus(folder)
    stores = [ReviewStore(queries, corpus), ReviewStore(queries, corpus)]
    stores[0].open()
    new = [threading.Thread(target=stores[i % 2].act, args=({"action": "new", "question": f"New {i}?",
                                                               "references": [ref(TEXT, "30 days")]},))
           for i in range(20)]
    for thread in new:
        thread.start()
    for thread in new:
        thread.join()
    saved = records(queries)
    assert sorted(r["question"] for r in saved.values() if r["id"].startswith("r")) == sorted(
        f"New {i}?" for i in range(20))
    assert len(saved) == 28


def test_a_changed_document_marks_its_questions_stale(files):
    folder, queries = files
    write(queries, [
        {"id": "moved", "question": "How long?", "references": [ref(TEXT, "The warranty lasts two years.")]},
        {"id": "gone", "question": "Returns?", "review": "accepted",
         "references": [ref(TEXT, "Returns are accepted within 30 days.")]},
        {"question": "No id?", "references": [ref(TEXT, "Intro line.")]},
    ])
    changed = "New first paragraph.\n\n" + TEXT.replace("Returns are accepted within 30 days.", "No returns.")
    (folder / "a.md").write_text(changed, encoding="utf-8")
    corpus = load_corpus(folder)
    store = ReviewStore(queries, corpus)
    assert store.open().describe() == ("3 questions; 2 marked stale (their document changed; excerpt re-located); "
                                       "1 marked stale whose excerpt is gone (left out of tune until edited); "
                                       "1 given the id they had by line number")
    saved = records(queries)
    assert saved["moved"]["stale"] is True and saved["moved"]["references"] == [
        ref(changed, "The warranty lasts two years.")]
    assert saved["gone"]["stale"] is True
    assert saved["line-3"]["references"] == [ref(changed, "Intro line.")]
    evalset = load_evaluation_set(queries, corpus)  # valid: the stale question whose excerpt is gone left out
    assert [q.id for q in evalset] == ["moved", "line-3"]
    assert evalset.describe_states() == "read 3 questions: 2 hand-written; 1 stale (excerpt not found), left out"
    with pytest.raises(ReviewError, match=r"excerpt 1 is not in 'a\.md' any more"):
        store.act({"action": "accept", "id": "gone", "revision": 0})
    store.act({"action": "edit", "id": "gone", "revision": 0, "question": "Returns?",
               "references": [ref(changed, "No returns.")]})
    store.act({"action": "accept", "id": "moved", "revision": 0})
    saved = records(queries)
    assert "stale" not in saved["gone"] and "stale" not in saved["moved"]
    assert len(load_evaluation_set(queries, corpus)) == 3


@pytest.mark.parametrize(("record", "message"), [
    ({"id": "x", "question": "Q?", "references": [{"document": "b.md", "content": "x"}]},
     "q.jsonl:1 (Q?): reference 1 names unknown document 'b.md' in corpus 'docs'"),
    ({"id": "x", "question": "Q?", "corpus": "handbook", "references": []},
     "q.jsonl:1 (Q?): unknown corpus 'handbook' (loaded: 'docs')"),
])
def test_a_questions_file_that_does_not_match_the_corpus_is_refused(files, record, message):
    folder, queries = files
    write(queries, [record])
    with pytest.raises(EvaluationSetError, match=r"q\.jsonl' does not match its corpus: \d problem") as refused:
        ReviewStore(queries, load_corpus(folder)).open()
    assert message in str(refused.value) and "Is corpus_path the corpus" in str(refused.value)


def test_a_malformed_question_is_named_without_blaming_the_corpus(files):
    folder, queries = files
    write(queries, [{"id": "x", "references": []}])
    with pytest.raises(EvaluationSetError, match=r"q.jsonl:1: missing field 'question'") as refused:
        ReviewStore(queries, load_corpus(folder)).open()
    assert "corpus" not in str(refused.value)


def test_review_as_a_command(files, capsys):
    folder, queries = files
    write(queries, [{"id": "x", "question": "Q?", "references": [{"document": "b.md", "content": "x"}]}])
    assert main(["review", "--corpus", str(folder), "--queries", str(queries)]) == 2
    assert "q.jsonl' does not match its corpus" in capsys.readouterr().err
    assert main(["review", "--corpus", str(folder), "--queries", str(queries.with_suffix(".csv"))]) == 2
    assert "review reads and writes chunkwise JSONL" in capsys.readouterr().err


def test_review_serves_until_sigterm(files, tmp_path):
    folder, _ = files
    new = tmp_path / "new.jsonl"  # created by the first new question
    process = subprocess.Popen([sys.executable, "-m", "tuner.cli", "review", "--corpus", str(folder),
                                "--queries", str(new)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith(f"review {new} at http://127.0.0.1:") and "?token=" in line
        url = line.split(" at ", 1)[1].split()[0]
        base, token = url.split("?token=")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "api/state", timeout=10)
        assert refused.value.code == 403
        request = urllib.request.Request(base + "api/action", method="POST", headers={"X-Chunkwise-Token": token},
                                         data=json.dumps({"action": "new", "question": "Q?",
                                                          "references": [ref(TEXT, "30 days")]}).encode())
        assert json.loads(urllib.request.urlopen(request, timeout=10).read())["question"]["id"] == "r0001"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert err.endswith(f"review stopped; every action is saved in {new}\n")
    assert len(load_evaluation_set(new, load_corpus(folder))) == 1


def test_validate_leaves_rejected_questions_out_and_counts_each_state(files, capsys):
    folder, queries = files
    store = ReviewStore(queries, load_corpus(folder))
    store.open()
    store.act({"action": "reject", "id": "q1", "revision": 0})
    store.act({"action": "accept", "id": "q2", "revision": 0})
    assert main(["validate", "--corpus", str(folder), "--queries", str(queries)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("7 queries, 7 references")
    assert "read 8 questions: 6 generated not reviewed, 1 accepted; 1 rejected, left out\n" in err


def test_a_killed_review_keeps_every_action_it_answered(files):
    folder, queries = files
    process = subprocess.Popen([sys.executable, "-m", "tuner.cli", "review", "--corpus", str(folder),
                                "--queries", str(queries)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        base, token = process.stdout.readline().split(" at ", 1)[1].split()[0].split("?token=")
        for i in range(1, 6):
            action = {"action": "reject" if i == 3 else "accept", "id": f"q{i}", "revision": 0}
            request = urllib.request.Request(base + "api/action", method="POST", data=json.dumps(action).encode(),
                                             headers={"X-Chunkwise-Token": token})
            urllib.request.urlopen(request, timeout=10).read()
    finally:
        process.kill()  # SIGKILL: no clean-up runs
        process.communicate(timeout=30)
    saved = records(queries)
    assert [saved[f"q{i}"].get("review") for i in range(1, 9)] == ["accepted", "accepted", "rejected", "accepted",
                                                                   "accepted", None, None, None]
    assert len(load_evaluation_set(queries, load_corpus(folder))) == 7
    assert sorted(p.name for p in queries.parent.iterdir()) == ["docs", "q.jsonl"]  # no temporary file
