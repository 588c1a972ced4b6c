"""The levers of issue 49 (item 2) for generated questions, through the real openai client and a
local stub: the team's own questions as examples, passages drawn across documents and sections,
the answer round trip, and what users ask (with the classifier of a set's styles)."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

import tuner
from tuner.cli import main
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.generate import (
    ANSWER_INSTRUCTIONS,
    ANSWER_SCHEMA,
    CRITIQUE_INSTRUCTIONS,
    EXAMPLES_HEADER,
    INSTRUCTIONS,
    PROMPT_VERSION,
    USERS_RULE,
    Asking,
    generate_evaluation_set,
    question_style,
    read_example_questions,
)
from tuner.llm.client import LLMClient

from fakes import HashedWordsEmbedder

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"

#: One document, so every passage is the whole text.
TEXT = ("The backup tool compresses each archive before it uploads it. The compression method can be set to "
        "gzip, lz4, zstd, or none. Archives older than thirty days are deleted by the nightly cleanup job, "
        "which runs at two in the morning. Restores read the newest archive unless a date is given.\n")
EXCERPT = "The compression method can be set to gzip, lz4, zstd, or none."


@pytest.fixture
def client(openai_server, tmp_path):
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=2,
                     cache_path=tmp_path / "llm.sqlite3")


@pytest.fixture
def uncached(openai_server):
    """A client that sends every request: a test that counts requests for passages drawn more than
    once (the same passage is the same request) must see each of them."""
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=False)


def user_message(body) -> str:
    return body["messages"][-1]["content"]


def passage_of(body) -> str:
    return user_message(body).split("<passage>\n", 1)[1].split("\n</passage>", 1)[0]


def shown_examples(body) -> list[str]:
    """The example questions a request shows: the list after the header, up to the blank line."""
    content = user_message(body)
    if EXAMPLES_HEADER not in content:
        return []
    block = content.split(EXAMPLES_HEADER + "\n", 1)[1].split("\n\n", 1)[0]
    return [line[2:] for line in block.splitlines()]


def chat_requests(stub):
    return stub.requests_to("/v1/chat/completions")


def question_requests(stub):
    return [r for r in chat_requests(stub) if user_message(r.json_body).startswith(INSTRUCTIONS.split("\n")[0])]


# ---------------------------------------------------------------- the team's questions as examples

#: Twenty questions the team asked, about another corpus (their offsets mean nothing here), and one
#: a review rejected.
OWN = [f"How do I configure retention rule number {i} for the warehouse?" for i in range(20)]


def write_own(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as file:
        for i, question in enumerate(OWN):
            file.write(json.dumps({"id": f"own{i}", "question": question, "corpus": "elsewhere",
                                   "references": [{"document": "other.md", "start_index": 5, "end_index": 9,
                                                   "content": "nope"}]}) + "\n")
        file.write(json.dumps({"id": "bad", "question": "A rejected question?", "corpus": "elsewhere",
                               "review": "rejected", "references": []}) + "\n")
    return path


def test_the_examples_are_shown_and_a_question_copying_one_is_rejected(openai_server, uncached, tmp_path):
    corpus = Corpus("backups", (Document("tool.md", TEXT),))
    later = iter(["Which compression methods can the backup tool use?", "When does the nightly cleanup run?"])

    def reply(body):
        shown = shown_examples(body)
        asked = len(question_requests(openai_server))
        if asked == 1:
            question = "  " + shown[3].upper().replace(" ", "   ")  # a copy, case and spaces aside
        elif asked == 2:
            question = shown[5].rstrip("?") + " please?"  # a near-duplicate of one
        else:
            question = next(later)
        return json.dumps({"question": question, "references": [{"content": EXCERPT}]})

    openai_server.chat_handler = reply
    out = tmp_path / "g.jsonl"
    own = write_own(tmp_path / "own.jsonl")
    report = generate_evaluation_set(corpus, out, 2, uncached, HashedWordsEmbedder(), max_attempts=4,
                                     relevance_threshold=-1.0, critique=False, examples=own, seed=7)
    assert (report.accepted, report.attempts, dict(report.rejected)) == (2, 4, {"copies an example": 2})
    requests = chat_requests(openai_server)
    assert len(requests) == 4
    shown = shown_examples(requests[0].json_body)
    # Eight of the twenty, one from each eighth of the file, in its order; the rejected one never.
    assert len(shown) == 8 and all(q in OWN for q in shown)
    positions = [OWN.index(q) for q in shown]
    assert [p * 8 // 20 for p in positions] == list(range(8))
    # The same eight with every request (the seed chose them, not the attempt).
    assert all(shown_examples(r.json_body) == shown for r in requests)
    written = [json.loads(line)["question"] for line in out.read_text().splitlines()]
    assert written == ["Which compression methods can the backup tool use?", "When does the nightly cleanup run?"]
    # The yield table has the new row, between the rule-based filters and the near-duplicates.
    table = report.yield_table().splitlines()
    rows = [line[:40].strip() for line in table[1:-1]]
    assert rows.index("question repeats its excerpt") < rows.index("copies an example") < \
        rows.index("near-duplicate question")
    assert table[1 + rows.index("copies an example")].split()[-1] == "2"


def test_examples_change_the_prompts_cache_version(openai_server, client, tmp_path):
    corpus = Corpus("backups", (Document("tool.md", TEXT),))
    openai_server.chat_handler = lambda body: json.dumps({"question": "Which compression methods can the backup "
                                                          "tool use?", "references": [{"content": EXCERPT}]})
    options = dict(relevance_threshold=-1.0, critique=False)
    generate_evaluation_set(corpus, tmp_path / "a.jsonl", 1, client, HashedWordsEmbedder(), **options)
    assert len(chat_requests(openai_server)) == 1
    generate_evaluation_set(corpus, tmp_path / "b.jsonl", 1, client, HashedWordsEmbedder(), **options,
                            examples=["How do I restore last week's archive?"])
    generate_evaluation_set(corpus, tmp_path / "c.jsonl", 1, client, HashedWordsEmbedder(), **options, style="users")
    assert len(chat_requests(openai_server)) == 3  # neither is served the plain prompt's cached reply
    report = generate_evaluation_set(corpus, tmp_path / "d.jsonl", 1, client, HashedWordsEmbedder(), **options)
    assert report.cached == 1 and len(chat_requests(openai_server)) == 3  # the plain prompt: cached as before


def test_examples_are_read_leniently_from_jsonl_and_csv(tmp_path):
    # JSONL: only the question texts; the rejected one left out; excerpts about other documents are fine.
    assert read_example_questions(write_own(tmp_path / "own.jsonl")) == OWN
    path = tmp_path / "own.csv"
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["question", "references", "corpus_id"])
        writer.writerow(["Why is my job  stuck?", "[]", "not-a-corpus"])
        writer.writerow(["why is my job stuck?", "[]", "not-a-corpus"])  # the same, case and spaces aside
        writer.writerow(["What happens when a node dies?", "not json", "x"])
    assert read_example_questions(path) == ["Why is my job stuck?", "What happens when a node dies?"]


# ---------------------------------------------------------------- bad inputs: one message, exit 2, nothing written

@pytest.mark.parametrize(("extra", "message"), [
    (["--examples", "{tmp}/missing.jsonl"], "examples file '{tmp}/missing.jsonl' does not exist"),
    (["--examples", "{tmp}/empty.jsonl"], "examples file '{tmp}/empty.jsonl' holds no question"),
    (["--examples", "{tmp}/blank.csv"], "examples file '{tmp}/blank.csv' holds no question"),
    (["--examples", "{tmp}/broken.jsonl"], "{tmp}/broken.jsonl:1: not valid JSON"),
    (["--draw", "nope"], "argument --draw: invalid choice: 'nope' (choose from 'size', 'documents', 'mix')"),
    (["--style", "nope"], "argument --style: invalid choice: 'nope' (choose from 'lookup', 'users')"),
])
def test_a_bad_lever_is_one_message_and_exit_2_with_nothing_written(openai_server, tmp_path, capsys, monkeypatch,
                                                                     extra, message):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "blank.csv").write_text("question,references,corpus_id\n")
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    out = tmp_path / "g.jsonl"
    argv = ["generate", str(EXAMPLE), "-o", str(out), "--n", "2", "--base-url", openai_server.base_url,
            "--model", "stub-llm", *(arg.replace("{tmp}", str(tmp_path)) for arg in extra)]
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message.replace("{tmp}", str(tmp_path)) in errors[0]
    assert "Traceback" not in err
    assert not out.exists() and openai_server.requests == []


def exit_status(argv: list[str]) -> int:
    """``main``'s status, also when argparse exits for it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


# ---------------------------------------------------------------- passages across documents and sections

def sectioned(name: str, sizes: dict[str, int]) -> Document:
    """A document whose sections (one heading each) hold only their own word, ``sizes`` characters each."""
    parts = []
    for level, (word, size) in enumerate(sizes.items(), start=1):
        parts.append(f"{'#' * level} {word.title()}\n\n" + (f"{word} " * (size // (len(word) + 1))).strip() + "\n\n")
    return Document(name, "".join(parts))


def test_documents_of_very_unequal_sizes_are_asked_about_equally_often(openai_server, uncached, tmp_path):
    # 60,000 characters in three sections of 40,000, 15,000 and 5,000 (and a heading inside code,
    # which is no section), against 3,000 and 300 in documents without headings.
    big = sectioned("big.md", {"alpha": 40_000, "beta": 15_000, "gamma": 5_000})
    big = Document(big.id, big.text.replace("## Beta\n\n", "## Beta\n\n```\n# not a heading\n```\n\n"))
    corpus = Corpus("c", (big, Document("medium.md", "medium words here. " * 160),
                          Document("tiny.md", "tiny words here. " * 18)))
    openai_server.chat_handler = lambda body: json.dumps({"question": "Where is it?",
                                                          "references": [{"content": "on the moon"}]})

    def drawn(draw: str) -> tuple[Counter, Counter]:
        openai_server.reset()
        generate_evaluation_set(corpus, tmp_path / f"{draw}.jsonl", 36, uncached, HashedWordsEmbedder(),
                                max_attempts=36, passage_chars=600, critique=False, draw=draw, seed=3)
        documents, sections = Counter(), Counter()
        for request in chat_requests(openai_server):
            document = re.search(r"Passage from (\S+):", user_message(request.json_body)).group(1)
            passage = passage_of(request.json_body)
            assert passage in corpus.document(document).text  # an exact stretch of the document
            documents[document] += 1
            if document == "big.md":
                [word] = {w for w in ("alpha", "beta", "gamma") if f"{w} {w}" in passage}
                sections[word] += 1
        return documents, sections

    documents, sections = drawn("documents")
    assert documents == {"big.md": 12, "medium.md": 12, "tiny.md": 12}
    assert sections == {"alpha": 4, "beta": 4, "gamma": 4}
    # Today's default, in proportion to size: the big document gets nearly every passage.
    documents, sections = drawn("size")
    assert documents["big.md"] >= 30 and documents["tiny.md"] <= 1
    assert sections["alpha"] > sections["gamma"]
    # Both in turn: 18 draws round-robin (6 a document, 2 a section of big.md), and 18 slices of
    # about 3,500 characters, of which the first 17 lie wholly in big.md's 60,000.
    documents, sections = drawn("mix")
    assert documents["big.md"] >= 6 + 17 and documents["medium.md"] >= 6 and 6 <= documents["tiny.md"] <= 7
    assert sum(documents.values()) == 36


def test_passages_drawn_across_documents_keep_exact_offsets(openai_server, client, tmp_path):
    questions = iter(["Who gets paged first?", "Where do the settings live?", "How do I install it offline?",
                      "When does a job start?", "What should I check first after a crash?"])

    def reply(body):
        sentence = re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage_of(body))[0]
        return json.dumps({"question": next(questions), "references": [{"content": sentence}]})

    openai_server.chat_handler = reply
    corpus = tuner.load_corpus(EXAMPLE)
    out = tmp_path / "g.jsonl"
    report = generate_evaluation_set(corpus, out, 5, client, HashedWordsEmbedder(), relevance_threshold=-1.0,
                                     duplicate_threshold=1.0, critique=False, draw="documents")
    assert (report.accepted, report.attempts) == (5, 5)
    evalset = tuner.load_evaluation_set(out, corpus)  # validates every offset
    assert len({q.references[0].document for q in evalset}) == 5  # five documents, one question each


def test_a_short_section_drawn_again_is_shown_whole_with_other_context():
    import random

    from tuner.data.generate import SectionSampler

    # Three 200-character sections in a 2,000-character document; 300-character passages.
    text = "filler words. " * 50 + "# One\n" + "one " * 50 + "\n# Two\n" + "two " * 50 + "\n# Three\n" + \
        "three " * 34 + "\n" + "more filler. " * 50
    sampler = SectionSampler(Corpus("c", (Document("d.md", text),)), 300, random.Random(0))
    windows = [sampler.next() for _ in range(40)]
    two = text.index("# Two"), text.index("# Three")
    around_two = [(start, end) for _, start, end in windows if start <= two[0] and two[1] <= end]
    assert len(around_two) >= 8  # a quarter of the draws (four sections: the filler before the first heading too)
    assert len(set(around_two)) >= 4  # not the same request again and again


# ---------------------------------------------------------------- the answer round trip

def answering(answer: str):
    """A model that asks about the compression methods (citing ``EXCERPT``) and answers ``answer``."""
    def reply(body):
        if user_message(body).startswith(ANSWER_INSTRUCTIONS):
            return json.dumps({"answer": answer})
        if user_message(body).startswith(CRITIQUE_INSTRUCTIONS):
            return json.dumps({"answered": 5})
        return json.dumps({"question": "Which compression methods can the backup tool use?",
                           "references": [{"content": EXCERPT}]})
    return reply


@pytest.mark.parametrize(("answer", "kept"), [
    ("gzip, lz4, zstd, or none", True),  # inside the excerpt
    ("The backup tool compresses each archive before it uploads it. The compression method", True),  # overlaps it
    ("which runs at two in the morning", False),  # elsewhere in the passage
    ("It uses brotli.", False),  # not in the passage at all
])
def test_the_answer_check_keeps_only_an_answer_inside_the_excerpt(openai_server, client, tmp_path, answer, kept):
    corpus = Corpus("backups", (Document("tool.md", TEXT),))
    openai_server.chat_handler = answering(answer)
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(), max_attempts=1,
                                     relevance_threshold=-1.0, answer_check=True)
    assert report.accepted == int(kept)
    assert dict(report.rejected) == ({} if kept else {"answer outside its excerpt": 1})
    requests = chat_requests(openai_server)
    # The question, its answer round trip, and (only for a kept one) the critique after it.
    assert len(requests) == (3 if kept else 2)
    check = requests[1].json_body
    assert check["response_format"] == {"type": "json_object", "schema": ANSWER_SCHEMA}
    assert passage_of(check) == TEXT  # the passage the question was asked about
    assert user_message(check).endswith("Question: Which compression methods can the backup tool use?")
    if kept:
        assert user_message(requests[2].json_body).startswith(CRITIQUE_INSTRUCTIONS)


def test_without_the_answer_check_no_answer_is_asked(openai_server, client, tmp_path):
    corpus = Corpus("backups", (Document("tool.md", TEXT),))
    openai_server.chat_handler = answering("which runs at two in the morning")
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=-1.0, critique=False)
    assert report.accepted == 1 and len(chat_requests(openai_server)) == 1


# ---------------------------------------------------------------- what users ask, and the styles of a set

@pytest.mark.parametrize(("question", "style"), [
    ("How do I move the scheduler to another machine?", "how-to"),
    ("How can we run two workers against one study?", "how-to"),
    ("What is the best way to rotate the alert keys?", "how-to"),
    ("Is it possible to pause a job without losing its queue?", "how-to"),
    ("Why does the nightly job skip archives on Sundays?", "why"),
    ("What causes a stale lock after a crash?", "why"),
    ("What is the purpose of the warm-up run?", "why"),
    ("What happens when the disk fills up during a backup?", "what-happens"),
    ("What if two alerts fire at the same second?", "what-happens"),
    ("What does the scheduler do when a worker disappears?", "what-happens"),
    ("Which option sets the retention period?", "identifier"),
    ("What is the default value of the timeout?", "identifier"),
    ("What does `retry_limit` control?", "identifier"),
    ("Why does max_jobs default to four?", "identifier"),  # a code identifier wins over "why"
    ("How do I use --dry-run on a schedule?", "identifier"),
    ("What does Scheduler.submit return?", "identifier"),
    ("When should I call flush()?", "identifier"),
    ("How many archives are kept, e.g. per week?", "other"),
    ("Who receives the pager alerts at night?", "other"),
    ("What is the well-known port of the dashboard?", "other"),
])
def test_question_style_on_hand_written_questions(question, style):
    assert question_style(question) == style


def test_the_users_style_and_every_lever_from_the_command(openai_server, tmp_path, capsys, monkeypatch):
    """``--style users --draw documents --answer-check --examples``: the request carries the users'
    rule and the examples under their own cache version, the answer is asked, and the command prints
    the set's styles."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    written = iter(["How do I keep alerts from paging at night?", "Why does the scheduler retry a failed job?",
                    "What does `max_jobs` limit?"])

    def reply(body):
        content = user_message(body)
        if content.startswith(CRITIQUE_INSTRUCTIONS):
            return json.dumps({"answered": 5})
        sentence = re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage_of(body))[0]
        if content.startswith(ANSWER_INSTRUCTIONS):
            return json.dumps({"answer": sentence})
        return json.dumps({"question": next(written), "references": [{"content": sentence}]})

    openai_server.chat_handler = reply
    own = tmp_path / "own.jsonl"
    own.write_text(json.dumps({"question": "How do I silence one alert?", "references": []}) + "\n")
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(EXAMPLE), "-o", str(out), "--n", "3", "--base-url", openai_server.base_url,
                 "--model", "stub-llm", "--relevance-threshold", "-1", "--duplicate-threshold", "1",
                 "--style", "users", "--draw", "documents", "--answer-check", "--examples", str(own)]) == 0
    printed = capsys.readouterr().out
    assert "3 queries (3 new from 3 requests; rejected: none)" in printed
    assert "answer outside its excerpt" in printed  # a row of the yield table
    assert "styles: 1 how-to, 1 why, 0 what-happens, 1 identifier, 0 other" in printed
    requests = chat_requests(openai_server)
    kinds = ["answer" if user_message(r.json_body).startswith(ANSWER_INSTRUCTIONS) else
             "critique" if user_message(r.json_body).startswith(CRITIQUE_INSTRUCTIONS) else "question"
             for r in requests]
    assert kinds == ["question", "answer", "critique"] * 3
    question = user_message(requests[0].json_body)
    assert USERS_RULE in question and shown_examples(requests[0].json_body) == ["How do I silence one alert?"]
    assert len(tuner.load_evaluation_set(out, tuner.load_corpus(EXAMPLE))) == 3
    assert Asking("users", ("x",)).version(PROMPT_VERSION).startswith(PROMPT_VERSION + "+users+examples-")


def test_validate_prints_the_styles_of_a_set(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "jobs.md").write_text("The scheduler runs jobs in the order they arrive. Pause it with the stop button.\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        '{"question": "How do I pause the scheduler?", "references": [{"document": "jobs.md", '
        '"content": "Pause it with the stop button."}]}\n'
        '{"question": "Why does the scheduler keep jobs in order?", "references": [{"document": "jobs.md", '
        '"content": "The scheduler runs jobs in the order they arrive."}]}\n')
    assert main(["validate", "--corpus", str(docs), "--queries", str(queries)]) == 0
    assert "styles: 1 how-to, 1 why, 0 what-happens, 0 identifier, 0 other\n" in capsys.readouterr().out


def test_a_lexical_cap_out_of_range_is_refused_before_the_corpus_is_read(tmp_path, capsys):
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(tmp_path / "no-such-folder"), "-o", str(out), "--model", "stub-llm",
                 "--max-overlap", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "--max-overlap=1.5 is invalid; allowed: a number in [0, 1]" in err
    assert "no-such-folder" not in err and "Traceback" not in err and not out.exists()
