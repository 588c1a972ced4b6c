"""Evaluation-set generation through the real openai client against a local stub."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tuner
from tuner.cli import main
from tuner.data import generate as generate_module
from tuner.data.generate import CRITIQUE_INSTRUCTIONS, REPLY_SCHEMA, generate_evaluation_set, locate
from tuner.llm import client as client_module
from tuner.llm import endpoint
from tuner.llm.client import LLMClient, LLMError

from fakes import HashedWordsEmbedder
from openai_stub import SPOILED_CHAT_PROBLEMS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"


def passage_of(body) -> str:
    user = body["messages"][-1]["content"]
    return user.split("<passage>\n", 1)[1].split("\n</passage>", 1)[0]


def sentence_from(passage: str) -> str:
    """The first full sentence of the passage that is long enough to be a fair excerpt."""
    for candidate in re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage):
        return candidate
    return passage.strip().split("\n")[0]


def is_critique(body) -> bool:
    return body["messages"][-1]["content"].startswith(CRITIQUE_INSTRUCTIONS)


def answer_with(question_of, reference_of=sentence_from, critique=5):
    """A model that writes ``question_of(reference)`` about the passage's ``reference_of(passage)``,
    and rates every question it is asked to critique ``critique``."""
    def handler(body):
        if is_critique(body):
            return json.dumps({"answered": critique})
        passage = passage_of(body)
        reference = reference_of(passage)
        return json.dumps({"question": question_of(reference), "references": [{"content": reference}]})
    return handler


def echo_question(reference: str) -> str:
    return "What does the documentation say here: " + " ".join(reference.split()[:8]) + "?"


@pytest.fixture(autouse=True)
def no_critique(request, monkeypatch):
    """The tests of the question request count its requests and replies: the critique, a request
    of its own after every other filter, is left out of them (it is tested apart, marked
    ``critique``)."""
    if "critique" not in request.keywords:
        monkeypatch.setattr(generate_module.filters, "_critique", lambda client, question, references: "")


@pytest.fixture
def client(openai_server, tmp_path):
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=2,
                     cache_path=tmp_path / "llm.sqlite3")


@pytest.fixture
def corpus():
    return tuner.load_corpus(EXAMPLE)


def test_accepted_queries_load_as_an_evaluation_set(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(echo_question)
    out = tmp_path / "generated.jsonl"
    report = generate_evaluation_set(corpus, out, 5, client, HashedWordsEmbedder(), relevance_threshold=0.1,
                                     duplicate_threshold=0.999)
    assert (report.accepted, report.attempts) == (5, 5)
    evalset = tuner.load_evaluation_set(out, corpus)  # validates every offset
    assert len(evalset) == 5 and [q.id for q in evalset] == ["g0001", "g0002", "g0003", "g0004", "g0005"]
    requests = openai_server.requests_to("/v1/chat/completions")
    # JSON mode with the reply's schema beside it: a llama.cpp server makes a grammar of it.
    assert requests[0].json_body["response_format"] == {"type": "json_object", "schema": REPLY_SCHEMA}
    # No request shows the model an earlier question: a small model copies them (BENCHMARKS.md).
    for i, request in enumerate(requests[1:], start=1):
        content = request.json_body["messages"][-1]["content"]
        assert not any(earlier.question in content for earlier in evalset.queries[:i])
    assert report.prompt_tokens > 0 and report.tokens_per_accepted > 0


def test_a_question_made_of_its_excerpts_words_is_rejected_under_a_cap(openai_server, client, corpus, tmp_path):
    # The excerpt's first six words backwards: not a copy (no run of them in order), but every
    # content word is the excerpt's (overlap 1.0).
    def backwards(reference: str) -> str:
        return "Why " + " ".join(reversed(reference.rstrip(".!?").split()[:6])) + "?"

    openai_server.chat_handler = answer_with(backwards)
    capped = generate_evaluation_set(corpus, tmp_path / "capped.jsonl", 2, client, HashedWordsEmbedder(),
                                     max_attempts=3, max_overlap=0.5, relevance_threshold=-1.0)
    assert capped.accepted == 0 and capped.rejected == {"question too lexical": 3}
    uncapped = generate_evaluation_set(corpus, tmp_path / "uncapped.jsonl", 2, client, HashedWordsEmbedder(),
                                       max_attempts=3, relevance_threshold=-1.0)
    assert uncapped.accepted == 2 and "question too lexical" not in uncapped.rejected
    refused = r"max_overlap=1\.5 is invalid; allowed: a number in \[0, 1\]"
    with pytest.raises(tuner.errors.InvalidParameterError, match=refused):
        generate_evaluation_set(corpus, tmp_path / "bad.jsonl", 2, client, HashedWordsEmbedder(), max_overlap=1.5)
    assert not (tmp_path / "bad.jsonl").exists()


def test_references_not_in_the_text_are_rejected(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(echo_question, lambda passage: "The scheduler runs on the moon.")
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 3, client, HashedWordsEmbedder(), max_attempts=4)
    assert report.accepted == 0 and report.rejected == {"reference not in the text": 4}


def test_whitespace_normalised_reference_maps_back_to_exact_offsets():
    text = "Intro.\n\nThe   default timeout\nis 2 hours. End."
    start, end = locate(text, "The default timeout is 2 hours.", (0, len(text)))
    assert text[start:end] == "The   default timeout\nis 2 hours."
    assert locate(text, "not there", (0, len(text))) is None


def test_a_near_copy_is_anchored_to_the_documents_own_words():
    # Seen with the bundled writer: a copy with a word changed, one added and the typographic
    # quotes made straight. The excerpt is the document's span, from "The" to the full stop.
    text = 'Intro. The name associated with a view is also called the “endpoint”. Then more text follows.'
    copy = 'The name associated with a view in Flask is also called the "endpoint".'
    start, end = locate(text, copy, (0, len(text)))
    assert (start, end) == (7, 69)
    assert text[start:end] == 'The name associated with a view is also called the “endpoint”.'
    # Runs of three words or more must cover 80% of the copy's words: above, 11 of 13 (85%); with a
    # third word added, 11 of 14 (79%).
    assert locate(text, 'The name associated with a view in Flask apps is also called the "endpoint".',
                  (0, len(text))) is None
    # A paraphrase, or a copy whose words are spread over much more of the passage, is not one.
    assert locate(text, "Each view has a name: its endpoint.", (0, len(text))) is None
    # All 11 words copied, but spread over 35 of the passage's (more than 1.5 x 11).
    spread = "The name associated with " + "filler words in between " * 6 + "a view is also called the endpoint."
    assert locate(spread, "The name associated with a view is also called the endpoint.", (0, len(spread))) is None
    # Marks go with the span only where no word follows them: "version 3" of "version 3.5" stays as it is,
    # and "Don't" is one word, so a copy that changed it never starts the span at "'t".
    text = "Don't run the job twice in one window. Use the version 3.5 of it."
    start, end = locate(text, "Doesn't run the job twice in one window.", (0, len(text)))
    assert text[start:end] == "run the job twice in one window."
    start, end = locate(text, "We use the version 3", (0, len(text)))
    assert text[start:end] == "Use the version 3"


def test_a_near_copy_is_kept_with_the_documents_text(openai_server, client, corpus, tmp_path):
    def long_sentence(passage: str) -> str:
        return next(c for c in re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage) if len(c.split()) >= 10)

    asked_about = set()

    def near(passage: str) -> str:
        asked_about.add(long_sentence(passage))
        words = long_sentence(passage).split()
        return " ".join([*words[:5], "indeed", *words[5:]])  # one word added: runs of 5 and 5+ words

    openai_server.chat_handler = answer_with(echo_question, near)
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 2, client, HashedWordsEmbedder(), max_attempts=4)
    assert report.accepted == 2
    for line in (tmp_path / "g.jsonl").read_text(encoding="utf-8").splitlines():
        reference = json.loads(line)["references"][0]
        text = corpus.document(reference["document"]).text
        # the whole sentence the model was shown, as the document writes it, at its offsets
        assert reference["content"] in asked_about and "indeed" not in reference["content"]
        assert text[reference["start_index"]:reference["end_index"]] == reference["content"]


def test_an_excerpt_is_never_located_inside_a_longer_word():
    # Seen with the bundled writer: the excerpt "cov" was located inside the index entry "vcov".
    index = "var 9, 18 vcov 59 vector 8"
    assert locate(index, "cov", (0, len(index))) is None
    text = "See vcov first. Then cov (the covariance) of x and y."
    start, end = locate(text, "cov", (0, len(text)))
    assert (start, end) == (21, 24) and text[start:end] == "cov"
    spaced = "vcov:\n\nthe   cov matrix"  # whitespace-normalised, the same rule
    start, end = locate(spaced, "the cov matrix", (0, len(spaced)))
    assert spaced[start:end] == "the   cov matrix"
    # an excerpt that starts or ends with punctuation may sit against a word
    assert locate("call f(x) now", "(x)", (0, 13)) == (6, 9)


def test_duplicate_questions_are_dropped(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(lambda reference: "How do I configure Tidewater?")
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 3, client, HashedWordsEmbedder(), max_attempts=4,
                                     relevance_threshold=-1.0)
    assert report.accepted == 1 and report.rejected == {"near-duplicate question": 3}


def test_weakly_supported_queries_are_dropped(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(lambda reference: "Quarterly revenue forecast?")
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 2, client, HashedWordsEmbedder(), max_attempts=2,
                                     relevance_threshold=0.2)
    assert report.rejected == {"weakest reference too dissimilar": 2}


def test_rate_limit_then_success(openai_server, client, corpus, tmp_path):
    openai_server.script("/v1/chat/completions", [429, 200])
    openai_server.chat_handler = answer_with(echo_question)
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=0)
    assert report.accepted == 1
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2


def test_server_errors_until_giving_up_and_bad_key(openai_server, client, corpus, tmp_path):
    openai_server.script("/v1/chat/completions", [500] * 5)
    with pytest.raises(LLMError, match="failed with HTTP 500 after 2 retries"):
        generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder())
    openai_server.api_key = "right"
    with pytest.raises(LLMError, match="refused the API key"):
        generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder())


def test_resume_continues_toward_n(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(echo_question)
    out = tmp_path / "g.jsonl"
    generate_evaluation_set(corpus, out, 2, client, HashedWordsEmbedder(), relevance_threshold=0,
                            duplicate_threshold=1.0)
    first = out.read_text(encoding="utf-8").splitlines()
    report = generate_evaluation_set(corpus, out, 4, client, HashedWordsEmbedder(), relevance_threshold=0,
                                     duplicate_threshold=1.0)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert (report.already, report.accepted, len(lines)) == (2, 2, 4)
    assert lines[:2] == first and json.loads(lines[3])["id"] == "g0004"
    # Marked as generated, by which model: the review page and the loader's counts say so.
    assert {(r["origin"], r["model"]) for r in map(json.loads, lines)} == {("generated", "stub-llm")}


def test_generate_command_and_calibrate(openai_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    openai_server.chat_handler = answer_with(echo_question)
    out = tmp_path / "g.jsonl"
    argv = ["generate", str(EXAMPLE), "-o", str(out), "--n", "3", "--base-url", openai_server.base_url,
            "--model", "stub-llm", "--relevance-threshold", "0", "--duplicate-threshold", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "3 queries (3 new from 3 requests; rejected: none)" in printed and "per accepted query" in printed
    assert main([*argv, "--calibrate"]) == 0
    assert "closest other question" in capsys.readouterr().out
    closed = openai_server.base_url
    openai_server.stop()
    assert main([*argv[:4], "--n", "5", "--base-url", closed, "--max-attempts", "1"]) == 2
    assert "cannot reach the LLM endpoint" in capsys.readouterr().err


@pytest.mark.slow
def test_generate_then_tune_end_to_end(openai_server, tmp_path, monkeypatch):
    """Generate an evaluation set for the bundled corpus from the stub, then tune on it."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    openai_server.chat_handler = answer_with(echo_question)
    out = tmp_path / "generated.jsonl"
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, cache_path=tmp_path / "llm.sqlite3")
    generate_evaluation_set(tuner.load_corpus(EXAMPLE, "handbook"), out, 8, client, HashedWordsEmbedder(),
                            relevance_threshold=0.1)
    storage = f"sqlite:///{tmp_path}/gen.db"
    assert main(["tune", "--name", "gen", "--corpus", f"handbook={EXAMPLE}", "--queries", str(out),
                 "--space", str(ROOT / "search_spaces" / "quick.yaml"), "--embedder", "openai:stub-embed",
                 "--base-url", openai_server.base_url, "--storage", storage, "--n-trials", "3"]) == 0


def test_prompt_size_per_request(openai_server, corpus, tmp_path):
    """What a request costs: README's figure (cl100k prompt tokens per request) comes from here."""
    from tuner.text.tokens import count_tokens

    openai_server.chat_handler = answer_with(echo_question)
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=False)
    generate_evaluation_set(corpus, tmp_path / "g.jsonl", 30, client, HashedWordsEmbedder(), relevance_threshold=0,
                            duplicate_threshold=1.0)
    sizes = [sum(count_tokens(m["content"]) for m in r.json_body["messages"])
             for r in openai_server.requests_to("/v1/chat/completions")]
    # A 4,000-character passage (~850 tokens) and the instructions, the same size however many
    # questions were kept before.
    assert all(900 <= size <= 1200 for size in sizes)


# ---------------------------------------------------------------- bad replies, the cache, the output file

PROSE = "Sure! Here is a question: how?"
#: What each bad chat reply must be reported as (the stub's spoiled replies; "prose" is the model's).
CHAT_PROBLEMS = {**SPOILED_CHAT_PROBLEMS, "prose": f"the reply holds no JSON object (it starts {PROSE!r})"}


def spoil(stub, kinds: list[str]) -> None:
    """Queue the stub's spoiled replies; "prose" answers prose instead of JSON (then good replies)."""
    prose = kinds.count("prose")
    good = answer_with(echo_question)
    if prose:
        left = [prose]

        def handler(body):
            if left[0]:
                left[0] -= 1
                return PROSE
            return good(body)

        stub.chat_handler = handler
    else:
        stub.chat_handler = good
        stub.script("/v1/chat/completions", kinds)


def cached_rows(path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT value FROM responses ORDER BY rowid")]


@pytest.mark.parametrize("kind", sorted(CHAT_PROBLEMS))
def test_a_bad_chat_reply_is_asked_again(openai_server, client, corpus, tmp_path, kind):
    spoil(openai_server, [kind])
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=0)
    assert (report.accepted, report.attempts) == (1, 1)
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2
    [stored] = cached_rows(tmp_path / "llm.sqlite3")  # the good reply only
    assert json.loads(json.loads(stored)["content"])["question"] == tuner.load_evaluation_set(
        tmp_path / "g.jsonl", corpus).queries[0].question


@pytest.mark.parametrize("kind", sorted(CHAT_PROBLEMS))
def test_a_bad_chat_reply_that_persists_is_one_line_and_exit_2(openai_server, tmp_path, capsys, monkeypatch, kind):
    monkeypatch.setattr(endpoint, "retry_delay", lambda attempt: 0.0)  # the backoff's 15 s, not what is tested
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-29")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    spoil(openai_server, [kind] * 6)
    url = openai_server.base_url.replace("http://", "http://user:hunter22@")
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(EXAMPLE), "-o", str(out), "--n", "3", "--base-url", url, "--model", "stub-llm",
                 "--relevance-threshold", "0"]) == 2
    err = capsys.readouterr().err
    where = openai_server.base_url  # the credentials were taken out of the URL when it was read
    [error] = [line for line in err.splitlines() if line.startswith("chunkwise: error:")]
    assert error.startswith(f"chunkwise: error: the LLM endpoint {where} (model 'stub-llm') gave no usable reply in "
                            f"6 attempts: {CHAT_PROBLEMS[kind]}")
    assert "Traceback" not in err
    assert "hunter22" not in err and "sk-secret-29" not in err
    assert len(openai_server.requests_to("/v1/chat/completions")) == 6
    assert not out.exists() and cached_rows(tmp_path / "cache" / "llm.sqlite3") == []


def test_a_hung_chat_endpoint_is_given_up_on_after_the_read_timeout(openai_server, corpus, tmp_path):
    openai_server.hang_s = 5
    openai_server.script("/v1/chat/completions", ["hang", "hang"])
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=1, timeout_s=0.5,
                       cache_path=tmp_path / "llm.sqlite3")
    with pytest.raises(LLMError) as raised:
        generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder())
    assert str(raised.value) == (f"the LLM endpoint {openai_server.base_url} did not answer within 0.5 s "
                                 "(2 HTTP tries); check that the server is up and not overloaded")
    assert raised.value.fatal and not (tmp_path / "g.jsonl").exists()


def test_the_chat_read_timeout_is_the_embedding_rule(openai_server, client, corpus, tmp_path, monkeypatch):
    """A request waits 10 s plus 1 s per 1,000 prompt tokens (at most the client's timeout_s)."""
    from tuner.text.tokens import count_tokens

    seen = []
    openai_server.chat_handler = answer_with(echo_question)
    real = endpoint.request_timeout
    monkeypatch.setattr(client_module, "request_timeout", lambda read_s: seen.append(read_s) or real(read_s))
    generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(), relevance_threshold=0)
    messages = openai_server.requests_to("/v1/chat/completions")[0].json_body["messages"]
    tokens = sum(count_tokens(m["content"]) for m in messages)
    assert seen == [10 + tokens / 1000] and 10.9 < seen[0] < 11.3


def test_json_in_a_code_fence_or_among_prose_is_read(openai_server, client, corpus, tmp_path):
    replies = iter([
        lambda data: f"```json\n{data}\n```",
        lambda data: f"Here is the question you asked for:\n\n{data}\n\nI hope it helps!",
        lambda data: f"Sure.\n```\n{data}\n```\nAnything else?",
    ])
    good = answer_with(echo_question)
    openai_server.chat_handler = lambda body: next(replies)(good(body))
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 3, client, HashedWordsEmbedder(),
                                     relevance_threshold=0, duplicate_threshold=1.0)
    assert (report.accepted, report.attempts, report.rejected) == (3, 3, {})
    assert len(openai_server.requests_to("/v1/chat/completions")) == 3


def test_a_question_without_excerpts_is_rejected_and_a_run_that_adds_nothing_exits_1(openai_server, tmp_path,
                                                                                      capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    replies = ['{"question": "What is the default timeout?"}', '{"question": "Why?", "references": []}',
               '{"question": "Who?", "references": [{"content": ""}]}']
    openai_server.chat_handler = lambda body: replies[len(openai_server.requests_to("/v1/chat/completions")) - 1]
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(EXAMPLE), "-o", str(out), "--n", "2", "--base-url", openai_server.base_url,
                 "--model", "stub-llm", "--max-attempts", "3"]) == 1
    printed = capsys.readouterr()
    assert "0 queries (0 new from 3 requests; rejected: question without excerpts: 3)" in printed.out
    assert "stopped after 3 requests with 0 of 2 queries" in printed.err
    assert not out.exists()


def test_a_malformed_cached_reply_is_asked_again(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(echo_question)
    generate_evaluation_set(corpus, tmp_path / "a.jsonl", 1, client, HashedWordsEmbedder(), relevance_threshold=0)
    cache = tmp_path / "llm.sqlite3"
    # What an older version stored: the prose a model gave, unchecked.
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE responses SET value = ?", (json.dumps({"content": PROSE, "prompt_tokens": 9,
                                                                  "completion_tokens": 9}),))
    fresh = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=cache)
    report = generate_evaluation_set(corpus, tmp_path / "b.jsonl", 1, fresh, HashedWordsEmbedder(),
                                     relevance_threshold=0)
    assert (report.accepted, report.cached) == (1, 0)
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2  # sent again, not rejected from the cache
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    assert PROSE not in cached_rows(cache)[0]  # healed
    again = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=cache)
    report = generate_evaluation_set(corpus, tmp_path / "c.jsonl", 1, again, HashedWordsEmbedder(),
                                     relevance_threshold=0)
    assert (report.cached, report.prompt_tokens, report.cost_usd) == (1, 0, 0.0)  # served, not billed
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2


def test_the_reply_cache_keeps_the_newest_replies_under_its_cap(openai_server, tmp_path):
    openai_server.chat_handler = lambda body: body["messages"][0]["content"] + "." * 400
    cache = tmp_path / "llm.sqlite3"
    # Each stored reply is {"content": "reply N....", "prompt_tokens": 2, "completion_tokens": 2} with 407
    # characters of content (the stub counts words as tokens): 13 + 407 + 46 = 466 bytes; two fit in 1,000.
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=cache,
                       cache_max_bytes=1000)
    asked = [f"reply {i}" for i in range(5)]
    for text in asked:
        client.chat([{"role": "user", "content": text}], prompt_version="v")
    rows = cached_rows(cache)
    assert [len(row.encode()) for row in rows] == [466, 466]
    assert [json.loads(row)["content"][:7] for row in rows] == ["reply 3", "reply 4"]  # the oldest went
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT bytes FROM cache_size").fetchone() == (932,)
    client.chat([{"role": "user", "content": "reply 4"}], prompt_version="v")
    assert len(openai_server.requests_to("/v1/chat/completions")) == 5  # still cached
    client.chat([{"role": "user", "content": "reply 0"}], prompt_version="v")
    assert len(openai_server.requests_to("/v1/chat/completions")) == 6  # evicted: asked again
    assert [json.loads(row)["content"][:7] for row in cached_rows(cache)] == ["reply 4", "reply 0"]


def test_the_output_is_created_private(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(echo_question)
    out = tmp_path / "g.jsonl"
    generate_evaluation_set(corpus, out, 1, client, HashedWordsEmbedder(), relevance_threshold=0)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_generation_killed_and_resumed_duplicates_nothing(openai_server, tmp_path):
    """A real process, killed with SIGKILL while it waits for its third question (its fifth request:
    each kept question was critiqued in a request of its own), then run again."""
    openai_server.embedding_dim = 64
    good = answer_with(echo_question)
    release = threading.Event()

    def handler(body):
        if len(openai_server.requests_to("/v1/chat/completions")) == 5:
            release.wait(60)  # hold the fifth request until the process is killed
        return good(body)

    openai_server.chat_handler = handler
    out = tmp_path / "g.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": openai_server.base_url,
           "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "tuner", "generate", str(EXAMPLE), "-o", str(out), "--n", "5",
               "--model", "stub-llm", "--embedder", "openai:stub-embed", "--relevance-threshold", "-1",
               "--duplicate-threshold", "0.999"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1800):  # a cold start of the command under load
            if len(openai_server.requests_to("/v1/chat/completions")) >= 5 or process.poll() is not None:
                break
            time.sleep(0.1)
        assert len(openai_server.requests_to("/v1/chat/completions")) == 5
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        release.set()
        if process.poll() is None:
            process.kill()
    first = out.read_text(encoding="utf-8").splitlines()
    assert len(first) == 2 and stat.S_IMODE(out.stat().st_mode) == 0o600
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == first and len(lines) == 5
    records = [json.loads(line) for line in lines]
    assert [r["id"] for r in records] == ["g0001", "g0002", "g0003", "g0004", "g0005"]
    assert len({r["question"] for r in records}) == 5
    assert len(tuner.load_evaluation_set(out, tuner.load_corpus(EXAMPLE))) == 5


def test_json_mode_that_gives_nothing_is_asked_again_without_it(openai_server, client, corpus, tmp_path):
    """A server that enforces JSON mode with a grammar may get nothing but whitespace from a small model
    (seen with llama.cpp); the same request without JSON mode is read among prose or in a code fence."""
    good = answer_with(echo_question)
    openai_server.chat_handler = lambda body: " \n " if "response_format" in body else f"```json\n{good(body)}\n```"
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 2, client, HashedWordsEmbedder(),
                                     relevance_threshold=0, duplicate_threshold=1.0)
    assert (report.accepted, report.attempts) == (2, 2)
    requests = openai_server.requests_to("/v1/chat/completions")
    # Each query: once in JSON mode (empty), once without; one user message, the reply capped.
    assert ["response_format" in r.json_body for r in requests] == [True, False, True, False]
    assert all([m["role"] for m in r.json_body["messages"]] == ["user"] for r in requests)
    assert {r.json_body["max_tokens"] for r in requests} == {1500}
    # The reply read without JSON mode is cached for the request as asked: a second run sends nothing.
    again = generate_evaluation_set(corpus, tmp_path / "again.jsonl", 2, client, HashedWordsEmbedder(),
                                    relevance_threshold=0, duplicate_threshold=1.0)
    assert (again.accepted, again.cached) == (2, 2) and len(openai_server.requests_to("/v1/chat/completions")) == 4


def excerpt_of(body) -> str:
    user = body["messages"][-1]["content"]
    return user.split("<excerpt>\n", 1)[1].split("\n</excerpt>", 1)[0]


def test_sampled_excerpts_become_exact_references_and_plain_questions(openai_server, tmp_path, capsys, monkeypatch):
    """``--excerpts sampled``: the excerpt shown to the model is the reference, at its exact offsets inside
    the passage shown; the model's plain-text question is read with its label and quotes taken off."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    openai_server.chat_handler = lambda body: (
        f'Question: "In the {len(openai_server.requests_to("/v1/chat/completions"))}th case, what holds?"\n'
        "I hope this helps.")
    out = tmp_path / "g.jsonl"
    assert main(["generate", str(EXAMPLE), "-o", str(out), "--n", "3", "--base-url", openai_server.base_url,
                 "--model", "stub-llm", "--excerpts", "sampled", "--relevance-threshold", "-1",
                 "--duplicate-threshold", "1"]) == 0
    assert "3 queries (3 new from 3 requests; rejected: none)" in capsys.readouterr().out
    corpus = tuner.load_corpus(EXAMPLE)
    requests = openai_server.requests_to("/v1/chat/completions")
    assert len(requests) == 3 and all("response_format" not in r.json_body for r in requests)
    for i, (line, request) in enumerate(zip(out.read_text().splitlines(), requests), start=1):
        query = json.loads(line)
        assert query["question"] == f"In the {i}th case, what holds?"
        [reference] = query["references"]
        shown, passage = excerpt_of(request.json_body), passage_of(request.json_body)
        text = corpus.document(reference["document"]).text
        assert reference["content"] == shown == text[reference["start_index"]:reference["end_index"]]
        assert shown in passage and len(re.findall(r"[A-Za-z]{2,}", shown)) >= 8
    assert len(tuner.load_evaluation_set(out, corpus)) == 3  # validates every offset


def test_a_sampled_excerpt_repeated_as_a_question_is_rejected_and_a_reply_without_one_asked_again(
        openai_server, client, corpus, tmp_path):
    replies = iter(["Sure! Here is a good one for you.",  # no question: asked again
                    None,  # the excerpt itself, given a question mark
                    "1. **Question:** What does the handbook recommend here?"])
    openai_server.chat_handler = lambda body: next(replies) or excerpt_of(body).rstrip(".") + "?"
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(), max_attempts=2,
                                     excerpts="sampled", relevance_threshold=-1.0, duplicate_threshold=1.0)
    assert (report.accepted, report.attempts, report.rejected) == (1, 2, {"question repeats its excerpt": 1})
    assert len(openai_server.requests_to("/v1/chat/completions")) == 3
    [line] = (tmp_path / "g.jsonl").read_text().splitlines()
    assert json.loads(line)["question"] == "What does the handbook recommend here?"


def test_a_sampled_excerpt_is_a_sentence_worth_a_question_at_exact_offsets():
    from random import Random

    from tuner.data.generate import sample_excerpt

    text = ("# Scheduling jobs\n\n```\nrun --every 5m job.sh  # runs the job every five minutes, in the background\n"
            "```\n\n"
            "Jobs run in order. The scheduler starts each job at most once per window, in submission order.\n\n"
            "| a | b |\n")
    long_sentence = "The scheduler starts each job at most once per window, in submission order."
    start = text.index(long_sentence)
    for seed in range(5):  # the heading, the code, the short sentence and the table row never qualify
        assert sample_excerpt(text, (0, len(text)), Random(seed)) == (start, start + len(long_sentence))
    assert sample_excerpt(text, (0, start), Random(0)) is None
    # a short sentence is joined by the next one, when both fit
    joined = "Jobs retry twice on any failure of their own making. Then they stop."
    assert sample_excerpt(joined, (0, len(joined)), Random(0)) == (0, len(joined))
