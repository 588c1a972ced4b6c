"""Evaluation-set generation through the real openai client against a local stub."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tuner
from tuner.cli import main
from tuner.data.generate import generate_evaluation_set, locate
from tuner.llm.client import LLMClient, LLMError

from fakes import HashedWordsEmbedder

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"


def passage_of(body) -> str:
    user = body["messages"][1]["content"]
    return user.split("<passage>\n", 1)[1].split("\n</passage>", 1)[0]


def sentence_from(passage: str) -> str:
    """The first full sentence of the passage that is long enough to be a fair excerpt."""
    for candidate in re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage):
        return candidate
    return passage.strip().split("\n")[0]


def answer_with(question_of, reference_of=sentence_from):
    def handler(body):
        passage = passage_of(body)
        reference = reference_of(passage)
        return json.dumps({"question": question_of(reference), "references": [{"content": reference}]})
    return handler


def echo_question(reference: str) -> str:
    return "What does the documentation say here: " + " ".join(reference.split()[:8]) + "?"


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
    assert requests[0].json_body["response_format"] == {"type": "json_object"}
    assert "Earlier questions" not in requests[0].json_body["messages"][1]["content"]
    assert evalset.queries[0].question in requests[1].json_body["messages"][1]["content"]
    assert report.prompt_tokens > 0 and report.tokens_per_accepted > 0


def test_references_not_in_the_text_are_rejected(openai_server, client, corpus, tmp_path):
    openai_server.chat_handler = answer_with(echo_question, lambda passage: "The scheduler runs on the moon.")
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 3, client, HashedWordsEmbedder(), max_attempts=4)
    assert report.accepted == 0 and report.rejected == {"reference not in the text": 4}


def test_whitespace_normalised_reference_maps_back_to_exact_offsets():
    text = "Intro.\n\nThe   default timeout\nis 2 hours. End."
    start, end = locate(text, "The default timeout is 2 hours.", (0, len(text)))
    assert text[start:end] == "The   default timeout\nis 2 hours."
    assert locate(text, "not there", (0, len(text))) is None


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


def test_rate_limit_then_success_and_malformed_replies(openai_server, client, corpus, tmp_path):
    openai_server.script("/v1/chat/completions", [429, 200])
    openai_server.chat_handler = answer_with(echo_question)
    report = generate_evaluation_set(corpus, tmp_path / "g.jsonl", 1, client, HashedWordsEmbedder(),
                                     relevance_threshold=0)
    assert report.accepted == 1
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2
    openai_server.chat_handler = lambda body: "Sure! Here is a question: how?"
    uncached = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=False)
    report = generate_evaluation_set(corpus, tmp_path / "h.jsonl", 1, uncached, HashedWordsEmbedder(), max_attempts=2)
    assert report.rejected == {"malformed reply": 2}


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
    # A 4,000-character passage (~850 tokens), the instructions, and up to 50 earlier questions.
    assert 900 <= sizes[0] <= 1200 and sizes[-1] > sizes[0]
    assert 1000 <= sum(sizes) / len(sizes) <= 1800
