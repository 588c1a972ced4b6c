"""The notebook API: tune the bundled example from Python, read the run, export it, reload it,
report it; and what the API refuses (a corpus built in memory, several corpora without a name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tuner
from tuner.embedding.config import EmbedderConfig
from tuner.tuning.study.storage import existing_run_storage

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_tune_export_reload_and_report_from_python(tmp_path, openai_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = tuner.load_corpus(EXAMPLE)
    evalset = tuner.load_evaluation_set(QUERIES, corpus)
    embedder = EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url)
    messages: list[str] = []
    run = tuner.tune(corpus, evalset, space="quick", n_trials=4, embedder=embedder, progress=False,
                     echo=messages.append, cache=str(tmp_path / "cache.sqlite3"))

    # The run is named after its corpus and kept in the default storage of that name.
    assert run.name == "handbook" and run.corpora == ["handbook"]
    assert run.storage == f"sqlite:///{(tmp_path / 'studies' / 'handbook.db').resolve()}"
    assert any("running 4 more" in m for m in messages)
    trials = run.trials()
    assert len(trials) == 4 and all(t.config is not None for t in trials)
    assert run.best.score == max(t.score for t in trials)
    assert run.recommended.number in {t.number for t in trials}
    assert run.recommended.score <= run.best.score
    frame = run.trials_dataframe()
    assert len(frame) == 4 and "user_attrs_score" in frame.columns
    front = run.pareto_front()
    # Recall against context tokens per query: no trial has more recall for fewer tokens.
    assert front and all(not (other.recall >= p.recall and other.context_tokens <= p.context_tokens
                              and (other.recall, other.context_tokens) != (p.recall, p.context_tokens))
                         for p in front for other in trials)
    assert "handbook" in run.summary() and "recommended" in run.summary()
    assert run.study().study_name == "handbook/handbook"

    exported = run.export(tmp_path / "best.json")
    written = json.loads((tmp_path / "best.json").read_text())
    assert written["source"]["trial"] == exported.record.number == run.recommended.number
    pipeline = tuner.load_chunker(tmp_path / "best.json")
    assert pipeline.retrieval.to_dict() == run.recommended.config["retrieval"]
    chunks = [c for doc in corpus for c in pipeline.split(doc)]
    assert len(chunks) == run.recommended.metric("chunks")

    again = tuner.load_run("handbook")
    assert again.corpora == ["handbook"] and again.recommended.number == run.recommended.number
    assert again.summary() == ""  # a loaded run did nothing itself

    more = tuner.tune(corpus, evalset, space="quick", n_trials=2, embedder=embedder, progress=False,
                      echo=messages.append, cache=str(tmp_path / "cache.sqlite3"))
    assert len(more.trials()) == 6  # resumed: two more on top

    report = again.report(tmp_path / "report", top=2, bootstrap=50, cache=None)
    assert report.is_file() and "handbook" in report.read_text()

    # A handle opens its storage once and closes it at the end of a with block.
    opened = []

    def counted(*args, **kwargs):
        opened.append(existing_run_storage(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(tuner.api, "existing_run_storage", counted)
    with tuner.load_run("handbook") as handle:
        assert handle.best is not None and handle.recommended is not None and len(handle.trials()) == 6
        assert handle.corpora == ["handbook"] and handle.study().study_name == "handbook/handbook"
    assert len(opened) == 1
    assert opened[0].engine.pool.checkedout() == 0 and handle._opened is None


def test_a_corpus_built_in_memory_and_unnamed_runs_are_refused(tmp_path):
    built = tuner.Corpus("notes", [tuner.Document("a.md", "some text")])
    with pytest.raises(tuner.ChunkwiseError, match="corpus 'notes' was built in memory"):
        tuner.tune(built, QUERIES)
    with pytest.raises(tuner.ChunkwiseError, match="name the run"):
        tuner.tune([EXAMPLE, EXAMPLE / "alerts.md"], QUERIES)
    with pytest.raises(tuner.ChunkwiseError, match="needs a corpus and queries"):
        tuner.tune(EXAMPLE)
    with pytest.raises(tuner.ChunkwiseError, match="no study storage"):
        tuner.load_run("nothing-here", storage=f"sqlite:///{tmp_path}/none.db")


def test_an_evaluation_set_built_in_memory_is_saved_beside_the_study(tmp_path, openai_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = tuner.load_corpus(EXAMPLE)
    loaded = tuner.load_evaluation_set(QUERIES, corpus)
    subset = tuner.EvaluationSet(loaded.queries[:12])
    embedder = EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url)
    run = tuner.tune(EXAMPLE, subset, space="quick", n_trials=2, embedder=embedder, progress=False,
                     echo=lambda _: None, cache=str(tmp_path / "cache.sqlite3"), validation=0)
    saved = tmp_path / "studies" / "handbook.queries.jsonl"
    assert [json.loads(line)["id"] for line in saved.read_text().splitlines()] == [q.id for q in subset]
    assert run.study().user_attrs["settings"]["queries"] == 12
