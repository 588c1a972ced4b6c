"""Resume that says what it does (issue 27): the line a stopped run ends with counts the trials
the same command adds; interrupted trials are counted apart from failed ones in the summary and
the report; the report's HTML plots share one plotly.js."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.embedding.config import EmbedderConfig
from tuner.reporting.report import write_report
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.outcome.summary import format_outcomes, summarize
from tuner.tuning.run.ledger import Ledger
from tuner.tuning.run.runner import resume_advice
from tuner.tuning.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


def test_the_resume_line_counts_what_the_same_command_adds(tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = StudySpec(name="r", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES),
                     space=str(ROOT / "search_spaces" / "quick.yaml"),
                     embedder=EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url),
                     storage=f"sqlite:///{tmp_path}/r.db", trials=3, cache=str(tmp_path / "cache.sqlite3"))
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    assert outcome.summary.complete == 3
    # A run of 7 trials stopped (Ctrl-C) with 3 finished: its target was 7, 4 were left.
    storage = make_storage(spec.storage, heartbeat_interval=None)
    study_id = storage.get_study_id_from_name("r/handbook")
    Ledger(storage).join(study_id, "stopped-run", 4, grace_period=2)
    # The same command adds its 7 trials to the 3 finished: target 10, not the 7 of the stopped run.
    stopped = dataclasses.replace(spec, trials=7)
    assert resume_advice(stopped) == ("Run the same command to resume: it adds 7 more trial(s) to the 3 finished "
                                      "(target 10; this run had 4 left, which trials=4 runs).")
    # Two trials interrupted by Ctrl-C are not failures, in the summary and in the report.
    study = optuna.load_study(study_name="r/handbook", storage=storage)
    for _ in range(2):
        study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"lost": "interrupted"}))
    summary = summarize(study)
    assert (summary.failed, summary.interrupted) == (0, 2)
    text = format_outcomes([dataclasses.replace(outcome, summary=summary)])
    assert "(study r/handbook: 3 complete, 0 failed, 2 interrupted by Ctrl-C or SIGTERM)" in text
    out = tmp_path / "report"
    report = write_report("r", out, storage=spec.storage, top=1, bootstrap=100).read_text(encoding="utf-8")
    assert "Trials: 3 complete, 0 failed, 2 interrupted by Ctrl-C or SIGTERM." in report
    # One plotly.js beside the plots, which every HTML plot loads instead of embedding its own.
    bundle = (out / "plotly.min.js").stat().st_size
    assert bundle > 1_000_000
    pages = sorted(out.glob("*.html"))
    assert len(pages) == 3
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert 'src="plotly.min.js"' in html and len(html) < bundle / 10
