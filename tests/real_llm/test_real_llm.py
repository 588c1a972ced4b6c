"""Every LLM feature end to end against a real model: llama.cpp's OpenAI-compatible server
(llama-cpp-python) with SmolLM2-135M-Instruct, started on a free local port for the session
(``benchmarks/llm/llm_server.py``), reached through the real ``openai`` client.

Marked ``real_llm`` (and ``slow``): the default test run leaves them out. Run them with::

    pip install -e '.[test,llm]' && python -m pytest -m real_llm

They skip, saying why, where the ``llm`` extra is not installed. A 135M model writes poor
questions and poor split points: the tests assert what chunkwise does with whatever it writes
(exact offsets, questions kept only with excerpts found in the document, a run that keeps
nothing reported as such, replies served from the cache the second time), never the model's words.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from bench import import_benchmark

import tuner
from tuner.cli import main
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.embedding.base import Embedder
from tuner.llm.client import LLMClient

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]

TEXTS = Path(__file__).resolve().parents[1] / "texts"
MODEL = "smollm2"
#: Seconds one request may take: this model's echo costs about 0.3 s per token on a busy 2-core machine.
ANSWER_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def server():
    llm_server = import_benchmark("llm.llm_server")
    local = llm_server.LocalLLMServer(MODEL, logits_all=True)  # logits of every token: the logprob chunker
    try:
        local.start()
    except llm_server.LLMServerUnavailable as exc:
        pytest.skip(f"no real LLM here: {exc}")
    yield local
    local.stop()


@pytest.fixture
def endpoint(server, monkeypatch, tmp_path):
    """Every LLM feature's endpoint is the real server, set as a user sets it: the environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", MODEL)
    monkeypatch.setenv("CHUNKWISE_LLM_TIMEOUT_S", str(ANSWER_TIMEOUT_S))
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    return server


def topics() -> Document:
    return Document("topics.md", (TEXTS / "topics.md").read_text(encoding="utf-8"))


def assert_exact_cover(document: Document, chunks) -> None:
    """Each chunk is the document's text at its offsets, and together they hold every non-space character."""
    covered = set()
    for chunk in chunks:
        assert document.text[chunk.start_index:chunk.end_index] == chunk.text
        covered.update(range(chunk.start_index, chunk.end_index))
    assert all(i in covered for i, ch in enumerate(document.text) if not ch.isspace())


def client(server, tmp_path, max_retries: int = 1) -> LLMClient:
    """A client of the real server; one retry (at temperature 0 this model answers the same again)."""
    return LLMClient(model=MODEL, base_url=server.base_url, api_key="none", max_retries=max_retries,
                     cache_path=tmp_path / "llm.sqlite3", answer_timeout_s=ANSWER_TIMEOUT_S)


def test_generate_keeps_only_questions_whose_excerpts_are_in_the_document(endpoint, tmp_path, capsys):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    shutil.copy(TEXTS / "topics.md", corpus / "topics.md")
    out = tmp_path / "generated.jsonl"
    command = ["generate", str(corpus), "-o", str(out), "--n", "2", "--max-attempts", "2", "--relevance-threshold",
               "0"]
    status = main(command)
    printed = capsys.readouterr()
    sent = endpoint.requests("/v1/chat/completions")
    assert sent >= 2
    if status == 0:  # queries kept: every excerpt is the document's text at its offsets
        evalset = tuner.load_evaluation_set(out, tuner.load_corpus(corpus))  # validates every offset
        text = (corpus / "topics.md").read_text(encoding="utf-8")
        assert len(evalset) >= 1
        assert all(text[r.start_index:r.end_index] == r.content for q in evalset for r in q.references)
        assert f"{len(evalset)} queries ({len(evalset)} new from 2 requests" in printed.out
    elif status == 1:  # nothing kept: said so, with every rejection counted, and no file
        assert "0 queries (0 new from 2 requests; rejected: " in printed.out and not out.exists()
        assert "stopped after 2 requests with 0 of 2 queries" in printed.err
    else:  # no reply held a question at all, after every retry: one line, and no file
        assert status == 2 and not out.exists()
        [error] = [line for line in printed.err.splitlines() if line.startswith("chunkwise: error:")]
        assert f"the LLM endpoint {endpoint.base_url} (model '{MODEL}') gave no usable reply in 6 attempts" in error
        return
    # Every reply that was used was cached: the same run again sends nothing.
    again = tmp_path / "again.jsonl"
    assert main([*command[:3], str(again), *command[4:]]) == status
    assert endpoint.requests("/v1/chat/completions") == sent
    assert (again.read_text() if again.exists() else None) == (out.read_text() if out.exists() else None)


def test_the_bundled_writer_keeps_questions_at_exact_offsets(tmp_path, monkeypatch, capsys):
    """``generate --bundled``: the command starts Qwen2.5-Coder-1.5B on llama.cpp itself (its 22
    packages assembled into the cache and checked), asks, filters and stops it."""
    from tuner.llm.local_server import QUESTION_WRITER, LLMServerUnavailable

    try:
        QUESTION_WRITER.gguf()  # in the user's cache: 1.1 GB, assembled once, checked on each use
    except LLMServerUnavailable as exc:
        pytest.skip(f"no bundled writer here: {exc}")
    monkeypatch.setenv("CHUNKWISE_LLM_TIMEOUT_S", str(ANSWER_TIMEOUT_S))
    corpus = tmp_path / "docs"
    corpus.mkdir()
    shutil.copy(TEXTS / "topics.md", corpus / "topics.md")
    out = tmp_path / "generated.jsonl"
    status = main(["generate", str(corpus), "-o", str(out), "--n", "2", "--max-attempts", "4", "--bundled",
                   "--relevance-threshold", "0", "--passage-chars", "1500"])
    printed = capsys.readouterr()
    assert status in (0, 1), printed.err
    assert "filter" in printed.out and "critique: not answered by its excerpt" in printed.out  # the yield table
    if out.exists():
        evalset = tuner.load_evaluation_set(out, tuner.load_corpus(corpus))  # validates every offset
        text = (corpus / "topics.md").read_text(encoding="utf-8")
        assert all(text[r.start_index:r.end_index] == r.content for q in evalset for r in q.references)
        assert all(q.question.endswith("?") for q in evalset)


def test_llm_chunker_gives_exact_chunks_and_asks_once(server, tmp_path):
    document = topics()
    first = tuner.make_chunker("llm", piece_size=30, window_tokens=400).use_client(client(server, tmp_path))
    chunks = first.split(document)
    assert_exact_cover(document, chunks)
    sent = server.requests("/v1/chat/completions")
    refused = getattr(first, "malformed_replies", 0)
    assert sent >= 1
    # The second time only the windows whose every reply was refused (never cached) are asked again.
    again = tuner.make_chunker("llm", piece_size=30, window_tokens=400).use_client(client(server, tmp_path))
    assert again.split(document) == chunks
    assert server.requests("/v1/chat/completions") == sent + 2 * refused


def test_logprob_chunker_gives_exact_chunks_and_asks_once(server, tmp_path):
    document = topics()
    chunks = tuner.make_chunker("logprob").use_client(client(server, tmp_path)).split(document)
    assert_exact_cover(document, chunks)
    assert all(chunk.text[-1] in ".!?" for chunk in chunks)  # cut at sentence ends only
    sent = server.requests("/v1/completions")
    assert sent >= 1
    assert tuner.make_chunker("logprob").use_client(client(server, tmp_path)).split(document) == chunks
    assert server.requests("/v1/completions") == sent


class Words(Embedder):
    identity = "words:real-llm"
    VOCAB = ("pasta", "jupiter", "tax", "moon", "boil", "income")

    def _embed(self, texts):
        return np.array([[t.lower().count(w) for w in self.VOCAB] + [0.01] for t in texts], dtype=float)


def test_llm_contexts_are_written_prepended_recorded_and_cached(endpoint, tmp_path):
    document = topics()
    corpus = tuner.Corpus("topics", [document])
    start = document.text.index("Jupiter is")
    end = document.text.index(".", start) + 1
    queries = EvaluationSet((Query("q", "largest planet", "topics",
                                   (Reference("topics.md", start, end, document.text[start:end]),)),))
    chunking = dict(chunker="recursive", size=60, overlap=0)
    plain = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, **chunking)
    headed = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **chunking)
    assert headed.chunks == plain.chunks
    assert_exact_cover(document, headed.chunks)
    sent = endpoint.requests("/v1/chat/completions")
    assert sent >= len(headed.chunks)
    for chunk, indexed in zip(headed.chunks, headed.indexed_texts):
        header, _, rest = indexed.partition("\n\n")
        assert header.strip() and rest == chunk.text  # a one-line context before the chunk's own text
    assert headed.embedding["llm_tokens"] > 0 and headed.embedding["llm_model_names"] == {"context": MODEL}
    again = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **chunking)
    assert again.indexed_texts == headed.indexed_texts
    assert endpoint.requests("/v1/chat/completions") == sent
