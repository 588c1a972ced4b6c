"""Credentials given in a URL (storage, embedding endpoint, LLM endpoint, Dask scheduler) are
used, and never written: not in study settings, trial attributes, rates keys, caches, exports,
reports, evaluation sets or messages (issue 30, item 2)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa

from tuner.chunkers.llm import LLMChunker
from tuner.cli import main
from tuner.embedding.config import EmbedderConfig, embedder_key
from tuner.embedding.openai import OpenAIEmbedder
from tuner.llm.client import LLMClient
from tuner.tuning.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
EMBED_PASSWORD = "embed-Pa55word"
LLM_PASSWORD = "llm-Pa55word"
STORAGE_PASSWORD = "store-Pa55word"
SCHEDULER_PASSWORD = "sched-Pa55word"
SECRETS = (EMBED_PASSWORD, LLM_PASSWORD, STORAGE_PASSWORD, SCHEDULER_PASSWORD)


@pytest.fixture(autouse=True)
def _environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    # Set here so that what a run adds to it is undone after the test.
    monkeypatch.setenv("CHUNKWISE_ENDPOINT_CREDENTIALS", "")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))


def with_credentials(url: str, user: str, password: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{user}:{password}@{rest}"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_an_embedder_url_keeps_no_password_and_its_requests_carry_it(openai_server):
    url = with_credentials(openai_server.base_url, "apiuser", EMBED_PASSWORD)
    config = EmbedderConfig.from_dict({"provider": "openai", "model": "stub-embed", "base_url": url})
    assert config.base_url == openai_server.base_url
    assert EMBED_PASSWORD not in json.dumps(config.to_dict()) + embedder_key(config)
    assert config == EmbedderConfig.from_dict({"provider": "openai", "model": "stub-embed",
                                               "base_url": openai_server.base_url})
    vectors = config.build().embed(["one text", "another"])
    assert len(vectors) == 2
    assert openai_server.requests_to("/v1/embeddings")[0].headers["authorization"] == basic("apiuser", EMBED_PASSWORD)

    direct = OpenAIEmbedder("stub-embed", base_url=url)
    assert EMBED_PASSWORD not in direct.identity + direct.base_url


def test_an_llm_url_keeps_no_password_in_chunker_parameters_or_the_client(openai_server, tmp_path):
    url = with_credentials(openai_server.base_url, "llmuser", LLM_PASSWORD)
    chunker = LLMChunker(base_url=url)
    assert chunker.get_params()["base_url"] == openai_server.base_url
    client = LLMClient(model="stub-llm", base_url=url, cache_path=tmp_path / "llm.sqlite3")
    assert LLM_PASSWORD not in repr(client) + client.endpoint
    assert client.chat([{"role": "user", "content": "hi"}], prompt_version="v") == "This is a stub reply."
    assert openai_server.requests_to("/v1/chat/completions")[0].headers["authorization"] == basic("llmuser",
                                                                                                   LLM_PASSWORD)


def test_credentials_from_the_environment_reach_an_endpoint_given_without_them(openai_server, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_ENDPOINT_CREDENTIALS",
                       with_credentials(openai_server.base_url, "envuser", EMBED_PASSWORD) + "/")
    OpenAIEmbedder("stub-embed", base_url=openai_server.base_url).embed(["text"])
    assert openai_server.requests[0].headers["authorization"] == basic("envuser", EMBED_PASSWORD)


def test_a_scheduler_address_with_a_password_is_refused_without_showing_it(capsys):
    scheduler = f"tcp://dask:{SCHEDULER_PASSWORD}@127.0.0.1:1"
    assert main(["tune", "--name", "s", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                 "--space", "quick", "--backend", "dask", "--scheduler", scheduler,
                 "--storage", "postgresql+psycopg://u@127.0.0.1:1/db"]) == 2
    err = capsys.readouterr().err
    assert "tcp://127.0.0.1:1" in err and "user or password" in err and "Traceback" not in err
    assert SCHEDULER_PASSWORD not in err


def dump_database(url: str) -> str:
    """Every row of every table of the database, as text."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            return "\n".join(repr(row) for table in sa.inspect(conn).get_table_names()
                             for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')))
    finally:
        engine.dispose()


def all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.slow
def test_no_credential_of_any_url_is_written_anywhere(tmp_path, fresh_postgres_url, openai_server, capsys):
    from data.test_generate import answer_with, echo_question

    # The test server trusts loopback connections: any password is accepted (and ignored).
    storage = sa.make_url(fresh_postgres_url).set(password=STORAGE_PASSWORD).render_as_string(hide_password=False)
    embed_url = with_credentials(openai_server.base_url, "apiuser", EMBED_PASSWORD)
    llm_url = with_credentials(openai_server.base_url, "llmuser", LLM_PASSWORD)
    openai_server.chat_handler = answer_with(echo_question)
    study = tmp_path / "study.yaml"
    study.write_text(json.dumps({"name": "sec", "corpora": {"handbook": str(EXAMPLE)}, "queries": str(QUERIES),
                                 "space": "quick", "trials": 2, "storage": storage,
                                 "embedder": {"provider": "openai", "model": "stub-embed", "base_url": embed_url}}))
    out = tmp_path / "out"
    out.mkdir()
    assert main(["tune", str(study)]) == 0
    assert main(["export", "--storage", storage, "--study", "sec", "-o", str(out / "best.json")]) == 0
    assert main(["report", "--storage", storage, "--study", "sec", "-o", str(out / "report"),
                 "--bootstrap", "50"]) == 0
    assert main(["generate", str(EXAMPLE), "-o", str(out / "generated.jsonl"), "--n", "2", "--base-url", llm_url,
                 "--model", "stub-llm", "--relevance-threshold", "0", "--duplicate-threshold", "1"]) == 0
    assert main(["tune", "--name", "sec", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                 "--space", "quick", "--backend", "dask", "--storage", storage,
                 "--scheduler", f"tcp://dask:{SCHEDULER_PASSWORD}@127.0.0.1:1"]) == 2
    printed = "".join(capsys.readouterr())

    requests = openai_server.requests
    assert {r.headers.get("authorization") for r in requests if r.path == "/v1/embeddings"} == \
        {basic("apiuser", EMBED_PASSWORD)}
    assert {r.headers.get("authorization") for r in requests if r.path == "/v1/chat/completions"} == \
        {basic("llmuser", LLM_PASSWORD)}
    loaded = optuna.load_study(study_name="sec/handbook", storage=make_storage(storage))
    assert loaded.user_attrs["settings"]["embedder"]["base_url"] == openai_server.base_url
    assert len([t for t in loaded.trials if t.state == optuna.trial.TrialState.COMPLETE]) >= 2

    dump = dump_database(storage)
    written = all_bytes(out) + all_bytes(tmp_path / "cache")
    assert (out / "report").is_dir() and (out / "best.json").is_file() and (tmp_path / "cache").is_dir()
    # The passwords, and the Authorization headers that carry them (base64, as a server may echo them).
    encoded = tuple(basic(user, password).removeprefix("Basic ")
                    for user, password in (("apiuser", EMBED_PASSWORD), ("llmuser", LLM_PASSWORD)))
    for secret in (*SECRETS, *encoded):
        assert secret not in dump
        assert secret.encode() not in written
        assert secret not in printed
