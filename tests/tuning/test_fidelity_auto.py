"""``fidelity: auto`` resumes at the rungs a study was created with, even when the rungs auto
picks have changed since (issue 21 changed them); explicit other rungs are refused."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tuner.embedding.config import EmbedderConfig
from tuner.tuning import StudyError, StudySpec, run_study_spec
from tuner.tuning.scoring.objective import Rates
from tuner.tuning.study import settings
from tuner.tuning.study.records import SETTINGS_ATTR
from tuner.tuning.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[2]
QUIET = dict(progress=False, echo=lambda _: None)


def _spec(tmp_path: Path, fidelity: str) -> StudySpec:
    # No trial runs and the throughput is given: the model is never loaded.
    return StudySpec(name="f", corpora=(("handbook", str(ROOT / "examples" / "handbook")),),
                     queries=str(ROOT / "examples" / "handbook-queries.jsonl"),
                     space=str(ROOT / "search_spaces" / "quick.yaml"), embedder=EmbedderConfig(precision="fp32"),
                     rates=Rates(embed_tokens_per_s=1000.0), storage=f"sqlite:///{tmp_path}/f.db", trials=0,
                     cache=str(tmp_path / "cache.sqlite3"), fidelity=fidelity)


def _stored_fidelity(tmp_path: Path) -> dict:
    storage = make_storage(f"sqlite:///{tmp_path}/f.db", heartbeat_interval=None)
    return optuna.load_study(study_name="f/handbook", storage=storage).user_attrs[SETTINGS_ATTR]["fidelity"]


def test_auto_resumes_at_the_study_rungs(tmp_path, monkeypatch):
    run_study_spec(_spec(tmp_path, "auto"), **QUIET)  # the handbook is far below 2 MB: full fidelity
    assert _stored_fidelity(tmp_path)["rungs"] == [1.0]
    monkeypatch.setattr(settings, "AUTO_MIN_CHARS", 0)  # now auto would climb AUTO_RUNGS
    run_study_spec(_spec(tmp_path, "auto"), **QUIET)
    assert _stored_fidelity(tmp_path)["rungs"] == [1.0]
    with pytest.raises(StudyError) as error:
        run_study_spec(_spec(tmp_path, "0.05,1"), **QUIET)
    assert "fidelity.rungs: [1.0] -> [0.05, 1.0]" in str(error.value)
