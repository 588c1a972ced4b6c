"""``chunkwise validate --agreement`` (issue 49, item 1): a real process on the bundled example,
its figures checked against a brute-force τ-b and against ``tuner.evaluate``; every bad input
one message naming the file or value, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tuner import evaluate, load_corpus, load_evaluation_set
from tuner.cli import main
from tuner.evaluation.agreement import grid_rows
from tuner.evaluation.config import EvaluationConfig
from tuner.evaluation.head_to_head import MIN_QUESTIONS

from fakes import brute_tau_b

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


def chunkwise(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)


def subset(tmp_path: Path, documents: set[str], name: str = "subset.jsonl") -> Path:
    records = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines()]
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records if r["references"][0]["document"] in documents),
                    encoding="utf-8")
    return path


def test_the_bundled_questions_against_themselves_agree_fully(tmp_path):
    # BM25 rows and the dense ones: four chunkings embedded once each, for both sets' questions.
    done = chunkwise(tmp_path, "validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), "--agreement",
                     str(QUERIES), "--method", "bm25", "--method", "dense", "--json", "--resamples", "500")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    rows = grid_rows(["bm25", "dense"])
    assert [c["label"] for c in found["configurations"]] == [row.label for row in rows]
    assert all(c["candidate"] == c["reference"] for c in found["configurations"])
    assert found["tau_b"] == 1.0 and found["interval"][1] <= 1.0 and found["resamples"] == 500
    assert found["candidate_best_on_reference"]["ranks"][0] == 1 and found["verdict"] in ("stand-in", "unconfirmed")
    # Progress: the plan, then one line per chunking.
    assert "ranking 16 configurations (k=5) on 30 + 30 questions: 12 chunkings, 4 of them embedded" in done.stderr
    assert "[12/12] recursive size=120 overlap=0: bm25" in done.stderr and "Traceback" not in done.stderr


def test_a_subset_about_two_documents_against_the_bundled_questions(tmp_path):
    made = subset(tmp_path, {"alerts.md", "troubleshooting.md"})
    done = chunkwise(tmp_path, "validate", "--corpus", f"handbook={EXAMPLE}", "--queries", str(made),
                     "--agreement", str(QUERIES), "--method", "bm25", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    means = {c["label"]: (c["candidate"], c["reference"]) for c in found["configurations"]}
    assert found["tau_b"] == pytest.approx(brute_tau_b(*zip(*means.values())))
    assert found["candidate"] == {"name": str(made), "questions": 12}
    assert -1 <= found["interval"][0] <= found["interval"][1] <= 1
    versus = found["head_to_head"]
    assert (versus["size"], versus["held_out"], versus["splits"]) == (12, 18, 1000)
    assert versus["own_interval"][0] <= versus["own_median"] <= versus["own_interval"][1]
    assert 0 <= versus["closer"] <= 1 and versus["compared"] <= 1000 and versus["sentence"].startswith("On equal")
    # Scored together, each set gets what `evaluate` gives it alone.
    corpus = load_corpus(EXAMPLE, "handbook")
    sets = ((load_evaluation_set(made, corpus), 0), (load_evaluation_set(QUERIES, corpus), 1))
    for row in grid_rows(["bm25"])[:3]:
        for evaluation_set, column in sets:
            alone = evaluate(corpus, evaluation_set, row.config(EvaluationConfig()), cache=None)
            assert means[row.label][column] == pytest.approx(float(np.mean(alone.scores.at(5)["recall"])))


def test_the_text_output_names_both_sets_and_ends_with_the_verdict(tmp_path, capsys):
    made = subset(tmp_path, {"alerts.md", "troubleshooting.md", "scheduling.md"})
    assert main(["validate", "--corpus", str(EXAMPLE), "--queries", str(made), "--agreement", str(QUERIES),
                 "--method", "bm25", "--resamples", "200"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "18 queries, 21 references: all match their documents"
    header = next(i for i, line in enumerate(out) if line.startswith("Agreement of "))
    assert out[header] == (f"Agreement of {made} (18 questions) with {QUERIES} (30 questions): 12 configurations, "
                           "mean recall at k=5")
    assert out[header + 2].split() == ["configuration", str(QUERIES), "rank", str(made), "rank"]
    assert len(out[header + 3:header + 15]) == 12 and out[header + 15] == ""
    assert out[header + 16].startswith("Kendall tau-b ") and "95% of the draws give" in out[header + 16]
    assert out[header + 17].startswith(f"{made}'s best (") and f" of 12 on {QUERIES}: " in out[header + 17]
    assert out[header + 18].startswith(f"{QUERIES}'s best (")
    assert out[-1].startswith(str(made)) and out[-1].endswith(".")
    # Beside the team's own questions on equal terms: 15 of each against the other 15 of QUERIES.
    assert out[-3].startswith(f"On equal terms (1000 random splits of {QUERIES} into 15 and 15 questions): against "
                              f"the 15, 15 of {made} rank the configurations at tau-b ")


def error_of(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("chunkwise: error:") == 1, err
    return err


def test_a_missing_agreement_file_is_named_and_nothing_is_written(tmp_path, capsys):
    output = tmp_path / "out.jsonl"
    err = error_of(capsys, ["validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), "--agreement",
                            str(tmp_path / "own.jsonl"), "-o", str(output)])
    assert str(tmp_path / "own.jsonl") in err and not output.exists()


def test_too_few_questions_say_how_many_are_needed_before_anything_is_written(tmp_path, capsys):
    records = QUERIES.read_text(encoding="utf-8").splitlines()
    own = tmp_path / "own.jsonl"
    own.write_text("\n".join(records[:MIN_QUESTIONS - 1]) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    err = error_of(capsys, ["validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), "--agreement", str(own),
                            "-o", str(output)])
    assert f"{own} holds {MIN_QUESTIONS - 1} question(s)" in err and f"at least {MIN_QUESTIONS} are needed" in err
    assert not output.exists()


def test_sets_about_different_corpora_are_refused(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.md").write_text("".join(f"Note {n}: the value of setting {n} is {n * 7}.\n" for n in range(20)),
                                    encoding="utf-8")
    own = tmp_path / "own.jsonl"
    own.write_text("".join(json.dumps({"id": f"n{n}", "question": f"What is setting {n}?", "corpus": "other",
                                       "references": [{"document": "notes.md",
                                                       "content": f"the value of setting {n} is {n * 7}"}]}) + "\n"
                           for n in range(6)), encoding="utf-8")
    err = error_of(capsys, ["validate", "--corpus", f"handbook={EXAMPLE}", "--corpus", f"other={other}",
                            "--queries", str(QUERIES), "--agreement", str(own)])
    assert f"{QUERIES} asks about corpus handbook and {own} about other" in err


@pytest.mark.parametrize(("extra", "named"), [
    (["--method", "bm25"], "--method: only with --agreement FILE (your own questions)"),
    (["--json", "--resamples", "500"], "--resamples, --json: only with --agreement FILE (your own questions)"),
])
def test_agreement_options_without_agreement_are_refused(capsys, extra, named):
    err = error_of(capsys, ["validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), *extra])
    assert named in err


def test_too_few_resamples_and_standard_output_twice_are_refused(tmp_path, capsys):
    base = ["validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), "--agreement", str(QUERIES)]
    refused = error_of(capsys, [*base, "--resamples", "10"])
    assert "--resamples=10 is invalid; allowed: an integer in [100, 20000]" in refused
    assert "-o -, --agreement: not together: both print on standard output (give -o FILE)" in \
        error_of(capsys, [*base, "-o", "-"])
