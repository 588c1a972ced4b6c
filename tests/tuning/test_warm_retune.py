"""Documents that change (issue 62, item 3): tuning a corpus edited since its study was made opens
the corpus's next version, a study of its own that names the one it continues, evaluates the
earlier version's best configurations first and says what changed; the earlier study is left as it
was, and the run's commands find the newest version. Real ``chunkwise`` processes, the OpenAI stub
embedder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
ADDED = ("\n## Upgrading\n\nBefore an upgrade, stop the scheduler, back up the state directory and read the "
         "release notes; the upgrade keeps the run history and the captured logs.\n")


def chunkwise(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT),
           "OPENAI_API_KEY": "test-key"}
    env.pop("CHUNKWISE_LANGUAGE", None)
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, timeout=600,
                          env=env, cwd=tmp_path)


def tune_command(tmp_path: Path, run: str, stub) -> tuple[Path, str, list[str]]:
    """A copy of the bundled example's documents, its storage, and the command that tunes it."""
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLE, docs)
    storage = f"sqlite:///{tmp_path}/{run}.db"
    return docs, storage, ["tune", "--name", run, "--corpus", f"handbook={docs}", "--queries", str(QUERIES),
                           "--space", "quick", "--embedder", "openai:stub-embed", "--base-url", stub.base_url,
                           "--storage", storage, "--cache", str(tmp_path / "embeddings.sqlite3")]


def test_a_changed_corpus_is_re_tuned_warm_as_its_next_version(tmp_path, openai_server):
    docs, storage, common = tune_command(tmp_path, "w", openai_server)
    first = chunkwise(tmp_path, *common, "--n-trials", "12")
    assert first.returncode == 0, first.stderr
    before = optuna.load_study(study_name="w/handbook", storage=storage)
    trials_before = len(before.trials)

    # The documents change: a section added at the end of one page (no excerpt moves), a page added.
    with (docs / "installation.md").open("a", encoding="utf-8") as handle:
        handle.write(ADDED)
    (docs / "upgrading.md").write_text("# Upgrading\n\nRead the release notes first." + ADDED, encoding="utf-8")

    dry = chunkwise(tmp_path, *common, "--n-trials", "6", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert ("handbook: the documents or questions changed since study w/handbook: the run makes w/handbook@2"
            in dry.stdout + dry.stderr)
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["w/handbook"]  # the dry run made nothing

    second = chunkwise(tmp_path, *common, "--n-trials", "6")
    assert second.returncode == 0, second.stderr
    said = second.stdout + second.stderr
    assert "handbook: the documents or questions changed since study w/handbook: w/handbook@2 evaluates" in said
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage))
    assert names == ["w/handbook", "w/handbook@2"]
    newer = optuna.load_study(study_name="w/handbook@2", storage=storage)
    settings = newer.user_attrs["settings"]
    assert settings["previous"] == "w/handbook"
    assert settings["corpus_sha256"] != before.user_attrs["settings"]["corpus_sha256"]  # the new version, recorded
    # The earlier version's best configurations were evaluated first, on the new documents.
    warm = [t for t in newer.trials if "warm_from" in t.user_attrs]
    assert warm and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in warm)  # none left WAITING
    earlier = {t.number: t for t in before.trials}
    evaluated = [t for t in warm if t.state == TrialState.COMPLETE]
    assert evaluated and all(t.params == earlier[t.user_attrs["warm_from"]].params for t in evaluated)
    sampled = [t for t in newer.trials if "warm_from" not in t.user_attrs and "baseline" not in t.user_attrs]
    assert all(t.number > min(w.number for w in warm) for t in sampled)  # queued before anything is sampled
    # The summary says what changed, with the recall then and now.
    assert "note: the documents or questions changed since w/handbook: this study re-tuned them warm" in said
    assert "the recommendation is kept" in said or "the recommendation is replaced" in said
    assert " then" in said and " now" in said
    # The earlier study is left as it was.
    assert len(optuna.load_study(study_name="w/handbook", storage=storage).trials) == trials_before

    # The run's commands find the newest version.
    out = tmp_path / "best.json"
    exported = chunkwise(tmp_path, "export", "--storage", storage, "--study", "w", "--corpus", "handbook", "-o",
                         str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text())["source"]["study"] == "w/handbook@2"
    # A third version names the second as the one it continues.
    (docs / "alerts.md").write_text((docs / "alerts.md").read_text(encoding="utf-8") + ADDED, encoding="utf-8")
    third = chunkwise(tmp_path, *common, "--n-trials", "2")
    assert third.returncode == 0, third.stderr
    assert optuna.load_study(study_name="w/handbook@3", storage=storage).user_attrs["settings"]["previous"] \
        == "w/handbook@2"


def test_a_changed_corpus_with_other_settings_is_still_refused(tmp_path, openai_server):
    docs, storage, common = tune_command(tmp_path, "r", openai_server)
    common = [*common, "--n-trials", "2"]
    assert chunkwise(tmp_path, *common).returncode == 0
    with (docs / "installation.md").open("a", encoding="utf-8") as handle:
        handle.write(ADDED)
    refused = chunkwise(tmp_path, *common, "--weights", "recall=2")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "chunkwise: error: study 'r/handbook' was created with different settings" in refused.stderr
    assert "weights.recall: 1.0 -> 2.0" in refused.stderr
    assert sorted(s.study_name for s in optuna.get_all_study_summaries(storage)) == ["r/handbook"]
