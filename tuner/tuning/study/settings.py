"""A study's settings: written once when the study is created, read back once per process.

The settings (a JSON mapping under the study's ``settings`` attribute, see :mod:`.records`)
define what the study's results mean: its space, embedder, scoring unit, weights, rates and
scales, the data it was created with (paths and content hashes), the held-out questions and
the fidelity rungs. :func:`build_settings` writes them for a new study; :class:`StudySettings`
reads them into types once, and the run, every worker, every trial, the report and the export
receive that one object instead of picking keys out of the mapping.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict
from functools import cached_property
from typing import Any

import numpy as np
import optuna

from ...data.corpus import Corpus
from ...data.evalset import EvaluationSet
from ...embedding.cache import EmbeddingCache
from ...embedding.config import EmbedderConfig, embedder_key, shared_embedder
from ...evaluation.fidelity import FULL, Fidelity
from ..scoring.calibration import stored_throughput
from ..scoring.measures import ResolvedRates, resolve_rates
from ..scoring.objective import LEGACY_PARETO, Constraints, Rates, Scales, Weights
from ..search.space import SearchSpace
from ..search.space_file import parse_search_space
from .lookup import settings_of
from .records import RESOLVED_RATES_KEY

#: ``fidelity: auto`` climbs :data:`AUTO_RUNGS` on corpora of at least this many characters
#: (below it a cold trial takes about a minute on two cores: pruning would save little).
AUTO_MIN_CHARS = 2_000_000
#: The rungs ``fidelity: auto`` uses: 5% of the distractors, then the best quarter at full
#: fidelity: the rung set with the least embedding work (0.29 of full fidelity at 20 MB,
#: extrapolated; the previous 0.1, 1 at a reduction of 3: 0.40) that passes the decision bar
#: (BENCHMARKS.md, "Decision bar (issue 21)"): over 2,000 simulated 60-trial studies of a
#: 1 MB chroma-dev corpus, the recommendation reached lies in the full-fidelity tie set in
#: 95.7-99.5% of orders (four seeds; bar 95%). Every three-rung set that saves more fails it.
AUTO_RUNGS = Fidelity(rungs=(0.05, 1.0), reduction=4)
#: Settings that define a study's results: a resumed run must agree on all of them.
COMPARED_SETTINGS = ("space", "embedder", "unit", "copies", "weights", "rates", "scales",
                     "corpus_sha256", "evaluation_set_sha256", "validation", "conversion", "fidelity",
                     "constraints", "pareto")


def comparable(key: str, value: Any) -> Any:
    """A stored setting as a resumed run compares it: weights and scales with every field (a
    study stored before a weight or scale existed has it at its default), no constraints and the
    legacy Pareto axes for a study stored before they existed."""
    if key == "weights" and isinstance(value, dict):
        return Weights(**value).as_dict()
    if key == "scales" and isinstance(value, dict):
        return asdict(Scales(**value))
    if key == "constraints":
        return value or {}
    if key == "pareto":
        return list(value or LEGACY_PARETO)
    return value


class StudySettings:
    """A study's stored settings, read into types once.

    ``stored`` is the mapping as the study keeps it (JSON); the properties read it.
    """

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored

    @classmethod
    def of(cls, study: optuna.Study) -> StudySettings:
        """The settings of a chunkwise study (a foreign study is refused)."""
        return cls(settings_of(study))

    # --- the data the study was created with ---------------------------------------------------
    @property
    def corpus(self) -> str:
        return self.stored["corpus"]

    @property
    def corpus_path(self) -> str:
        return self.stored["corpus_path"]

    @property
    def corpus_sha256(self) -> str:
        return self.stored["corpus_sha256"]

    @property
    def corpus_include(self) -> tuple[str, ...]:
        return tuple(self.stored.get("corpus_include") or ())

    @property
    def corpus_exclude(self) -> tuple[str, ...]:
        return tuple(self.stored.get("corpus_exclude") or ())

    @property
    def corpus_keep_links(self) -> bool:
        """Whether converted documents kept their links as ``[text](url)``."""
        return bool(self.stored.get("corpus_keep_links"))

    @property
    def converters(self) -> Any:
        """The converters the corpus's documents were converted with (None for text files)."""
        return (self.stored.get("conversion") or {}).get("converters")

    @property
    def queries_path(self) -> str:
        return self.stored["queries_path"]

    @property
    def queries(self) -> int:
        return self.stored["queries"]

    @property
    def evaluation_set_sha256(self) -> str:
        return self.stored["evaluation_set_sha256"]

    @property
    def repair_references(self) -> bool:
        return bool(self.stored.get("repair_references"))

    # --- what the results mean ---------------------------------------------------------------
    @cached_property
    def space(self) -> SearchSpace:
        return parse_search_space(self.stored["space"], self.stored.get("space_source", "<study>"))

    @cached_property
    def embedder(self) -> EmbedderConfig:
        """The embedder of every trial whose space does not choose one."""
        return EmbedderConfig.from_dict(self.stored["embedder"])

    @property
    def unit(self) -> str:
        return self.stored["unit"]

    @property
    def copies(self) -> str:
        return self.stored.get("copies", "any")

    @cached_property
    def weights(self) -> Weights:
        return Weights(**self.stored["weights"])

    @cached_property
    def scales(self) -> Scales:
        return Scales(**self.stored["scales"])

    @cached_property
    def constraints(self) -> Constraints:
        """Limits a recommended trial must meet (none for studies created before constraints existed)."""
        return Constraints.from_dict(self.stored.get("constraints") or {})

    @property
    def pareto(self) -> tuple[str, ...]:
        """The metrics of the study's Pareto front, its Optuna objectives (recall and IoU for
        studies created before they could be chosen)."""
        return tuple(self.stored.get("pareto") or LEGACY_PARETO)

    @cached_property
    def rates(self) -> Rates:
        return Rates(**self.stored["rates"])

    @cached_property
    def resolved_rates(self) -> dict[str, ResolvedRates]:
        """Each embedder's rates, resolved once per study (see :func:`resolve_study_rates`)."""
        return {key: ResolvedRates(**value) for key, value in self.stored.get(RESOLVED_RATES_KEY, {}).items()}

    def rates_for(self, embedder: EmbedderConfig) -> ResolvedRates | None:
        return self.resolved_rates.get(embedder_key(embedder))

    @cached_property
    def fidelity(self) -> Fidelity:
        """The rungs trials climb (full fidelity for studies made before rungs existed)."""
        return Fidelity.from_dict(self.stored["fidelity"]) if self.stored.get("fidelity") else FULL

    # --- the held-out check ----------------------------------------------------------------
    @cached_property
    def held_out(self) -> frozenset[str]:
        """The ids of the questions held out of the search."""
        return frozenset((self.stored.get("validation") or {}).get("queries", []))

    def search_mask(self, queries: int) -> np.ndarray:
        """Which of the study's questions (evaluation-set order) the search sees: all but the held-out ones
        (all of them when the stored split does not describe ``queries`` questions)."""
        ids = (self.stored.get("validation") or {}).get("ids")
        if not ids or len(ids) != queries:
            return np.ones(queries, dtype=bool)
        return np.array([qid not in self.held_out for qid in ids], dtype=bool)


def resolve_fidelity(choice: str | Fidelity, corpus: Corpus) -> Fidelity:
    """The rungs a corpus's study climbs: ``auto`` is :data:`AUTO_RUNGS` on a corpus of
    :data:`AUTO_MIN_CHARS` characters or more, full fidelity below."""
    if isinstance(choice, Fidelity):
        return choice
    if choice == "auto" and sum(len(doc.text) for doc in corpus) >= AUTO_MIN_CHARS:
        return AUTO_RUNGS
    return FULL


def validation_split(evalset: EvaluationSet, fraction: float, seed: int = 0) -> dict[str, Any]:
    """The held-out part of a corpus's questions: ``round(fraction * n)`` queries (at least one
    when ``fraction > 0`` and there are two or more), chosen by a hash of ``seed`` and each
    query's id, so the split is the same in every run, worker and machine, and does not depend
    on the order of the file.

    >>> from tuner.data.evalset import EvaluationSet, Query
    >>> queries = EvaluationSet(tuple(Query(f"q{i}", "?", "c", ()) for i in range(8)))
    >>> validation_split(queries, 0.25)["queries"]  # of q0..q7
    ['q4', 'q6']
    """
    ids = [q.id for q in evalset]
    count = round(fraction * len(ids))
    if fraction > 0 and count == 0 and len(ids) >= 2:
        count = 1
    count = min(count, len(ids) - 1) if ids else 0
    ranked = sorted(ids, key=lambda qid: hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest())
    held_out = set(ranked[:count])
    return {"fraction": fraction, "seed": seed, "queries": [qid for qid in ids if qid in held_out], "ids": ids}


def resolve_study_rates(settings: StudySettings, rates: Rates, embedders: list[EmbedderConfig],
                        cache: EmbeddingCache | None,
                        echo: Callable[[str], None] | None = None) -> dict[str, Any] | None:
    """The stored settings with every embedder's rates resolved, or None when nothing was missing.

    Resolving a local model's rates measures its throughput once per machine (it loads the
    model: ``echo`` says so when it does, since it takes a while).
    """
    resolved = dict(settings.stored.get(RESOLVED_RATES_KEY, {}))
    missing = [e for e in embedders if embedder_key(e) not in resolved]
    if not missing:
        return None
    for config in missing:
        embedder = shared_embedder(config, cache)
        if (echo is not None and config.local and rates.embed_tokens_per_s is None
                and stored_throughput(embedder) is None):
            echo(f"loading {config.model} and measuring its throughput (once per machine)...")
        resolved[embedder_key(config)] = asdict(resolve_rates(rates, embedder, config.provider))
    return {**settings.stored, RESOLVED_RATES_KEY: resolved}
