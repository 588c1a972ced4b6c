"""Several questions asked of one passage in one request (``per_passage``, issue 63), through the
real openai client and a local stub: each question is located and filtered on its own, a run stops
in the middle of a reply once it has what it wants, and the request says how many it asks for."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import tuner
from tuner.cli import main
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.generate import REPLY_SCHEMA, GenerationReport, generate_evaluation_set
from tuner.llm.client import LLMClient

from fakes import HashedWordsEmbedder

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"

#: One document, so every passage is the whole text.
TEXT = ("The backup tool compresses each archive before it uploads it. The compression method can be set to "
        "gzip, lz4, zstd, or none. Archives older than thirty days are deleted by the nightly cleanup job, "
        "which runs at two in the morning. Restores read the newest archive unless a date is given.\n")
METHODS = "The compression method can be set to gzip, lz4, zstd, or none."
CLEANUP = "Archives older than thirty days are deleted by the nightly cleanup job, which runs at two in the morning."
RESTORES = "Restores read the newest archive unless a date is given."


@pytest.fixture
def client(openai_server):
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=False)


@pytest.fixture
def corpus():
    return Corpus("backups", (Document("tool.md", TEXT),))


def reply_with(*written: tuple[str, str]):
    """A model that answers every request with these (question, excerpt) pairs."""
    def handler(body):
        return json.dumps({"questions": [{"question": q, "references": [{"content": e}]} for q, e in written]})
    return handler


def test_each_question_of_a_reply_is_located_and_filtered_on_its_own(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = reply_with(
        ("Which compression methods can the backup tool use?", METHODS),
        ("When does the nightly cleanup job run?", CLEANUP),
        ("Where are archives stored on the moon?", "Archives are stored on the moon."),  # not in the text
        ("Which compression methods can the Backup Tool use?", METHODS))  # the first again, case aside
    out = tmp_path / "g.jsonl"
    report = generate_evaluation_set(corpus, out, 10, client, HashedWordsEmbedder(), max_attempts=1,
                                     relevance_threshold=-1.0, critique=False,
                                     per_passage=4)
    assert (report.attempts, report.questions, report.accepted) == (1, 4, 2)
    assert dict(report.rejected) == {"reference not in the text": 1, "near-duplicate question": 1}
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [q["id"] for q in kept] == ["g0001", "g0002"]
    # Offsets counted by hand in TEXT: METHODS follows the first sentence (61 characters and a space),
    # CLEANUP follows METHODS (62 characters and a space).
    assert [(r["start_index"], r["end_index"]) for q in kept for r in q["references"]] == \
        [(62, 62 + len(METHODS)), (125, 125 + len(CLEANUP))]
    tuner.load_evaluation_set(out, corpus)  # every offset checked again on load

    (request,) = openai_server.requests_to("/v1/chat/completions")
    body = request.json_body
    assert body["messages"][-1]["content"].startswith("You write questions")
    assert "Write 4 different questions" in body["messages"][-1]["content"]
    schema = body["response_format"]["schema"]
    assert schema["properties"]["questions"]["maxItems"] == 4
    assert schema["properties"]["questions"]["items"] == REPLY_SCHEMA
    # The yield table starts from the questions written, not the requests.
    table = report.yield_table().splitlines()
    assert table[1].split()[-2:] == ["4", "0"]
    assert table[-1].startswith("kept 2 (50% of 4 questions written in 1 requests, 2.00 per request)")


def test_a_run_stops_in_the_middle_of_a_reply_once_it_has_n(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = reply_with(("Which compression methods can the backup tool use?", METHODS),
                                            ("When does the nightly cleanup job run?", CLEANUP),
                                            ("Which archive does a restore read by default?", RESTORES))
    out = tmp_path / "g.jsonl"
    report = generate_evaluation_set(corpus, out, 2, client, HashedWordsEmbedder(), relevance_threshold=-1.0,
                                     critique=False, per_passage=3)
    # The third question is neither kept nor counted as rejected: it was never filtered.
    assert (report.attempts, report.questions, report.accepted, dict(report.rejected)) == (1, 2, 2, {})
    assert len(out.read_text().splitlines()) == 2
    # A run continued toward more asks again, and keeps the two it has.
    more = generate_evaluation_set(corpus, out, 3, client, HashedWordsEmbedder(), relevance_threshold=-1.0,
                                   critique=False, per_passage=3)
    assert (more.already, more.accepted) == (2, 1)
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["g0001", "g0002", "g0003"]


def test_a_reply_with_one_question_object_counts_as_one(openai_server, client, corpus, tmp_path):
    # A model that ignores the array and answers as to a request for one question.
    openai_server.chat_handler = lambda body: json.dumps(
        {"question": "Which compression methods can the backup tool use?", "references": [{"content": METHODS}]})
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=-1.0, critique=False, per_passage=3)
    assert (report.attempts, report.questions, report.accepted) == (1, 1, 1)


def test_one_question_per_passage_asks_as_before(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = lambda body: json.dumps(
        {"question": "Which compression methods can the backup tool use?", "references": [{"content": METHODS}]})
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=-1.0, critique=False)
    assert (report.attempts, report.questions, report.accepted) == (1, None, 1)
    (request,) = openai_server.requests_to("/v1/chat/completions")
    assert request.json_body["response_format"]["schema"] == REPLY_SCHEMA
    assert "Write ONE question" in request.json_body["messages"][-1]["content"]


def test_the_yield_table_of_requests_for_several_questions():
    report = GenerationReport(accepted=6, attempts=4, questions=12, seconds=60.0)
    report.rejected.update({"reference not in the text": 4, "near-duplicate question": 2})
    rows = {line[:40].strip(): line[40:].split() for line in report.yield_table().splitlines()[1:-1]}
    assert rows["reference not in the text"] == ["12", "4"]
    assert rows["near-duplicate question"] == ["8", "2"]
    assert rows["critique: not answered by its excerpt"] == ["6", "0"]
    assert report.yield_table().splitlines()[-1] == \
        "kept 6 (50% of 12 questions written in 4 requests, 1.50 per request), 10.0 s per kept question"


@pytest.mark.parametrize("extra, message", [
    (["--per-passage", "6"], "--per-passage=6 is invalid; allowed: an integer in [1, 5]"),
    (["--per-passage", "0"], "--per-passage=0 is invalid; allowed: an integer in [1, 5]"),
    (["--per-passage", "2", "--excerpts", "sampled"],
     "--per-passage 2: only with --excerpts model: a sampled excerpt is asked about alone"),
])
def test_a_bad_per_passage_is_refused_before_the_corpus_is_read(tmp_path, capsys, extra, message):
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(tmp_path / "no-such-folder"), "-o", str(out), "--model", "stub-llm",
                 *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "no-such-folder" not in err and "Traceback" not in err and not out.exists()


def test_the_python_api_names_the_parameter(openai_server, client, corpus, tmp_path):
    with pytest.raises(tuner.errors.InvalidParameterError, match=r"per_passage=2: only with excerpts=model"):
        generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(), per_passage=2,
                                excerpts="sampled")
    assert openai_server.requests == [] and not (tmp_path / "g.jsonl").exists()


def test_a_reply_without_a_usable_question_is_asked_again_and_never_cached(openai_server, corpus, tmp_path):
    # The first reply holds no question (an empty list, then an item without one); the third is good.
    replies = iter([json.dumps({"questions": []}), json.dumps({"questions": [{"references": ["x"]}]}),
                    json.dumps({"questions": [{"question": "Which compression methods can the backup tool use?",
                                               "references": [{"content": METHODS}]}]})])
    openai_server.chat_handler = lambda body: next(replies)
    cache = tmp_path / "llm.sqlite3"
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=2,
                       cache_path=cache)
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=-1.0, critique=False, per_passage=2)
    assert (report.attempts, report.questions, report.accepted) == (1, 1, 1)
    assert len(openai_server.requests_to("/v1/chat/completions")) == 3

    with sqlite3.connect(cache) as db:
        (stored,) = db.execute("SELECT value FROM responses").fetchone()
    assert "Which compression methods" in stored and db.execute("SELECT COUNT(*) FROM responses").fetchone() == (1,)
