"""The llm and logprob chunkers, through the real openai client against a local stub."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import tuner
from tuner.data.document import Document
from tuner.embedding.base import Embedder
from tuner.llm.client import LLMClient, LLMError

from openai_stub import SPOILED_CHAT_PROBLEMS

DATA = Path(__file__).resolve().parents[1] / "texts"
TOPIC_STARTS = ("Jupiter", "Individual")


def topics() -> Document:
    return Document("topics.md", (DATA / "topics.md").read_text(encoding="utf-8"))


def paragraphs(doc: Document) -> list[str]:
    return [p.strip() for p in doc.text.split("\n\n")]


@pytest.fixture
def client(openai_server, tmp_path):
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=1,
                     cache_path=tmp_path / "llm.sqlite3")


def split_after_topic_changes(body) -> str:
    """Answer like a good model: split after the piece before each new topic."""
    user = body["messages"][-1]["content"]
    pieces = {int(n): text for n, text in re.findall(r"<\|start_chunk_(\d+)\|>(.*?)<\|end_chunk_\1\|>", user, re.S)}
    numbers = [n - 1 for n, text in sorted(pieces.items()) if text.strip().startswith(TOPIC_STARTS) and n - 1 in pieces]
    return "split_after: " + ", ".join(map(str, numbers or [max(pieces) - 1]))


def test_llm_chunker_follows_valid_split_points(openai_server, client):
    openai_server.chat_handler = split_after_topic_changes
    doc = topics()
    chunker = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client)
    chunks = chunker.split(doc)
    assert [c.text for c in chunks] == paragraphs(doc)
    requests = openai_server.requests_to("/v1/chat/completions")
    assert "<|start_chunk_1|>" in requests[0].json_body["messages"][-1]["content"]
    # Cached per model, text and prompt version: the same split asks nothing again.
    assert chunker.split(doc) == chunks
    assert len(openai_server.requests_to("/v1/chat/completions")) == len(requests)
    assert client.usage.cached == len(requests) and client.usage.prompt_tokens > 0


@pytest.mark.parametrize("reply", ["I would split after 3 and 5.", "split_after: 9, 2", "split_after: 0",
                                   "split_after: 999"])
def test_llm_chunker_falls_back_on_malformed_replies(openai_server, client, reply, tmp_path):
    openai_server.chat_handler = lambda body: reply
    doc = topics()
    chunker = tuner.make_chunker("llm", piece_size=20, window_tokens=100).use_client(client)
    chunks = chunker.split(doc)
    assert chunker.malformed_replies >= 1
    # Each window was asked twice (the client's one retry), then fell back.
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2 * chunker.malformed_replies
    assert rows(tmp_path / "llm.sqlite3") == []  # nothing refused is cached
    covered = set()
    for chunk in chunks:
        assert doc.text[chunk.start_index:chunk.end_index] == chunk.text
        covered.update(range(chunk.start_index, chunk.end_index))
    assert all(i in covered for i, ch in enumerate(doc.text) if not ch.isspace())


def test_llm_chunker_reads_split_points_among_prose(openai_server, client):
    openai_server.chat_handler = lambda body: f"Looking at the text...\n{split_after_topic_changes(body)}\nDone."
    doc = topics()
    chunker = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client)
    assert [c.text for c in chunker.split(doc)] == paragraphs(doc)
    assert getattr(chunker, "malformed_replies", 0) == 0


def rows(path) -> list[str]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT value FROM responses ORDER BY rowid")]


#: What each bad reply must be reported as, from the chat and the completions endpoints.
CHAT_PROBLEMS = SPOILED_CHAT_PROBLEMS
COMPLETIONS_PROBLEMS = {
    **{kind: CHAT_PROBLEMS[kind] for kind in ("html", "truncated", "not-object", "no-choices")},
    "empty": "the reply's logprobs are empty",
    "length": "the echo stops at character ",
}


@pytest.mark.parametrize("kind", sorted(CHAT_PROBLEMS))
def test_llm_chunker_asks_again_after_a_bad_reply(openai_server, client, kind, tmp_path):
    openai_server.chat_handler = split_after_topic_changes
    openai_server.script("/v1/chat/completions", [kind])
    doc = topics()
    chunker = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client)
    assert [c.text for c in chunker.split(doc)] == paragraphs(doc)
    asked = len(openai_server.requests_to("/v1/chat/completions"))
    assert len(rows(tmp_path / "llm.sqlite3")) == asked - 1  # every good reply, not the bad one


@pytest.mark.parametrize("kind", sorted(set(CHAT_PROBLEMS) - {"length"}))
def test_llm_chunker_stops_on_a_bad_reply_that_persists(openai_server, client, kind, tmp_path):
    openai_server.chat_handler = split_after_topic_changes
    openai_server.script("/v1/chat/completions", [kind, kind])
    chunker = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client)
    with pytest.raises(LLMError) as raised:
        chunker.split(topics())
    assert str(raised.value).startswith(f"the LLM endpoint {openai_server.base_url} (model 'stub-llm') gave no "
                                        f"usable reply in 2 attempts: {CHAT_PROBLEMS[kind]}")
    assert getattr(chunker, "malformed_replies", 0) == 0  # an error, not a silent fallback
    assert rows(tmp_path / "llm.sqlite3") == []


@pytest.mark.parametrize("kind", sorted(COMPLETIONS_PROBLEMS))
def test_logprob_chunker_asks_again_after_a_bad_reply(openai_server, client, kind, tmp_path):
    openai_server.completion_handler = marker_logprobs
    openai_server.script("/v1/completions", [kind])
    doc = topics()
    assert [c.text for c in tuner.make_chunker("logprob", threshold=1.0).use_client(client).split(doc)] == \
        paragraphs(doc)
    assert len(openai_server.requests_to("/v1/completions")) == 2
    assert len(rows(tmp_path / "llm.sqlite3")) == 1


@pytest.mark.parametrize("kind", sorted(COMPLETIONS_PROBLEMS))
def test_logprob_chunker_stops_on_a_bad_reply_that_persists(openai_server, client, kind, tmp_path):
    openai_server.completion_handler = marker_logprobs
    openai_server.script("/v1/completions", [kind, kind])
    url = openai_server.base_url.replace("http://", "http://user:hunter22@")
    secret = LLMClient(model="stub-llm", base_url=url, api_key="k", max_retries=1, cache_path=tmp_path / "llm.sqlite3")
    with pytest.raises(LLMError) as raised:
        tuner.make_chunker("logprob").use_client(secret).split(topics())
    message = str(raised.value)
    where = openai_server.base_url  # the credentials were taken out of the URL when it was read
    assert message.startswith(f"the LLM endpoint {where} (model 'stub-llm') gave no usable reply in 2 attempts: "
                              f"{COMPLETIONS_PROBLEMS[kind]}")
    assert "hunter22" not in message and "\n" not in message
    assert rows(tmp_path / "llm.sqlite3") == []


def test_a_hung_completions_endpoint_is_given_up_on_after_the_read_timeout(openai_server, tmp_path):
    openai_server.hang_s = 5
    openai_server.completion_handler = marker_logprobs
    openai_server.script("/v1/completions", ["hang", "hang"])
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=1, timeout_s=0.5,
                       cache_path=tmp_path / "llm.sqlite3")
    with pytest.raises(LLMError) as raised:
        tuner.make_chunker("logprob").use_client(client).split(topics())
    assert str(raised.value) == (f"the LLM endpoint {openai_server.base_url} did not answer within 0.5 s "
                                 "(2 HTTP tries); check that the server is up and not overloaded")
    assert raised.value.fatal


def test_malformed_cached_replies_are_asked_again(openai_server, client, tmp_path):
    openai_server.chat_handler = split_after_topic_changes
    openai_server.completion_handler = marker_logprobs
    doc = topics()
    llm = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client)
    logprob = tuner.make_chunker("logprob", threshold=1.0).use_client(client)
    llm.split(doc), logprob.split(doc)
    chat_asked = len(openai_server.requests_to("/v1/chat/completions"))
    # What an older version stored unchecked: a reply with no split points, logprobs cut short.
    with sqlite3.connect(tmp_path / "llm.sqlite3") as db:
        for (key, value) in db.execute("SELECT key, value FROM responses").fetchall():
            stored = json.loads(value)
            if "content" in stored:
                stored["content"] = "I would rather not."
            else:
                stored["logprobs"] = {name: values[:3] for name, values in stored["logprobs"].items()}
            db.execute("UPDATE responses SET value = ? WHERE key = ?", (json.dumps(stored), key))
    fresh = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=1,
                      cache_path=tmp_path / "llm.sqlite3")
    again_llm = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(fresh)
    assert [c.text for c in again_llm.split(doc)] == paragraphs(doc)
    assert [c.text for c in tuner.make_chunker("logprob", threshold=1.0).use_client(fresh).split(doc)] == \
        paragraphs(doc)
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2 * chat_asked
    assert len(openai_server.requests_to("/v1/completions")) == 2
    assert fresh.usage.cached == 0 and getattr(again_llm, "malformed_replies", 0) == 0


class OnesEmbedder(Embedder):
    identity = "ones"

    def _embed(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


def test_llm_chunker_tokens_feed_the_trial_cost(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")  # the chunker builds its client from its parameters
    openai_server.chat_handler = split_after_topic_changes
    corpus = tuner.Corpus("topics", [topics()])
    text = topics().text
    query = tuner.Query("q", "Jupiter?", "topics", (tuner.Reference("topics.md", text.index("Jupiter"),
                                                                    text.index("Jupiter") + 7, "Jupiter"),))
    result = tuner.evaluate(corpus, tuner.EvaluationSet((query,)), chunker="llm", piece_size=20,
                            base_url=openai_server.base_url, model="stub-llm", embedder=OnesEmbedder(), cache=None)
    assert result.embedding["llm_tokens"] > 0 and result.embedding["llm_model_names"] == {"chunker": "stub-llm"}


def marker_logprobs(body):
    """Echo logprobs: the marker is likely only where a new topic begins, with a decay."""
    prompt = body["prompt"]
    marker = re.search(r"character (\S) wherever", prompt).group(1)
    tokens = [(m.group(), m.start()) for m in re.finditer(r"\s+|\S+", prompt)]
    top = []
    for i, (token, offset) in enumerate(tokens):
        following = prompt[offset + len(token):]
        likely = "\n\n" in token and following.startswith(TOPIC_STARTS)
        top.append({marker: (-0.3 if likely else -6.0) - 0.01 * i, token: -0.1})
    return {"text": "", "logprobs": {"tokens": [t for t, _ in tokens], "token_logprobs": [-1.0] * len(tokens),
                                     "top_logprobs": top, "text_offset": [o for _, o in tokens]}}


def test_logprob_chunker_splits_where_the_marker_is_likely(openai_server, client):
    openai_server.completion_handler = marker_logprobs
    doc = topics()
    chunks = tuner.make_chunker("logprob", threshold=1.0).use_client(client).split(doc)
    assert [c.text for c in chunks] == paragraphs(doc)
    body = openai_server.requests_to("/v1/completions")[0].json_body
    assert body["echo"] is True and body["logprobs"] == 5
    assert "§" in body["prompt"]  # a marker absent from the document


def test_logprob_chunker_needs_logprobs(openai_server, client):
    openai_server.completion_handler = lambda body: {"text": ""}  # an endpoint that ignores logprobs
    with pytest.raises(LLMError, match="returned no logprobs"):
        tuner.make_chunker("logprob").use_client(client).split(topics())
    openai_server.script("/v1/completions", [400])
    with pytest.raises(LLMError, match="may not support the completions API with echo and logprobs"):
        tuner.make_chunker("logprob", threshold=2.0).use_client(client).split(topics())


# What real servers and models do (seen with llama-cpp-python 0.3 serving SmolLM2-135M; see
# tests/real_llm/): each habit is reproduced here on the stub.

def test_llm_chunker_asks_in_one_user_message_with_a_reply_cap(openai_server, client):
    """llama-cpp-python's Gemma format drops a system message, and some chat templates refuse one."""
    openai_server.chat_handler = split_after_topic_changes
    tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client).split(topics())
    body = openai_server.requests_to("/v1/chat/completions")[0].json_body
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["max_tokens"] == 300  # a rambling small model is cut off, not left to fill its context


def test_a_reply_longer_than_asked_for_falls_back_like_an_unfit_answer(openai_server, client, tmp_path):
    """SmolLM2-135M rambled past the 300 tokens asked for, at temperature 0 the same each time: the
    window falls back to one chunk (counted) instead of failing the whole chunking."""
    openai_server.chat_handler = split_after_topic_changes
    openai_server.script("/v1/chat/completions", ["length", "length"])
    doc = topics()
    chunker = tuner.make_chunker("llm", piece_size=20, window_tokens=400).use_client(client)
    chunks = chunker.split(doc)
    assert chunker.malformed_replies == 1
    asked = openai_server.requests_to("/v1/chat/completions")
    assert [r.json_body["max_tokens"] for r in asked[:2]] == [300, 300]
    assert len(rows(tmp_path / "llm.sqlite3")) == len(asked) - 2  # the cut-off replies are not cached
    assert_covers(doc, chunks)


def assert_covers(doc, chunks) -> None:
    covered = set()
    for chunk in chunks:
        assert doc.text[chunk.start_index:chunk.end_index] == chunk.text
        covered.update(range(chunk.start_index, chunk.end_index))
    assert all(i in covered for i, ch in enumerate(doc.text) if not ch.isspace())


def shifted(handler):
    """The echo as llama-cpp-python 0.3 gives it for a model without a BOS token: each token's list of
    likely tokens is the one for the token after it."""
    def shifted_handler(body):
        reply = handler(body)
        top = reply["logprobs"]["top_logprobs"]
        reply["logprobs"]["top_logprobs"] = [*top[1:], {}]
        return reply
    return shifted_handler


def spaced(handler):
    """The marker as a byte-level BPE vocabulary holds it: with the space before it (" §"), among
    other likely tokens (the least likely of which a marker that is not found would score)."""
    def spaced_handler(body):
        reply = handler(body)
        reply["logprobs"]["top_logprobs"] = [{**{(f" {k}" if k in "§¶" else k): v for k, v in t.items()}, " the": -20.0}
                                             for t in reply["logprobs"]["top_logprobs"]]
        return reply
    return spaced_handler


@pytest.mark.parametrize("habit", [shifted, spaced], ids=["shifted", "spaced"])
def test_logprob_chunker_reads_the_echo_as_the_server_gives_it(openai_server, client, habit):
    openai_server.completion_handler = habit(marker_logprobs)
    doc = topics()
    assert [c.text for c in tuner.make_chunker("logprob", threshold=1.0).use_client(client).split(doc)] == \
        paragraphs(doc)


def test_logprob_chunker_moves_to_a_marker_the_model_reads_as_one_token(openai_server, client):
    """SmolLM2 splits ¶ into two byte tokens; a marker no top-logprobs list can hold scores nothing."""
    def bytes_for_section_sign(body):
        reply = marker_logprobs(body)
        logprobs = reply["logprobs"]
        if "§" in body["prompt"]:  # echoed as two byte tokens, each alone no text: "" and ""
            at = logprobs["tokens"].index("§")
            for name in ("tokens", "text_offset", "token_logprobs", "top_logprobs"):
                logprobs[name][at : at + 1] = [logprobs[name][at]] * 2
            logprobs["tokens"][at : at + 2] = ["", ""]
        return reply

    openai_server.completion_handler = bytes_for_section_sign
    doc = topics()
    chunker = tuner.make_chunker("logprob", threshold=1.0).use_client(client)
    assert [c.text for c in chunker.split(doc)] == paragraphs(doc)
    prompts = [r.json_body["prompt"] for r in openai_server.requests_to("/v1/completions")]
    assert len(prompts) == 2 and "§" in prompts[0] and "¶" in prompts[1]
    # Remembered: the next document is asked with ¶ at once.
    chunker.split(Document("other.md", doc.text.replace("pasta", "noodles")))
    assert ["¶" in p for p in [r.json_body["prompt"] for r in openai_server.requests_to("/v1/completions")]] == \
        [False, True, True]


def test_a_slow_server_is_given_the_time_the_environment_says(openai_server, tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_LLM_TIMEOUT_S", "0.5")
    openai_server.hang_s = 5
    openai_server.completion_handler = marker_logprobs
    openai_server.script("/v1/completions", ["hang", "hang"])
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=1,
                       cache_path=tmp_path / "llm.sqlite3")
    with pytest.raises(LLMError) as raised:
        tuner.make_chunker("logprob").use_client(client).split(topics())
    assert str(raised.value).startswith(f"the LLM endpoint {openai_server.base_url} did not answer within 0.5 s ")
    monkeypatch.setenv("CHUNKWISE_LLM_TIMEOUT_S", "soon")
    with pytest.raises(tuner.ChunkwiseError, match=r"^\$CHUNKWISE_LLM_TIMEOUT_S must be a number of seconds above 0, "
                                                   r"not 'soon'$"):
        LLMClient(model="stub-llm")
