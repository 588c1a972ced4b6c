"""``fidelity: auto`` resumes at the rungs a study was created with, even when the rungs auto
picks have changed since (issue 21 changed them); explicit other rungs are refused."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tuner.embedding.config import EmbedderConfig
from tuner.tuning import StudyError, StudySpec, run_study_spec
from tuner.tuning.core.objective import Rates
from tuner.tuning.core.records import SETTINGS_ATTR
from tuner.tuning.study import settings
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


def _corpus(chars: int):
    from tuner.data.corpus import Corpus, Document

    return Corpus("c", [Document("a.md", "x" * (chars // 2)), Document("b.md", "y" * (chars - chars // 2))])


def test_auto_screens_dense_trials_with_the_late_proxy_from_half_a_million_characters():
    from tuner.evaluation.fidelity import Fidelity

    # Below 500,000 characters: full fidelity, no proxy (the bundled example and every chroma-dev corpus).
    assert settings.resolve_fidelity("auto", _corpus(499_999)) == Fidelity(rungs=(1.0,))
    # From 500,000: the late proxy, its best 3 confirmed at full fidelity; no rungs below 2 MB.
    assert settings.resolve_fidelity("auto", _corpus(500_000)) == Fidelity(rungs=(1.0,), proxy="late", confirm=3)
    # From 2,000,000: the proxy, and rungs 0.05, 1 (reduction 4) for an embedder the proxy cannot read.
    assert settings.resolve_fidelity("auto", _corpus(2_000_000)) == Fidelity(rungs=(0.05, 1.0), reduction=4,
                                                                             proxy="late", confirm=3)
    # A hosted embedder gives no token embeddings: no proxy, whatever the size.
    hosted = EmbedderConfig(provider="openai", model="text-embedding-3-small")
    assert settings.resolve_fidelity("auto", _corpus(500_000), hosted) == Fidelity(rungs=(1.0,))
    assert settings.resolve_fidelity("auto", _corpus(2_000_000), hosted) == Fidelity(rungs=(0.05, 1.0), reduction=4)
    # A space that fixes k: its confirmations could not choose k, and at a fixed k the proxy failed the bar.
    from tuner.tuning.search.space_file import parse_search_space

    fixed = parse_search_space({"k": 5, "chunkers": {"token": {"size": 64}}})
    varied = parse_search_space({"k": {"type": "int", "low": 1, "high": 10}, "chunkers": {"token": {"size": 64}}})
    assert settings.resolve_fidelity("auto", _corpus(500_000), space=fixed) == Fidelity(rungs=(1.0,))
    assert settings.resolve_fidelity("auto", _corpus(500_000), space=varied) == Fidelity(rungs=(1.0,), proxy="late",
                                                                                         confirm=3)
    # `full` and an explicit fidelity are what they say, whatever the size.
    assert settings.resolve_fidelity("full", _corpus(3_000_000)) == Fidelity(rungs=(1.0,))
    assert settings.resolve_fidelity(Fidelity(rungs=(0.1, 1.0)), _corpus(3_000_000)) == Fidelity(rungs=(0.1, 1.0))


def test_a_study_created_before_the_proxy_default_resumes_without_it(tmp_path, monkeypatch):
    run_study_spec(_spec(tmp_path, "auto"), **QUIET)  # the handbook: full fidelity, no proxy
    assert "proxy" not in _stored_fidelity(tmp_path)
    monkeypatch.setattr(settings, "AUTO_PROXY_MIN_CHARS", 0)  # now auto would screen with the proxy
    run_study_spec(_spec(tmp_path, "auto"), **QUIET)
    assert "proxy" not in _stored_fidelity(tmp_path)
