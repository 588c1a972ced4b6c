"""End-to-end evaluation, retrieval backends and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tuner
from tuner.cli import main
from tuner.embedding import EmbeddingCache
from tuner.retrieval import ChromaIndex, NumpyIndex

from fakes import WordEmbedder, two_corpora

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CORPUS = ROOT / "examples" / "handbook"
EXAMPLE_QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


def test_pooled_and_per_corpus_retrieval():
    corpora, queries = two_corpora()
    # One chunk per paragraph (4 + 5 tokens do not fit in 6).
    kwargs = dict(chunker="recursive", size=6, k=2, unit="chars", embedder=WordEmbedder(), cache=None)
    pooled = tuner.evaluate(corpora, queries, **kwargs)
    texts = [c.text for c in pooled.chunks]
    assert texts == ["apple apple apple.", "banana banana banana.", "apple engine engine.",
                     "wheel brake brake."]
    assert pooled.chunk_corpora == ["fruit", "fruit", "cars", "cars"]
    # q1 "apple": pooled top-2 is its own chunk, then the cars chunk that mentions apple
    # (20 characters); q2 "brake" finds its chunk first.
    per_query = pooled.scores.at(2)
    assert per_query["recall"].tolist() == [1.0, 1.0]
    assert per_query["precision"][0] == pytest.approx(18 / (18 + 20))
    scoped = tuner.evaluate(corpora, queries, scope="per-corpus", **kwargs)
    # Per corpus, the second retrieved chunk is the fruit corpus's banana chunk (21 chars).
    assert scoped.scores.at(2)["precision"][0] == pytest.approx(18 / (18 + 21))
    assert set(scoped.metrics["per_corpus"]) == {"fruit", "cars"}


def test_chroma_and_numpy_indexes_agree():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(200, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:20] + 0.05 * rng.normal(size=(20, 32)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    expected = NumpyIndex(vectors).search(queries, 5)
    chroma = ChromaIndex(vectors)
    try:
        assert np.array_equal(chroma.search(queries, 5), expected)
    finally:
        chroma.close()
    # Fewer vectors than k: padded with -1.
    assert NumpyIndex(vectors[:3]).search(queries[:1], 5)[0].tolist()[3:] == [-1, -1]


def test_persistent_chroma_index(tmp_path):
    vectors = np.eye(4, dtype=np.float32)
    ChromaIndex(vectors, path=tmp_path / "db", collection="chunks")
    import chromadb

    collection = chromadb.PersistentClient(path=str(tmp_path / "db")).get_collection("chunks")
    assert collection.count() == 4


@pytest.fixture(scope="module")
def example():
    corpus = tuner.load_corpus(EXAMPLE_CORPUS)
    return corpus, tuner.load_evaluation_set(EXAMPLE_QUERIES, corpus)


@pytest.mark.slow
def test_second_evaluation_reembeds_nothing(example, tmp_path):
    corpus, queries = example
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    cold = tuner.evaluate(corpus, queries, chunker="recursive", size=200, overlap=20, cache=cache)
    warm = tuner.evaluate(corpus, queries, chunker="recursive", size=200, overlap=20, cache=cache)
    assert cold.embedding["cache_hit_rate"] == 0.0
    assert warm.embedding["cache_hit_rate"] == 1.0 and warm.embedding["computed_texts"] == 0
    assert warm.metrics == cold.metrics
    overall = cold.metrics["overall"]
    assert 0.5 < overall["recall"]["mean"] <= 1.0
    assert 0.0 < overall["iou"]["mean"] <= overall["precision_omega"]["mean"] <= 1.0
    # Recall can only grow with k; precision is scored for every k <= 5 from one ranking.
    assert cold.metrics_at(1)["overall"]["recall"]["mean"] <= overall["recall"]["mean"]
    assert cold.chunk_stats["max_chunk_tokens"] <= 200


@pytest.mark.slow
def test_cli_evaluate_json(tmp_path, capsys):
    code = main(["evaluate", "--corpus", str(EXAMPLE_CORPUS), "--queries", str(EXAMPLE_QUERIES),
                 "--chunker", "token", "-p", "size=128", "-p", "overlap=16", "-k", "3",
                 "--unit", "chars", "--cache", str(tmp_path / "c.sqlite3"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["chunker"] == {"name": "token", "params": {"size": 128, "overlap": 16}}
    assert out["config"]["retrieval"]["k"] == 3 and out["config"]["unit"] == "chars"
    assert out["queries"] == 30
    assert set(out["metrics"]["overall"]) == {"recall", "precision", "iou", "precision_omega", "hit_rate", "mrr",
                                              "ndcg", "doc_recall", "context_tokens"}


@pytest.mark.parametrize(("args", "message"), [
    (["--corpus", "missing-folder"], "corpus 'missing-folder' does not exist"),
    (["-p", "size=0"], "size=0 is invalid; allowed: an integer >= 1"),
    (["--chunker", "nope"], "chunker='nope' is invalid; allowed: cluster, "),
    (["-p", "size"], "--param='size' is invalid; allowed: NAME=VALUE"),
    (["--config", "no-such-config.yaml"], "does not exist"),
])
def test_cli_errors_exit_2_without_traceback(args, message, capsys):
    base = {"--corpus": str(EXAMPLE_CORPUS), "--queries": str(EXAMPLE_QUERIES)}
    argv = ["evaluate"]
    for flag, value in base.items():
        if flag not in args:
            argv += [flag, value]
    assert main(argv + args + ["--no-cache"]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_cli_validate_converts_chroma_csv_to_jsonl(tmp_path, capsys):
    (tmp_path / "notes.md").write_text("Tea is served at four. Coffee at nine.", encoding="utf-8")
    csv_path = tmp_path / "q.csv"
    refs = json.dumps([{"content": "Coffee at nine.", "start_index": 23, "end_index": 38}])
    import csv

    with csv_path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["question", "references", "corpus_id"], ["When is coffee?", refs, "notes"]])
    out = tmp_path / "q.jsonl"
    assert main(["validate", "--corpus", str(tmp_path / "notes.md"), "--queries", str(csv_path),
                 "-o", str(out)]) == 0
    assert "1 queries, 1 references" in capsys.readouterr().out
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["references"] == [{"document": "notes.md", "start_index": 23, "end_index": 38,
                                      "content": "Coffee at nine."}]


def test_console_script_lists_chunkers():
    result = subprocess.run([sys.executable, "-m", "tuner", "chunkers"], capture_output=True, text=True,
                            check=True)
    lines = result.stdout.splitlines()
    names = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    assert names == ["cluster", "clustering", "double_pass", "kamradt", "kamradt_bounded", "llm", "logprob",
                     "markdown", "recursive", "sentence", "token"]
    assert any(line.split()[:2] == ["overlap", "int"] for line in lines)


def test_evaluate_reports_rank_document_and_context_metrics():
    from tuner.text.tokens import encoding

    corpora, queries = two_corpora()
    result = tuner.evaluate(corpora, queries, chunker="recursive", size=6, k=2, unit="chars",
                            embedder=WordEmbedder(), cache=None)
    at2 = result.scores.at(2)
    # q1 "apple": its own chunk first (holds the whole reference), then the cars chunk;
    # q2 "brake": its chunk first, then a chunk of another document.
    assert at2["hit_rate"].tolist() == [1.0, 1.0] and at2["mrr"].tolist() == [1.0, 1.0]
    assert at2["ndcg"].tolist() == pytest.approx([1.0, 1.0])
    assert at2["doc_recall"].tolist() == [1.0, 1.0]
    q1 = len(encoding().encode("apple apple apple.")) + len(encoding().encode("apple engine engine."))
    assert at2["context_tokens"][0] == q1
    overall = json.loads(json.dumps(result.to_dict()))["metrics"]["overall"]
    assert {"hit_rate", "mrr", "ndcg", "doc_recall", "context_tokens"} <= set(overall)
    assert overall["mrr"]["mean"] == pytest.approx(1.0)
