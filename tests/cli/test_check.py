"""``chunkwise check`` (issue 62, item 2): a check for CI, run as a real process.

A corpus of four manuals, each answering three of twelve questions with a distinctive paragraph,
embedded by the OpenAI-compatible stub (no model to load). Production is a configuration a team
could ship: ``token 16/0`` with ``k=1`` retrieves one 16-token window of a paragraph of about 90
tokens, so it misses most of every excerpt, where the BM25 baselines retrieve whole paragraphs:
production is significantly worse (exit 1). ``recursive 256/0`` BM25 with ``k=5`` is the best
there is (exit 0). Bad input exits 2 with one line, and a check killed half-way (SIGTERM or
SIGKILL while the stub holds its first embedding) leaves no output, complete or partial.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner import load_corpus, load_evaluation_set

from openai_stub import EmbeddingGate

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["glacier", "harbor", "orchard", "volcano", "meadow", "canyon", "lagoon", "prairie", "tundra", "savanna",
          "estuary", "plateau"]
VERBS = ["archives", "throttles", "replicates", "encrypts", "compresses", "indexes", "audits", "rotates",
         "schedules", "validates", "mirrors", "prunes"]
FILLER = ("General notes about the platform follow here; they describe nothing specific and repeat common words "
          "such as system, service, records, and operators so that retrieval has distractors to skip. ") * 3


def paragraph(i: int) -> str:
    topic, verb = TOPICS[i], VERBS[i]
    return (f"The {topic} service {verb} every {topic} record before midnight. Operators of the {topic} cluster "
            f"set the {topic} quota in the {topic} console, and the {topic} daemon {verb} the records in batches "
            f"of {100 + i} items. When the {topic} queue overflows, the {topic} daemon pauses for {i + 3} minutes "
            f"and then {verb} the remaining {topic} records in order. The {topic} report lists every record the "
            f"daemon {verb} with its checksum and its owner.")


@pytest.fixture
def data(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = {}
    for d in range(4):
        parts = [f"# Manual {d}"]
        for i in range(3 * d, 3 * d + 3):
            parts += [FILLER, paragraph(i)]
        texts[f"m{d}.md"] = "\n\n".join([*parts, FILLER]) + "\n"
        (docs / f"m{d}.md").write_text(texts[f"m{d}.md"], encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    with queries.open("w", encoding="utf-8") as out:
        for i, topic in enumerate(TOPICS):
            document, excerpt = f"m{i // 3}.md", paragraph(i)
            start = texts[document].index(excerpt)
            out.write(json.dumps({"id": f"q{i}", "question": f"What does the {topic} daemon do when the {topic} "
                                  "queue overflows?", "references": [{"document": document, "start_index": start,
                                                                      "end_index": start + len(excerpt),
                                                                      "content": excerpt}]}) + "\n")
    return docs, queries


def production(tmp_path: Path, stub, chunker: dict, retrieval: dict, name: str = "production.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"chunker": chunker, "retrieval": retrieval,
                                "embedder": {"provider": "openai", "model": "stub-embed", "base_url": stub.base_url}}),
                    encoding="utf-8")
    return path


def bad(tmp_path: Path, stub) -> Path:
    return production(tmp_path, stub, {"name": "token", "params": {"size": 16, "overlap": 0}},
                      {"k": 1, "method": "bm25"})


def good(tmp_path: Path, stub) -> Path:
    return production(tmp_path, stub, {"name": "recursive", "params": {"size": 256, "overlap": 0}},
                      {"k": 5, "method": "bm25"})


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": "test-key", "CHUNKWISE_CACHE_DIR": str(tmp_path / "cachedir"),
            "PYTHONPATH": str(ROOT)}


def chunkwise(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True,
                          env=environment(tmp_path), timeout=300, cwd=tmp_path)


def check(tmp_path: Path, config: Path, docs: Path, queries: Path, *args: str) -> subprocess.CompletedProcess:
    return chunkwise(tmp_path, "check", "--config", str(config), "--corpus", str(docs), "--queries", str(queries),
                     "--cache", str(tmp_path / "cache.sqlite3"), *args)


def test_production_significantly_worse_than_a_baseline_exits_1(tmp_path, openai_server, data):
    docs, queries = data
    out, summary = tmp_path / "check.json", tmp_path / "check.md"
    done = check(tmp_path, bad(tmp_path, openai_server), docs, queries, "--json", str(out), "--markdown", str(summary))
    assert done.returncode == 1, done.stderr
    assert "FAIL: production is significantly worse than recursive 256/0 bm25" in done.stdout
    assert "Bonferroni-corrected for the 9 configurations compared" in done.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["verdict"] == "worse" and result["compared"] == 9 and result["questions"] == 12
    assert result["level"] == pytest.approx(0.05 / 9)
    assert result["comparison"]["margin_test"]["p_value"] <= result["level"]
    # The figures, checked by hand: a 16-token window of a ~90-token excerpt, against whole paragraphs.
    assert result["production"]["recall"] < 0.3 and result["best"]["recall"] == pytest.approx(1.0)
    assert result["configurations"][0]["name"] in ("recursive 256/0 bm25", "markdown 256/0 bm25")
    markdown = summary.read_text(encoding="utf-8")
    assert markdown.startswith("## chunkwise check: ❌ production is significantly worse")
    assert "| **token(size=16, overlap=0), k=1, bm25** | production |" in markdown


def test_production_that_is_the_best_holds_and_a_margin_lowers_the_bar(tmp_path, openai_server, data):
    docs, queries = data
    done = check(tmp_path, good(tmp_path, openai_server), docs, queries, "--json", str(tmp_path / "good.json"))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "good.json").read_text(encoding="utf-8"))
    assert result["verdict"] == "holds" and result["same_as_production"] == ["recursive 256/0 bm25"]
    assert result["compared"] == 8 and "none of the 8 other configurations scores higher" in done.stdout
    # The same bad production passes when the team accepts a loss of up to 0.6 score units (it loses ~0.42).
    margin = check(tmp_path, bad(tmp_path, openai_server), docs, queries, "--margin", "0.6", "--json",
                   str(tmp_path / "margin.json"))
    assert margin.returncode == 0, margin.stderr
    result = json.loads((tmp_path / "margin.json").read_text(encoding="utf-8"))
    assert result["margin"] == 0.6 and 0.3 < result["comparison"]["difference"] < 0.6
    assert "not significantly by more than the margin (0.6)" in done.stdout + margin.stdout


def test_a_study_adds_its_recommendation_and_tie_set(tmp_path, openai_server, data):
    docs, queries = data
    storage = f"sqlite:///{tmp_path / 'ci.db'}"
    study = tmp_path / "study.yaml"
    study.write_text(json.dumps({
        "name": "ci", "corpora": {"docs": str(docs)}, "queries": str(queries), "space": str(ROOT / "search_spaces"
                                                                                             / "quick.yaml"),
        "embedder": {"provider": "openai", "model": "stub-embed", "base_url": openai_server.base_url},
        "storage": storage, "trials": 4, "jobs": 1, "cache": str(tmp_path / "cache.sqlite3")}), encoding="utf-8")
    assert (tuned := chunkwise(tmp_path, "tune", str(study))).returncode == 0, tuned.stderr
    exported = tmp_path / "prod.json"
    assert chunkwise(tmp_path, "export", "--storage", storage, "--study", "ci", "-o", str(exported)).returncode == 0
    done = check(tmp_path, exported, docs, queries, "--study", "ci", "--storage", storage, "--json",
                 str(tmp_path / "study.json"))
    assert done.returncode in (0, 1), done.stderr
    result = json.loads((tmp_path / "study.json").read_text(encoding="utf-8"))
    roles = {role for c in result["configurations"] for role in c["roles"]}
    assert {"production", "study recommendation", "study baseline"} <= roles
    assert result["study"] == "ci/docs" and result["compared"] == len(result["configurations"]) - 1
    recommended = next(c for c in result["configurations"] if "study recommendation" in c["roles"])
    assert "production" in recommended["roles"]  # the export is the recommendation itself
    assert f"Bonferroni-corrected for the {result['compared']} configuration" in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--margin", "-1"], "--margin=-1.0 is invalid; allowed: a number of score units >= 0"),
    (["--tied", "2"], "--tied: only with --study NAME"),
    (["--study", "nope", "--storage", "sqlite:///missing.db"], "no study storage at sqlite:///"),
    (["--json", "x.json", "--markdown", "x.json"], "--json, --markdown: one file each (both name x.json)"),
    (["--json", "missing/x.json"], "cannot write missing/x.json: the folder"),
    (["--weights", "recall"], "--weights='recall' is invalid; allowed: NAME=NUMBER pairs"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, openai_server, data, args, message):
    docs, queries = data
    done = check(tmp_path, good(tmp_path, openai_server), docs, queries, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("chunkwise: error:")]
    assert len(errors) == 1 and message in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_damaged_or_missing_configuration_exits_2(tmp_path, openai_server, data):
    docs, queries = data
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"chunkwise_export": 1, "config": {"chunker": {"name": "nope"}}}', encoding="utf-8")
    for config in (damaged, tmp_path / "missing.json"):
        done = check(tmp_path, config, docs, queries)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("chunkwise: error:") == 1


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_check_killed_half_way_leaves_nothing_half_written(tmp_path, openai_server, data, how):
    docs, queries = data
    assert len(load_evaluation_set(queries, load_corpus(docs))) == 12
    out, summary = tmp_path / "check.json", tmp_path / "check.md"
    out.write_text("the previous check's result\n", encoding="utf-8")  # kept as it is until a check completes
    gate = EmbeddingGate(openai_server, close_when=lambda: True)  # hold the first embedding (a dense baseline)
    process = subprocess.Popen([sys.executable, "-m", "tuner", "check", "--config", str(bad(tmp_path, openai_server)),
                                "--corpus", str(docs), "--queries", str(queries), "--cache",
                                str(tmp_path / "cache.sqlite3"), "--json", str(out), "--markdown", str(summary)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(tmp_path),
                               cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not gate.held.is_set():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the check never reached its first embedding"
            time.sleep(0.05)
        process.send_signal(getattr(signal, how))
        _, err = process.communicate(timeout=60)
    finally:
        gate.open.set()
        if process.poll() is None:
            process.kill()
    if how == "SIGTERM":
        assert process.returncode == 143 and "chunkwise: stopped by SIGTERM" in err, err
    else:
        assert process.returncode == -signal.SIGKILL
    assert out.read_text(encoding="utf-8") == "the previous check's result\n"
    assert not summary.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
