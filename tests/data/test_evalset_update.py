"""``chunkwise validate --update`` (issue 62, item 1): questions that follow their excerpts.

A small corpus and questions whose excerpts are exact substrings are written here; the documents
are then edited as a team edits them (a paragraph inserted before excerpts, one excerpt reworded,
one deleted, a document renamed, one removed, a paragraph moved to another document, a sentence
that occurs twice). A real ``chunkwise validate --update`` process re-anchors the set, and every
expected offset is computed here, by ``str.index`` on the edited text, never from chunkwise's
output: every excerpt whose text still exists is at exactly the right offsets, every edited or
removed one is flagged, and nothing is silently wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner import load_corpus, load_evaluation_set
from tuner.review.store import ReviewStore

ROOT = Path(__file__).resolve().parents[2]

INTRO = "# Operations handbook\n\nThis handbook describes how the platform is run day to day.\n\n"
SHIFTED = "The backup service copies every volume to the archive bucket once a night, starting at 01:30."
REWORDED_OLD = ("The restore tool verifies every checksum against the manifest before it writes a single byte "
                "back to the target disk.")
REWORDED_NEW = ("The restore tool verifies every checksum against the signed manifest before it writes a single "
                "byte back to the target disk.")
DELETED = "Snapshots older than ninety days are pruned by the janitor job every Sunday morning."
REPEATED = "Check the dashboard before you page anyone."
REPEATED_CONTEXT = "When the queue grows past ten thousand messages, the on-call engineer is paged."
MOVED = "Billing exports run on the first business day of each month and land in the finance share."
RENAMED_1 = "Every node reaches the coordinator on port 7443 over mutual TLS with certificates from the internal CA."
RENAMED_2 = "Latency above eighty milliseconds between two regions raises an alert in the operations channel."
REMOVED = "The legacy importer accepts CSV files of at most fifty megabytes and rejects the rest."


def original_documents() -> dict[str, str]:
    return {
        "ops.md": (INTRO + "## Backups\n\n" + SHIFTED + "\n\n" + REWORDED_OLD + "\n\n" + DELETED + "\n\n"
                   + "## Alerts\n\n" + REPEATED + " The alert pages the secondary after five minutes.\n\n"
                   + REPEATED_CONTEXT + " " + REPEATED + "\n\n" + "## Billing\n\n" + MOVED + "\n"),
        "net.md": "# Network\n\n" + RENAMED_1 + "\n\n" + RENAMED_2 + "\n",
        "legacy.md": "# Legacy\n\n" + REMOVED + "\n",
        "finance.md": "# Finance\n\nThe finance team closes the books on the fifth of each month.\n",
    }


def edit_documents(docs: Path) -> dict[str, str]:
    """Edit the corpus in place as a team would; return the new texts by document."""
    ops = (docs / "ops.md").read_text(encoding="utf-8")
    ops = ops.replace(INTRO, INTRO + "A new paragraph inserted before every excerpt: it shifts all of them.\n\n")
    ops = ops.replace(REWORDED_OLD, REWORDED_NEW)
    ops = ops.replace(DELETED + "\n\n", "")
    ops = ops.replace("## Billing\n\n" + MOVED + "\n", "")
    (docs / "ops.md").write_text(ops, encoding="utf-8")
    (docs / "net.md").rename(docs / "network.md")
    (docs / "legacy.md").unlink()
    finance = (docs / "finance.md").read_text(encoding="utf-8") + "\n" + MOVED + "\n"
    (docs / "finance.md").write_text(finance, encoding="utf-8")
    return {path.name: path.read_text(encoding="utf-8") for path in docs.iterdir()}


#: (id, question, document, excerpt, which copy of the excerpt in the original document).
QUESTIONS = [
    ("shifted", "When do backups start?", "ops.md", SHIFTED, 0),
    ("reworded", "What does the restore tool verify?", "ops.md", REWORDED_OLD, 0),
    ("deleted", "When are old snapshots pruned?", "ops.md", DELETED, 0),
    ("second-copy", "What should you check before paging?", "ops.md", REPEATED, 1),
    ("context", "When is the on-call engineer paged?", "ops.md", REPEATED_CONTEXT, 0),
    ("moved", "When do billing exports run?", "ops.md", MOVED, 0),
    ("renamed-1", "Which port does the coordinator use?", "net.md", RENAMED_1, 0),
    ("renamed-2", "What latency raises an alert?", "net.md", RENAMED_2, 0),
    ("removed", "How large may an imported CSV be?", "legacy.md", REMOVED, 0),
]


def nth(text: str, part: str, n: int) -> int:
    at = text.index(part)
    for _ in range(n):
        at = text.index(part, at + 1)
    return at


@pytest.fixture
def edited(tmp_path):
    """The corpus and its questions as written, then the corpus edited: (docs, queries, new texts)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = original_documents()
    for name, text in texts.items():
        (docs / name).write_text(text, encoding="utf-8")
    queries = tmp_path / "questions.jsonl"
    with queries.open("w", encoding="utf-8") as out:
        for qid, question, document, excerpt, copy in QUESTIONS:
            start = nth(texts[document], excerpt, copy)
            out.write(json.dumps({"id": qid, "question": question, "review": "accepted", "references": [
                {"document": document, "start_index": start, "end_index": start + len(excerpt),
                 "content": excerpt}]}) + "\n")
    assert chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(queries)).returncode == 0
    return docs, queries, edit_documents(docs)


def chunkwise(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)


def read(path: Path) -> dict[str, dict]:
    return {record["id"]: record for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_an_update_reanchors_every_excerpt_and_flags_what_changed(tmp_path, edited):
    docs, queries, now = edited
    old = queries.read_bytes()
    out, report, summary = tmp_path / "new.jsonl", tmp_path / "update.json", tmp_path / "update.md"
    done = chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(queries), "--update",
                     "-o", str(out), "--report", str(report), "--report", str(summary))
    assert done.returncode == 0, done.stderr
    assert queries.read_bytes() == old  # -o elsewhere: the old set untouched
    new = read(out)
    assert list(new) == [q[0] for q in QUESTIONS]

    def at(document: str, excerpt: str, copy: int = 0) -> dict:
        start = nth(now[document], excerpt, copy)
        return {"document": document, "start_index": start, "end_index": start + len(excerpt), "content": excerpt}

    # The text still exists: exactly the right offsets, computed here on the edited text.
    expected = {"shifted": ("unchanged", at("ops.md", SHIFTED)),
                "second-copy": ("unchanged", at("ops.md", REPEATED, 1)),
                "context": ("unchanged", at("ops.md", REPEATED_CONTEXT)),
                "moved": ("moved", at("finance.md", MOVED)),
                "renamed-1": ("moved", at("network.md", RENAMED_1)),
                "renamed-2": ("moved", at("network.md", RENAMED_2)),
                "reworded": ("edited", at("ops.md", REWORDED_NEW))}
    for qid, (fate, reference) in expected.items():
        assert new[qid]["fate"] == fate, (qid, new[qid])
        assert new[qid]["references"] == [reference], qid
    # Not trusted silently: the edited one and the gone ones are stale; the others are not.
    assert new["reworded"]["stale"] is True
    for qid in ("deleted", "removed"):
        assert new[qid]["fate"] == "gone" and new[qid]["stale"] is True
        assert new[qid]["references"] == json.loads(old.decode().splitlines()[
            [q[0] for q in QUESTIONS].index(qid)])["references"]  # kept as they were, for the review
    assert [qid for qid, record in new.items() if record.get("stale")] == ["reworded", "deleted", "removed"]
    # Nothing silently wrong: every excerpt not flagged is its document's text at its offsets, unchanged.
    for qid, record in new.items():
        if not record.get("stale"):
            ref = record["references"][0]
            assert now[ref["document"]][ref["start_index"]:ref["end_index"]] == ref["content"]
            assert ref["content"] == next(q[3] for q in QUESTIONS if q[0] == qid)
    # Every question changed on disk has a new revision (a review open on the old file refuses a stale action).
    assert all(record["revision"] == 1 for record in new.values())
    # The report, JSON and markdown; the summary on the terminal.
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["questions"] == {"unchanged": 3, "moved": 3, "edited": 1, "gone": 2}
    assert data["flagged"][:2] == ["deleted", "removed"] and data["flagged"][2] == "reworded"
    by_id = {q["id"]: q for q in data["updated"]}
    assert by_id["reworded"]["references"][0]["was"]["content"] == REWORDED_OLD
    assert by_id["reworded"]["references"][0]["now"]["content"] == REWORDED_NEW
    assert by_id["removed"]["references"][0]["now"] is None
    markdown = summary.read_text(encoding="utf-8")
    assert markdown.index("## To review (3)") < markdown.index("**reworded**") < markdown.index("## Moved (3)")
    assert "updated 9 questions (9 references): 3 unchanged, 3 moved, 1 edited, 2 gone; 3 marked stale" in done.stdout
    # The new set loads everywhere: the gone questions left out, the edited one used and said so.
    loaded = chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(out))
    assert loaded.returncode == 0, loaded.stderr
    assert "2 stale (excerpt not found), left out" in loaded.stderr
    assert "1 used with an excerpt an update re-anchored to edited text" in loaded.stderr
    assert [q.id for q in load_evaluation_set(out, load_corpus(docs))] == [
        "shifted", "reworded", "second-copy", "context", "moved", "renamed-1", "renamed-2"]


def test_a_review_lists_the_edited_and_gone_questions_first(tmp_path, edited):
    docs, queries, _ = edited
    assert chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(queries), "--update",
                     "-o", str(queries)).returncode == 0
    store = ReviewStore(queries, load_corpus(docs))  # a question naming a removed document is no reason to refuse
    assert "2 marked stale whose excerpt is gone" in store.open().describe()
    state = store.state()
    assert [q["id"] for q in state["questions"]][:3] == ["reworded", "deleted", "removed"]
    assert [q["fate"] for q in state["questions"]][:3] == ["edited", "gone", "gone"]
    assert state["questions"][2]["references"][0]["problem"] == "gone"
    # Accepting the edited one clears its flag; it then goes back among the others.
    store.act({"action": "accept", "id": "reworded", "revision": 1})
    assert [q["id"] for q in store.state()["questions"]][:2] == ["deleted", "removed"]
    assert load_evaluation_set(queries, load_corpus(docs)).edited_excerpts == 0


def test_updating_in_place_replaces_the_file_only_when_complete(tmp_path, edited):
    docs, queries, now = edited
    done = chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(queries), "--update",
                     "-o", str(queries))
    assert done.returncode == 0, done.stderr
    assert read(queries)["shifted"]["references"][0]["start_index"] == now["ops.md"].index(SHIFTED)
    assert not [p.name for p in queries.parent.iterdir() if p.name.endswith(".tmp")]
    # A second update finds everything where the first put it: nothing moves again.
    again = chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(queries), "--update",
                      "-o", str(tmp_path / "again.jsonl"))
    assert again.returncode == 0, again.stderr
    first, second = read(queries), read(tmp_path / "again.jsonl")
    assert {q: r["references"] for q, r in first.items()} == {q: r["references"] for q, r in second.items()}


@pytest.mark.parametrize(("args", "message"), [
    (["--update"], "-o FILE: needed with --update, for the updated set"),
    (["--update", "-o", "new.jsonl", "--report", "r.txt"], "--report='r.txt' is invalid; allowed: a file ending in"),
    (["--report", "r.json"], "--report: only with --update"),
    (["--update", "-o", "new.jsonl", "--agreement", "own.jsonl"], "--agreement: not with --update, which re-anchors "
                                                                   "every reference and measures nothing"),
    (["--update", "-o", "missing/new.jsonl"], "cannot write missing/new.jsonl: the folder"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, edited, args, message):
    docs, queries, _ = edited
    before = queries.read_bytes()
    done = chunkwise(tmp_path, "validate", "--corpus", str(docs), "--queries", str(queries), *args)
    assert done.returncode == 2, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("chunkwise: error:")]
    assert len(error) == 1 and message in error[0], done.stderr
    assert "Traceback" not in done.stderr
    assert queries.read_bytes() == before and not (tmp_path / "new.jsonl").exists()


# ------------------------------------------------------------------ the hard cases, in-process

def _update(tmp_path: Path, before: dict[str, str], after: dict[str, str], references: list[dict]):
    """Questions (one per reference) written against ``before``, updated against ``after``."""
    from tuner.data.evalset.update import update_evaluation_set

    docs = tmp_path / "hard"
    docs.mkdir()
    queries = tmp_path / "hard.jsonl"
    with queries.open("w", encoding="utf-8") as out:
        for i, ref in enumerate(references):
            if "start_index" not in ref and ref.get("located", True):
                start = before[ref["document"]].index(ref["content"])
                ref = {**ref, "start_index": start, "end_index": start + len(ref["content"])}
            ref.pop("located", None)
            out.write(json.dumps({"id": f"h{i}", "question": f"Question {i}?", "references": [ref]}) + "\n")
    for name, text in after.items():
        (docs / name).write_text(text, encoding="utf-8")
    done = update_evaluation_set(queries, load_corpus(docs), tmp_path / "hard-new.jsonl")
    return done, read(tmp_path / "hard-new.jsonl")


def test_the_hard_cases_are_flagged_or_exact(tmp_path):
    sentence = "The warranty covers parts and labour for two full years after the date of purchase."
    delivered = sentence.replace("purchase", "delivery")
    wrapped = sentence.replace("for two", "for\ntwo")
    shared = "Restart the agent after every configuration change."
    before = {"a.md": f"Intro.\n\n{sentence}\n\nWrapped: {sentence}\n\nShort: red fox.\n",
              "gone.md": f"# Old\n\n{shared}\n", "keep.md": "Kept text that is located on every load.\n"}
    after = {"a.md": f"Intro.\n\n{delivered}\n\nWrapped: {wrapped}\n\nShort: blue fox.\n",
             "x.md": f"# X\n\n{shared}\n", "y.md": f"# Y\n\n{shared}\n",
             "keep.md": "New first line.\nKept text that is located on every load.\n"}
    text = before["a.md"]
    second = text.index(sentence, text.index(sentence) + 1)
    done, new = _update(tmp_path, before, after, [
        {"document": "a.md", "content": sentence},  # its last word edited
        {"document": "a.md", "start_index": second, "end_index": second + len(sentence), "content": sentence},
        {"document": "a.md", "content": "red fox."},  # too short for a near copy: gone, not a false edit
        {"document": "gone.md", "content": shared},  # its document removed; the text in two others
        {"document": "keep.md", "content": "Kept text that is located on every load.", "located": False},
    ])
    now = after["a.md"]
    assert new["h0"]["fate"] == "edited" and new["h0"]["stale"] is True
    assert new["h0"]["references"][0]["content"] == delivered
    assert new["h0"]["references"][0]["start_index"] == now.index(delivered)
    assert new["h1"]["fate"] == "edited" and new["h1"]["references"][0]["content"] == wrapped  # white space only
    assert new["h1"]["references"][0]["start_index"] == now.index(wrapped)
    assert new["h2"]["fate"] == "gone" and new["h2"]["stale"] is True
    assert new["h3"]["fate"] == "moved" and new["h3"]["stale"] is True  # two documents hold it: not trusted
    assert new["h3"]["references"][0]["content"] == shared
    assert new["h4"]["fate"] == "unchanged" and "start_index" not in new["h4"]["references"][0]
    assert "stale" not in new["h4"]
    assert [q.query.id for q in done.flagged] == ["h2", "h0", "h1", "h3"]
