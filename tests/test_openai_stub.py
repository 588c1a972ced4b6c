"""The OpenAI stub server speaks well enough to the real ``openai`` client."""

from __future__ import annotations

import math

import openai
import pytest

from openai_stub import OpenAIStub, deterministic_embedding


def client(stub: OpenAIStub, *, api_key: str = "test", max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(api_key=api_key, base_url=stub.base_url, max_retries=max_retries, timeout=10)


def test_embeddings_shape_and_determinism(openai_server: OpenAIStub) -> None:
    c = client(openai_server)
    first = c.embeddings.create(model="m", input=["a", "b"])
    again = c.embeddings.create(model="m", input=["b"], encoding_format="float")

    assert first.model == "m"
    assert [d.index for d in first.data] == [0, 1]
    assert all(len(d.embedding) == 8 for d in first.data)
    assert first.data[0].embedding == deterministic_embedding("a", 8)
    assert first.data[1].embedding == again.data[0].embedding  # base64 and float agree
    assert first.data[0].embedding != first.data[1].embedding
    assert not math.isclose(math.fsum(x * x for x in first.data[0].embedding), 1.0)  # not normalised
    assert first.usage.prompt_tokens == first.usage.total_tokens == 2

    sized = c.embeddings.create(model="m", input="hello world", dimensions=5)
    assert len(sized.data) == 1 and len(sized.data[0].embedding) == 5

    method, path, body, headers = openai_server.requests[0]
    assert (method, path, body["input"]) == ("POST", "/v1/embeddings", ["a", "b"])
    assert headers["authorization"] == "Bearer test"


def test_wrong_key_is_401(openai_server: OpenAIStub) -> None:
    openai_server.api_key = "right"
    with pytest.raises(openai.AuthenticationError) as info:
        client(openai_server, api_key="wrong").embeddings.create(model="m", input="x")
    assert info.value.status_code == 401
    assert info.value.code == "invalid_api_key"
    assert client(openai_server, api_key="right").embeddings.create(model="m", input="x").data


def test_scripted_429_is_retried(openai_server: OpenAIStub) -> None:
    openai_server.script("/v1/embeddings", [429, 200])
    result = client(openai_server, max_retries=2).embeddings.create(model="m", input=["a"])
    assert len(result.data) == 1
    assert len(openai_server.requests_to("/v1/embeddings")) == 2
    assert openai_server.pending("/v1/embeddings") == []


def test_persistent_500_raises(openai_server: OpenAIStub) -> None:
    openai_server.script("/v1/embeddings", [500, 500, 500])
    with pytest.raises(openai.InternalServerError):
        client(openai_server, max_retries=1).embeddings.create(model="m", input=["a"])
    assert len(openai_server.requests) == 2
    assert openai_server.pending("/v1/embeddings") == [500]


def test_chat_completion_from_handler(openai_server: OpenAIStub) -> None:
    openai_server.chat_handler = lambda body: "echo: " + body["messages"][-1]["content"]
    reply = client(openai_server).chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi there"}]
    )
    assert reply.object == "chat.completion"
    assert reply.model == "gpt-x"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == "echo: hi there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.total_tokens == 2 + 3


def test_completion_with_logprobs(openai_server: OpenAIStub) -> None:
    openai_server.completion_handler = lambda body: {
        "text": " yes",
        "logprobs": {"tokens": [" yes"], "token_logprobs": [-0.1], "top_logprobs": None, "text_offset": [0]},
        "finish_reason": "length",
    }
    reply = client(openai_server).completions.create(model="m", prompt="Is it?", max_tokens=1, logprobs=1)
    assert reply.object == "text_completion"
    choice = reply.choices[0]
    assert (choice.text, choice.finish_reason) == (" yes", "length")
    assert choice.logprobs is not None and choice.logprobs.token_logprobs == [-0.1]


def test_unknown_path_and_stop() -> None:
    with OpenAIStub() as stub:
        with pytest.raises(openai.NotFoundError):
            client(stub).models.retrieve("nope")
        url = stub.base_url
    stub.stop()  # idempotent
    assert url.startswith("http://127.0.0.1:")
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(api_key="k", base_url=url, max_retries=0, timeout=2).models.list()
