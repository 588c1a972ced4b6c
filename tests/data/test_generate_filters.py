"""The field's filters for generated questions (issue 40, item 2), each against a reply written to
fail it, through the real openai client and a local stub; the yield table; passages drawn in
proportion to the corpus."""

from __future__ import annotations

import json
import random

import pytest

import tuner
from tuner.cli import main
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import Query, Reference
from tuner.data.generate import (
    CRITIQUE_INSTRUCTIONS,
    CRITIQUE_SCHEMA,
    REJECTIONS,
    GenerationReport,
    PassageSampler,
    generate_evaluation_set,
)
from tuner.evaluation.round_trip import round_trip
from tuner.llm.client import LLMClient

from fakes import HashedWordsEmbedder

#: One document, so every passage is the whole text and every excerpt below is in it.
TEXT = ("The backup tool compresses each archive before it uploads it. The compression method can be set to "
        "gzip, lz4, zstd, or none. Archives older than thirty days are deleted by the nightly cleanup job, "
        "which runs at two in the morning. Restores read the newest archive unless a date is given.\n")
EXCERPT = "The compression method can be set to gzip, lz4, zstd, or none."


@pytest.fixture
def corpus():
    return Corpus("backups", (Document("tool.md", TEXT),))


@pytest.fixture
def client(openai_server, tmp_path):
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=2,
                     cache_path=tmp_path / "llm.sqlite3")


def model(question: str, excerpt: str = EXCERPT, critique=5):
    """A stub model that writes ``question`` about ``excerpt`` and rates it ``critique``."""
    def reply(body):
        if body["messages"][-1]["content"].startswith(CRITIQUE_INSTRUCTIONS):
            return json.dumps({"answered": critique})
        return json.dumps({"question": question, "references": [{"content": excerpt}]})
    return reply


def _generate(openai_server, client, corpus, tmp_path, reply, **options) -> GenerationReport:
    openai_server.chat_handler = reply
    return generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(), max_attempts=1,
                                   relevance_threshold=-1.0, duplicate_threshold=1.0, **options)


@pytest.mark.critique
@pytest.mark.parametrize(("question", "reason"), [
    ("Here are two questions about backups: which compression methods exist?", "not a question"),
    ("According to the passage, which compression methods can be chosen?", "not standalone"),
    ("Which compression methods exist in the excerpt?", "not standalone"),
    ("Which compression methods exist, and when does the cleanup job run?", "asks two things"),
    ("Which compression methods exist? When are archives deleted?", "asks two things"),
    ("What compression method can be set to gzip, lz4, zstd, or none?", "question repeats its excerpt"),
])
def test_each_rule_rejects_the_reply_written_to_fail_it(openai_server, client, corpus, tmp_path, question, reason):
    report = _generate(openai_server, client, corpus, tmp_path, model(question))
    assert (report.accepted, report.rejected) == (0, {reason: 1})
    # Rejected before the critique: one request, the question's.
    assert len(openai_server.requests_to("/v1/chat/completions")) == 1
    assert not (tmp_path / "g.jsonl").exists()


@pytest.mark.critique
def test_an_excerpt_missing_from_the_passage_is_rejected(openai_server, client, corpus, tmp_path):
    report = _generate(openai_server, client, corpus, tmp_path,
                       model("Which compression methods exist?", "Backups are encrypted with AES."))
    assert report.rejected == {"reference not in the text": 1}


@pytest.mark.critique
@pytest.mark.parametrize("rating", [1, 2, 3])
def test_the_critique_keeps_only_fours_and_fives(openai_server, client, corpus, tmp_path, rating):
    report = _generate(openai_server, client, corpus, tmp_path,
                       model("Which compression methods can the backup tool use?", critique=rating))
    assert (report.accepted, report.rejected) == (0, {"critique: not answered by its excerpt": 1})
    critique = openai_server.requests_to("/v1/chat/completions")[1].json_body
    # The critique's schema goes with it, and it sees the question and its excerpt.
    assert critique["response_format"] == {"type": "json_object", "schema": CRITIQUE_SCHEMA}
    content = critique["messages"][-1]["content"]
    assert "Question: Which compression methods can the backup tool use?" in content and EXCERPT in content


@pytest.mark.critique
def test_a_good_question_rated_four_is_kept(openai_server, client, corpus, tmp_path):
    report = _generate(openai_server, client, corpus, tmp_path,
                       model("Which compression methods can the backup tool use?", critique=4))
    assert (report.accepted, report.rejected) == (1, {})
    [line] = (tmp_path / "g.jsonl").read_text().splitlines()
    reference = json.loads(line)["references"][0]
    assert TEXT[reference["start_index"]:reference["end_index"]] == EXCERPT


@pytest.mark.critique
def test_a_critique_that_is_not_json_is_asked_again(openai_server, client, corpus, tmp_path):
    replies = iter(["Answered: 5.", '{"answered": 5}'])
    question = model("Which compression methods can the backup tool use?")

    def reply(body):
        if body["messages"][-1]["content"].startswith(CRITIQUE_INSTRUCTIONS):
            return next(replies)
        return question(body)

    report = _generate(openai_server, client, corpus, tmp_path, reply)
    assert report.accepted == 1 and len(openai_server.requests_to("/v1/chat/completions")) == 3


def test_the_yield_table_counts_what_reached_each_filter():
    report = GenerationReport(accepted=2, attempts=10, seconds=50.0)
    report.rejected.update({"reference not in the text": 3, "asks two things": 1, "near-duplicate question": 4})
    rows = {line[:40].strip(): line[40:].split() for line in report.yield_table().splitlines()[1:-1]}
    assert list(rows) == list(REJECTIONS)
    # 10 requests; 3 lost at the excerpt, 1 at "two things", 4 at near-duplicates: 2 kept.
    assert rows["reference not in the text"] == ["10", "3"]
    assert rows["not a question"] == ["7", "0"]
    assert rows["asks two things"] == ["7", "1"]
    assert rows["near-duplicate question"] == ["6", "4"]
    assert rows["critique: not answered by its excerpt"] == ["2", "0"]
    assert report.yield_table().splitlines()[-1] == "kept 2 (20% of the requests), 25.0 s per kept question"


def test_passages_are_drawn_in_proportion_to_each_documents_size():
    # 3,000 and 1,000 characters: with 40 slices of 100 characters, slices 0-29 lie in the first
    # document and 30-39 in the second, so 40 draws give exactly 30 and 10.
    long_doc, short_doc = Document("long.md", "word " * 600), Document("short.md", "text " * 200)
    sampler = PassageSampler(Corpus("c", (long_doc, short_doc)), 50, 40, random.Random(0))
    drawn = [sampler.next() for _ in range(40)]
    assert sum(d == "long.md" for d, _, _ in drawn) == 30
    assert sum(d == "short.md" for d, _, _ in drawn) == 10
    # Every slice once: the passages' centres cover the long document in 30 distinct 100-character slices.
    centres = sorted((start + end) // 2 // 100 for d, start, end in drawn if d == "long.md")
    assert len(set(centres)) >= 25  # a centre moved inward at the ends may share a slice


def test_the_round_trip_is_counted_against_hand_placed_excerpts(corpus):
    found = Query("a", "Which compression methods does the backup tool support?", "backups",
                  (Reference("tool.md", TEXT.index(EXCERPT), TEXT.index(EXCERPT) + len(EXCERPT), EXCERPT),))
    # No word of this question is in the text: BM25 scores every chunk 0 and retrieves none.
    lost = Query("b", "Who wrote it?", "backups", found.references)
    assert round_trip([found, lost], corpus) == (1, 2)


@pytest.mark.critique
def test_the_command_prints_the_yield_table_round_trip_and_overlap(openai_server, tmp_path, capsys, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tool.md").write_text(TEXT)
    openai_server.chat_handler = model("Which compression methods can the backup tool use?")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(docs), "-o", str(out), "--n", "1", "--model", "stub-llm",
                 "--embedder", "openai:stub-embed", "--relevance-threshold", "-1"]) == 0
    printed = capsys.readouterr().out
    assert "critique: not answered by its excerpt" in printed and "kept 1 (100% of the requests)" in printed
    assert "round trip: 1 of 1 questions find their excerpt in BM25's top 5" in printed
    # {compress, method, backup, tool, use} against the excerpt's {compress, method, set, gzip, lz4, zstd, none}.
    assert "lexical overlap: a question's content words found in its excerpts, median 40%" in printed
    assert len(tuner.load_evaluation_set(out, tuner.load_corpus(docs))) == 1
