"""Safe at the edges: collections survive failed builds, keys never reach the terminal or a file,
dead endpoints fail fast and fatally, and outputs are never half-written."""

from __future__ import annotations

import base64
import json
import os
import pickle
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import openai
import pytest

import tuner
from tuner.cli import main
from tuner.deploy.production import (
    BUILDING_PREFIX,
    CollectionError,
    build_collection,
    check_collection_name,
    open_collection,
)
from tuner.embedding import EmbeddingCache
from tuner.embedding.openai import OpenAIEmbedder
from tuner.errors import ChunkwiseError, EmbeddingError
from tuner.llm.client import LLMClient, LLMError
from tuner.llm.endpoint import endpoint_error

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
#: What loading the example folder prints on standard error before anything else.
LOADED = "chunkwise: corpus 'handbook': read 5 files (.md 5); skipped none"
KEY = "edge-test-key-7f3a9c"  # matches none of redact()'s patterns: only registration can hide it
CHUNKER = {"name": "token", "params": {"size": 64, "overlap": 8}}


def write_config(tmp_path: Path, base_url: str, chunker: dict = CHUNKER, model: str = "stub-embed",
                 name: str = "best.json") -> Path:
    path = tmp_path / name
    config = {"chunker": chunker, "embedder": {"provider": "openai", "model": model, "base_url": base_url},
              "retrieval": {"k": 3}}
    path.write_text(json.dumps({"chunkwise_export": 1, "config": config}), encoding="utf-8")
    return path


def expected_chunks(chunker: dict = CHUNKER) -> int:
    """How many chunks the example corpus gives, counted with the chunker alone."""
    made = tuner.make_chunker(chunker["name"], **chunker["params"])
    return sum(len(made.split(document)) for document in tuner.load_corpus(EXAMPLE))


def collections(db: Path) -> dict[str, int]:
    client = chromadb.PersistentClient(path=str(db))
    return {c.name: client.get_collection(c.name).count() for c in client.list_collections()}


def chunk_argv(config: Path, db: Path, cache: Path, *extra: str) -> list[str]:
    return ["chunk", "--config", str(config), str(EXAMPLE), "--chroma", str(db), "--collection", "handbook",
            "--cache", str(cache), *extra]


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


# ---------------------------------------------------------------- 1. a collection is never lost

def test_failed_replace_keeps_the_old_collection_and_writes_no_output(openai_server, tmp_path, keyed, capsys):
    config, db, out = write_config(tmp_path, openai_server.base_url), tmp_path / "db", tmp_path / "chunks.jsonl"
    assert main(chunk_argv(config, db, tmp_path / "c1.sqlite3")) == 0
    count = expected_chunks()
    assert collections(db) == {"handbook": count}

    openai_server.script("/v1/embeddings", [500] * 10)  # more than the client's 5 retries
    capsys.readouterr()
    assert main(chunk_argv(config, db, tmp_path / "c2.sqlite3", "--replace", "-o", str(out))) == 2
    err = capsys.readouterr().err
    # The folder's one-line loading summary, then the error.
    assert err.startswith(f"{LOADED}\nchunkwise: error: the embedding endpoint") and "HTTP 500" in err
    assert collections(db) == {"handbook": count}
    assert not out.exists() and not list(tmp_path.glob(".chunks.jsonl*"))


def test_failure_while_adding_deletes_the_temporary_collection(openai_server, tmp_path, keyed, capsys, monkeypatch):
    config, db, out = write_config(tmp_path, openai_server.base_url), tmp_path / "db", tmp_path / "chunks.jsonl"
    assert main(chunk_argv(config, db, tmp_path / "c.sqlite3")) == 0
    count = expected_chunks()
    from chromadb.api.models.Collection import Collection

    def broken_add(self, **kwargs):
        raise RuntimeError("disk I/O error")

    monkeypatch.setattr(Collection, "add", broken_add)
    capsys.readouterr()
    assert main(chunk_argv(config, db, tmp_path / "c.sqlite3", "--replace", "-o", str(out))) == 2
    err = capsys.readouterr().err
    assert f"collection 'handbook' in {db}" in err and "disk I/O error" in err
    monkeypatch.undo()
    assert collections(db) == {"handbook": count}
    assert not out.exists()


def test_failed_rename_restores_the_replaced_collection(openai_server, tmp_path, keyed, monkeypatch):
    config, db = write_config(tmp_path, openai_server.base_url), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    build_collection(config, [EXAMPLE], db, "handbook", cache=cache)
    count = expected_chunks()
    from chromadb.api.models.Collection import Collection

    real_modify = Collection.modify

    def modify(self, name=None, **kwargs):
        if name == "handbook" and self.name.startswith(BUILDING_PREFIX):
            raise RuntimeError("database is locked")
        return real_modify(self, name=name, **kwargs)

    monkeypatch.setattr(Collection, "modify", modify)
    with pytest.raises(CollectionError, match="database is locked"):
        build_collection(write_config(tmp_path, openai_server.base_url, {"name": "token", "params": {"size": 32}}),
                         [EXAMPLE], db, "handbook", cache=cache, replace=True)
    assert collections(db) == {"handbook": count}


@pytest.mark.filterwarnings("ignore:legacy embedding function config:DeprecationWarning")
def test_successful_replace_swaps_in_the_new_collection(openai_server, tmp_path, keyed):
    db, cache = tmp_path / "db", EmbeddingCache(tmp_path / "c.sqlite3")
    build_collection(write_config(tmp_path, openai_server.base_url), [EXAMPLE], db, "handbook", cache=cache)
    small = {"name": "token", "params": {"size": 32, "overlap": 0}}
    collection = build_collection(write_config(tmp_path, openai_server.base_url, small), [EXAMPLE], db,
                                  "handbook", cache=cache, replace=True)
    assert collections(db) == {"handbook": expected_chunks(small)}
    assert json.loads(collection.collection.metadata["chunkwise_config"])["chunker"]["params"]["size"] == 32
    assert collection.collection.configuration["hnsw"]["space"] == "cosine"


def test_existing_collection_is_refused_before_anything_is_embedded(openai_server, tmp_path, keyed, capsys):
    config, db, out = write_config(tmp_path, openai_server.base_url), tmp_path / "db", tmp_path / "chunks.jsonl"
    assert main(chunk_argv(config, db, tmp_path / "c1.sqlite3")) == 0
    openai_server.reset()
    capsys.readouterr()
    assert main(chunk_argv(config, db, tmp_path / "c2.sqlite3", "-o", str(out))) == 2
    assert capsys.readouterr().err == (f"chunkwise: error: collection 'handbook' already exists in {db}; "
                                       "use --replace to rebuild it\n")
    assert openai_server.requests_to("/v1/embeddings") == [] and not out.exists()


def test_a_failed_first_build_leaves_nothing_that_blocks_a_rerun(openai_server, tmp_path, keyed):
    config, db, out = write_config(tmp_path, openai_server.base_url), tmp_path / "db", tmp_path / "chunks.jsonl"
    openai_server.script("/v1/embeddings", [500] * 10)
    assert main(chunk_argv(config, db, tmp_path / "c.sqlite3", "-o", str(out))) == 2
    assert collections(db) == {} and not out.exists()
    assert main(chunk_argv(config, db, tmp_path / "c.sqlite3", "-o", str(out))) == 0
    assert collections(db) == {"handbook": expected_chunks()}
    assert len(out.read_text(encoding="utf-8").splitlines()) == expected_chunks()


# ---------------------------------------------------------------- 2. chromadb errors are clear

@pytest.mark.parametrize("name", ["ab", "a b", "-abc", "abc-", "x..y", "10.0.0.1", "bad/name", "ünïcode", "x" * 513,
                                  "abc", "a.b_c-d", "x" * 512, "1.2.3", "my.collection"])
def test_collection_name_rules_agree_with_chromadb(tmp_path, name):
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    try:
        client.create_collection(name, embedding_function=None)
        chroma_accepts = True
    except Exception:
        chroma_accepts = False
    try:
        check_collection_name(name)
        accepted = True
    except CollectionError as error:
        accepted = False
        assert repr(name) in str(error) and "3-512 characters" in str(error)
    assert accepted == chroma_accepts


def test_bad_name_is_refused_before_embedding(openai_server, tmp_path, keyed, capsys):
    config = write_config(tmp_path, openai_server.base_url)
    argv = chunk_argv(config, tmp_path / "db", tmp_path / "c.sqlite3")
    argv[argv.index("handbook")] = "my docs"
    assert main(argv) == 2
    assert "chunkwise: error: invalid collection name 'my docs': chromadb needs" in capsys.readouterr().err
    assert openai_server.requests_to("/v1/embeddings") == []


def test_chroma_folder_that_is_a_file(openai_server, tmp_path, keyed, capsys):
    config, db = write_config(tmp_path, openai_server.base_url), tmp_path / "db"
    db.write_text("not a database", encoding="utf-8")
    assert main(chunk_argv(config, db, tmp_path / "c.sqlite3")) == 2
    assert capsys.readouterr().err == (f"chunkwise: error: {db} is a file, not a folder: give a folder for the "
                                       "chromadb database\n")
    assert db.read_text(encoding="utf-8") == "not a database"


def test_the_same_documents_twice_give_duplicate_ids(openai_server, tmp_path, keyed, capsys):
    config, db = write_config(tmp_path, openai_server.base_url), tmp_path / "db"
    argv = chunk_argv(config, db, tmp_path / "c.sqlite3")
    argv.insert(argv.index(str(EXAMPLE)), str(EXAMPLE))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "two chunks would have the same id 'handbook/" in err and "give each document once" in err
    assert collections(db) == {} and openai_server.requests_to("/v1/embeddings") == []


def test_opening_and_querying_errors(openai_server, tmp_path, keyed, monkeypatch):
    config, db = write_config(tmp_path, openai_server.base_url), tmp_path / "db"
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    with pytest.raises(CollectionError, match=f"no chromadb database in {tmp_path / 'nowhere'}"):
        open_collection(config, tmp_path / "nowhere", "handbook")
    assert not (tmp_path / "nowhere").exists()  # opening does not create a database
    build_collection(config, [EXAMPLE], db, "handbook", cache=cache)
    with pytest.raises(CollectionError, match=r"no collection 'other' in .* \(collections there: handbook\)"):
        open_collection(config, db, "other")
    other_model = write_config(tmp_path, openai_server.base_url, model="other-embed", name="other.json")
    with pytest.raises(CollectionError, match="built with the embedder openai:stub-embed, but this configuration "
                                              "uses openai:other-embed"):
        open_collection(other_model, db, "handbook")

    collection = open_collection(config, db, "handbook", cache=cache)
    assert len(collection.query("Which port does the container listen on?")) == 3
    from chromadb.api.models.Collection import Collection

    def broken_query(self, **kwargs):
        raise RuntimeError("Error executing plan: Internal error: segment reader failed")

    monkeypatch.setattr(Collection, "query", broken_query)
    with pytest.raises(CollectionError) as error:
        collection.query("Which port?")
    assert f"chromadb could not query collection 'handbook' in {db}: Error executing plan" in str(error.value)


# ---------------------------------------------------------------- 3. keys never reach the terminal or a file

def files_containing(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_echoed_key_is_masked_in_generate_errors(openai_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.api_key = KEY  # the right key: the request passes authentication
    out = tmp_path / "g.jsonl"
    argv = ["generate", str(EXAMPLE), "-o", str(out), "--n", "2", "--model", "stub-llm",
            "--embedder", "openai:stub-embed", "--relevance-threshold", "0", "--duplicate-threshold", "1"]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    openai_server.script("/v1/chat/completions", [(400, "Invalid request (key {api_key}; {authorization})")])
    assert main(argv) == 2
    printed = capsys.readouterr()
    assert "rejected the request: Invalid request (key ***; Bearer ***)" in printed.err
    assert KEY not in printed.err + printed.out
    openai_server.script("/v1/chat/completions", [(503, "upstream down for {api_key}")] * 6)
    assert main(argv) == 2
    printed = capsys.readouterr()
    assert "failed with HTTP 503 after 5 retries: upstream down for ***" in printed.err
    assert KEY not in printed.err + printed.out
    assert files_containing(tmp_path, KEY) == []


def test_echoed_key_given_as_an_argument_is_masked(openai_server):
    """Not from the environment: only registering the key in use can mask it."""
    secret = "argument-key-51d2e0"
    openai_server.script("/v1/embeddings", [(422, "cannot embed for {api_key}")])
    with pytest.raises(EmbeddingError) as error:
        OpenAIEmbedder("m", base_url=openai_server.base_url, api_key=secret, max_retries=0).embed(["x"])
    assert secret not in str(error.value) and "cannot embed for ***" in str(error.value)
    openai_server.script("/v1/chat/completions", [(500, "bad {api_key}")])
    client = LLMClient(model="m", base_url=openai_server.base_url, api_key="another-key-8e1f", max_retries=0,
                       cache_path=False)
    with pytest.raises(LLMError) as error:
        client.chat([{"role": "user", "content": "hi"}], prompt_version="v")
    assert "another-key-8e1f" not in str(error.value) and "bad ***" in str(error.value)
    assert "another-key-8e1f" not in repr(client)


def test_key_and_url_password_stay_out_of_the_chunk_command(openai_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    password = "url-password-93b7"
    base_url = openai_server.base_url.replace("http://", f"http://alice:{password}@")
    config, db = write_config(tmp_path, base_url), tmp_path / "db"
    assert main(chunk_argv(config, db, tmp_path / "c.sqlite3")) == 0
    openai_server.script("/v1/embeddings", [(500, "failed for {api_key} at {authorization}")] * 6)
    assert main(chunk_argv(config, db, tmp_path / "c2.sqlite3", "--replace")) == 2
    printed = capsys.readouterr()
    assert "the embedding endpoint http://127.0.0.1" in printed.err  # the user and password are kept apart
    # The server echoed the Authorization header: Basic base64("alice:PASSWORD") is masked too.
    for secret in (KEY, password, base64.b64encode(f"alice:{password}".encode()).decode()):
        assert secret not in printed.err + printed.out
    assert files_containing(tmp_path, KEY) == []
    # The collection's metadata and the embedding cache's model identity hide the password:
    # only the configuration the user wrote holds it.
    assert files_containing(tmp_path, password) == [config]
    with sqlite3.connect(tmp_path / "c.sqlite3") as cache:
        (model,) = {row[0] for row in cache.execute("SELECT model FROM embeddings")}
    assert model == f"openai:{openai_server.base_url}:stub-embed"


# ---------------------------------------------------------------- 4. fatal errors and fast failure

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llm_chat(base_url: str, key: str | None = "k", **kwargs) -> str:
    client = LLMClient(model="m", base_url=base_url, api_key=key, cache_path=False, **kwargs)
    return client.chat([{"role": "user", "content": "hi"}], prompt_version="v")


def embed(base_url: str, key: str | None = "k", **kwargs):
    return OpenAIEmbedder("m", base_url=base_url, api_key=key, **kwargs).embed(["x"])


@pytest.mark.parametrize(("call", "path", "error_class"), [(llm_chat, "/v1/chat/completions", LLMError),
                                                          (embed, "/v1/embeddings", EmbeddingError)])
@pytest.mark.parametrize(("statuses", "fatal", "message"), [
    ([401], True, "refused the API key"),
    ([403], True, "denied access to model 'm'"),
    ([404], True, "has no model 'm'"),
    ([400], False, "rejected the request"),
    ([500] * 3, False, "failed with HTTP 500 after 2 retries"),
    ([429] * 3, False, "kept rate-limiting after 2 retries"),
])
def test_which_status_errors_are_fatal(openai_server, call, path, error_class, statuses, fatal, message):
    openai_server.script(path, statuses)
    with pytest.raises(error_class, match=message) as error:
        call(openai_server.base_url, max_retries=2)
    assert error.value.fatal is fatal
    assert pickle.loads(pickle.dumps(error.value)).fatal is fatal  # reaches the tuner from a worker process


@pytest.mark.parametrize("call", [llm_chat, embed])
def test_rate_limit_then_success_succeeds(openai_server, call):
    openai_server.script("/v1/chat/completions", [429, 429, 200])
    openai_server.script("/v1/embeddings", [429, 429, 200])
    assert len(call(openai_server.base_url, max_retries=2)) > 0


@pytest.mark.parametrize(("call", "error_class"), [(llm_chat, LLMError), (embed, EmbeddingError)])
def test_unreachable_endpoint_is_fatal_and_fast(call, error_class, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(error_class, match="API key") as error:
        call("http://127.0.0.1:9/v1", key=None)
    assert error.value.fatal
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: connection refused
    started = time.monotonic()
    with pytest.raises(error_class, match=rf"cannot reach the .* endpoint {url} \(3 HTTP tries") as error:
        call(url, max_retries=2)
    assert error.value.fatal
    assert time.monotonic() - started < 5  # backoff 0.5 s + 1 s, less jitter


@pytest.mark.parametrize(("call", "error_class"), [(llm_chat, LLMError), (embed, EmbeddingError)])
def test_endpoint_that_never_answers_is_fatal(call, error_class):
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        started = time.monotonic()
        with pytest.raises(error_class, match=r"did not answer within 0.3 s \(1 HTTP try\)") as error:
            call(url, max_retries=0, timeout_s=0.3)
    assert error.value.fatal and time.monotonic() - started < 5


def test_no_quota_is_fatal_but_rate_limiting_is_not():
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1/v1/embeddings")
    response = httpx2.Response(429, request=request)
    quota = openai.RateLimitError("You exceeded your current quota", response=response,
                                  body={"code": "insufficient_quota"})
    limited = openai.RateLimitError("Rate limit reached", response=response, body={"code": "rate_limit_exceeded"})
    options = {"service": "embedding", "endpoint": "http://127.0.0.1/v1", "model": "m", "max_retries": 5,
               "timeout_s": 10}
    assert endpoint_error(quota, EmbeddingError, **options).fatal
    assert not endpoint_error(limited, EmbeddingError, **options).fatal
    assert ChunkwiseError.fatal is False and EmbeddingError("x").fatal is False


# ---------------------------------------------------------------- 5. generate writes nothing until a query is accepted

def good_reply(body) -> str:
    passage = body["messages"][-1]["content"].split("<passage>\n", 1)[1].split("\n</passage>", 1)[0]
    sentence = next(line for line in passage.splitlines() if len(line) > 40)
    # A question in other words than its excerpt (one that copies it is rejected), one per sentence.
    return json.dumps({"question": f"Which handbook rule takes {len(sentence)} characters to state?",
                       "references": [{"content": sentence}]})


def generate_argv(out: Path, base_url: str, n: int = 3) -> list[str]:
    """The stub writes every question; these tests are about what a failure leaves in the file, so
    the critique's request (tested in tests/data/test_generate_filters.py) is left out."""
    return ["generate", str(EXAMPLE), "-o", str(out), "--n", str(n), "--base-url", base_url, "--model", "stub-llm",
            "--embedder", "openai:stub-embed", "--relevance-threshold", "-1", "--duplicate-threshold", "1",
            "--no-critique"]


def test_generate_without_a_key_creates_no_file(openai_server, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    out = tmp_path / "g.jsonl"
    assert main(generate_argv(out, openai_server.base_url)) == 2
    assert "chunkwise: error: no API key for the LLM endpoint" in capsys.readouterr().err
    assert not out.exists()


def test_generate_failure_later_keeps_the_accepted_queries(openai_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    calls = []

    def two_then_fail(body):
        calls.append(body)
        if len(calls) > 2:
            raise RuntimeError("model crashed")
        return good_reply(body)

    openai_server.chat_handler = two_then_fail
    out = tmp_path / "g.jsonl"
    assert main(generate_argv(out, openai_server.base_url)) == 2
    assert "failed with HTTP 500" in capsys.readouterr().err
    corpus = tuner.load_corpus(EXAMPLE)
    assert [q.id for q in tuner.load_evaluation_set(out, corpus)] == ["g0001", "g0002"]


def test_generate_full_disk_leaves_whole_queries(openai_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.chat_handler = good_reply
    out = tmp_path / "g.jsonl"
    real_write = os.write

    def write(fd, data):
        if bytes(data).startswith(b'{"id": "g0002"'):
            real_write(fd, bytes(data)[:10])  # a partial line, then the disk is full
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(ChunkwiseError, match="No space left on device; it keeps the 1 queries accepted before"):
        main_raising(generate_argv(out, openai_server.base_url))
    monkeypatch.undo()
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == "g0001"


def main_raising(argv: list[str]) -> None:
    """Run a command's handler directly, so the test sees its exception."""
    from tuner.cli import build_parser as _build_parser

    args = _build_parser().parse_args(argv)
    args.handler(args)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_generate_to_a_full_device(openai_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.chat_handler = good_reply
    assert main(generate_argv(Path("/dev/full"), openai_server.base_url)) == 2
    assert capsys.readouterr().err.endswith(
        "chunkwise: error: cannot write /dev/full: No space left on device; nothing was written\n")


def test_generate_output_in_a_missing_folder_fails_before_any_request(openai_server, tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    out = tmp_path / "missing" / "g.jsonl"
    assert main(generate_argv(out, openai_server.base_url)) == 2
    assert f"cannot write {out}: the folder {out.parent} does not exist" in capsys.readouterr().err
    assert openai_server.requests == []


# ---------------------------------------------------------------- 6. stdout: closed pipe, full device

def chunk_process(tmp_path: Path, stdout) -> subprocess.Popen:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"chunkwise_export": 1, "config": {
        "chunker": {"name": "token", "params": {"size": 16, "overlap": 8}}}}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", "chunk", "--config", str(config), str(EXAMPLE)],
                            stdout=stdout, stderr=subprocess.PIPE, env=env)


def test_chunk_into_a_closed_pipe(tmp_path):
    process = chunk_process(tmp_path, subprocess.PIPE)  # ~150 kB of JSONL: more than a pipe holds
    assert len(process.stdout.read(100)) == 100
    process.stdout.close()  # like `| head -c 100`
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 2
    assert err == f"{LOADED}\nchunkwise: error: cannot write to standard output: the program reading it has " \
                  "stopped (broken pipe)\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_chunk_to_a_full_device(tmp_path):
    with open("/dev/full", "wb") as full:
        process = chunk_process(tmp_path, full)
        err = process.stderr.read().decode()
        assert process.wait(timeout=60) == 2
    assert err == f"{LOADED}\nchunkwise: error: cannot write to standard output: No space left on device\n"
