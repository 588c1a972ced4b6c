"""Does the configuration in production still hold? A check for CI (``chunkwise check``).

The documents and the questions change; the configuration a study chose stays in production. The
check scores, on the documents and questions as they are now, the configuration in production (an
export, :mod:`.export`), the baselines every study runs first
(:data:`~tuner.tuning.search.baselines.BASELINES`: with production's embedder and scoring; given
a study, those it evaluated, as its space holds them) and, given its study, the study's
recommendation and the configurations tied with its best
(:func:`~tuner.tuning.outcome.selection.recommend_for_study`). That is a handful of evaluations,
each embedding through the cache only the chunks it has not embedded before: minutes, not a study.

Production fails when the best of the others (the highest weighted score) is significantly better
than it by more than ``margin`` (score units): the paired sign-flip test behind every
"significant" (:mod:`tuner.tuning.scoring.significance`), on each question's score of the best
minus production's less the margin, at a level shared among the configurations compared
(Bonferroni: the best is the largest of them, so each is tested at ``(1 - confidence) / m``). With
no margin this is :func:`~tuner.tuning.scoring.comparisons.compare`'s test, which gives the
intervals reported beside it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.corpus import Corpus
from ..data.evalset import EvaluationSet
from ..embedding import Embedder, EmbeddingCache
from ..embedding.config import embedder_key
from ..errors import option
from ..evaluation.config import EvaluationConfig
from ..evaluation.evaluator import evaluate
from ..retrieval.config import RetrievalConfig
from ..schema import invalid
from ..tuning import (
    BASELINES,
    SCORE_RESOLUTION,
    Candidate,
    Comparison,
    Rates,
    ResolvedRates,
    Scales,
    SignFlipTest,
    Weights,
    compare,
    flips_for,
    paired_tests,
    resolve_rates,
)
from ..tuning.scoring import CONFIDENCE, trial_attributes

#: What each configuration checked is (its ``role``).
ROLES = ("production", "built-in baseline", "study baseline", "study recommendation", "study tie set")


@dataclass(frozen=True)
class Entry:
    """A configuration to score: its name, its role(s) and, from a study, its trial."""

    name: str
    roles: tuple[str, ...]
    config: EvaluationConfig
    trial: int | None = None

    @property
    def key(self) -> str:
        return json.dumps(self.config.to_dict(), sort_keys=True)


@dataclass(frozen=True)
class StudyEntries:
    """What a study adds to a check: its recommendation and tie set, the baselines it evaluated (as
    its space holds them), and how it scores."""

    study: str
    entries: tuple[Entry, ...]  # the recommendation first, then the tie set
    baselines: tuple[Entry, ...]
    weights: Weights
    scales: Scales
    rates: Rates
    resolved: dict[str, ResolvedRates] = field(default_factory=dict)  # per embedder key, as the study priced them
    tied: int = 0  # the tie set's size in the study (entries may hold fewer: ``tied`` limit)


@dataclass(frozen=True)
class Scored:
    """A configuration scored on every question of the check."""

    entry: Entry
    candidate: Candidate
    score: float
    means: dict[str, float]
    seconds: float
    cache_hit_rate: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.entry.name, "roles": list(self.entry.roles), "trial": self.entry.trial,
                "config": self.entry.config.to_dict(), "score": self.score, **self.means,
                "latency_ms": self.candidate.latency_s * 1000,
                "cost_usd_per_1k_queries": self.candidate.cost_usd_per_1k,
                "chunks": self.candidate.chunks, "seconds": round(self.seconds, 3),
                "cache_hit_rate": self.cache_hit_rate}


@dataclass(frozen=True)
class CheckResult:
    """The check's verdict: production, the others, the best of them and the test between the two."""

    production: Scored
    others: tuple[Scored, ...]
    weights: Weights
    scales: Scales
    margin: float
    confidence: float
    questions: int
    best: Scored | None = None
    comparison: Comparison | None = None  # the best minus production (intervals at the corrected level)
    test: SignFlipTest | None = None  # the best minus production less the margin
    study: str | None = None
    #: Names of configurations that are production itself (the recommendation, a baseline).
    same_as_production: tuple[str, ...] = ()

    @property
    def compared(self) -> int:
        return len(self.others)

    @property
    def level(self) -> float:
        """The level each comparison is tested at: ``1 - confidence`` shared among those compared."""
        return (1 - self.confidence) / max(1, self.compared)

    @property
    def questions_needed(self) -> int:
        """The fewest questions on which the best and production must differ for a loss to be
        significant at :attr:`level` (all of them the same way: ``2 / 2**m <= level``)."""
        return math.ceil(math.log2(2 / self.level) - 1e-12)

    @property
    def worse(self) -> bool:
        """Production is significantly worse than the best by more than the margin."""
        return (self.test is not None and self.test.p_value <= self.level
                and self.test.mean > SCORE_RESOLUTION)

    def verdict(self) -> str:
        """One line: whether production holds, and against what."""
        margin = f" by more than the margin ({self.margin:g})" if self.margin else ""
        if self.best is None:
            return "production holds: nothing else to compare it with"
        if self.worse:
            return (f"FAIL: production is significantly worse{margin} than {self.best.entry.name} "
                    f"(the best of {self.compared} configuration{'s' * (self.compared != 1)} compared)")
        if self.best.score <= self.production.score:
            return (f"production holds: none of the {self.compared} other configurations scores higher on the "
                    "documents as they are now")
        return (f"production holds: {self.best.entry.name} scores higher, but not significantly{margin} "
                f"(the best of {self.compared} compared)")

    def test_line(self) -> str:
        """How the best and production differ, and the test that decided (with its correction)."""
        if self.best is None or self.comparison is None or self.test is None:
            return ""
        corrected = f"{(1 - self.level) * 100:.4g}%"
        margin = f" less the margin {self.margin:g}" if self.margin else ""
        return (f"{self.best.entry.name} minus production: {self.comparison.describe()}; decided by the paired "
                f"sign-flip test of each question's score difference{margin}: p = {self.test.p_value:.2g} against "
                f"{self.level:.3g}, i.e. at {corrected}, the {self.confidence:.0%} level Bonferroni-corrected for the "
                f"{self.compared} configuration{'s' * (self.compared != 1)} compared")

    def lines(self) -> list[str]:
        """The short report a terminal shows: production, the best, the test, the verdict."""
        out = [f"production: {_standing(self.production, self.questions)}"]
        if self.best is not None:
            out.append(f"best of the {self.compared} others: {_standing(self.best, self.questions)}")
            out.append(self.test_line())
        if self.best is not None and self.questions < self.questions_needed:
            out.append(f"note: with {self.questions} questions no loss can be significant at this level (at least "
                       f"{self.questions_needed} must differ): this check cannot fail; write more questions")
        for name in self.same_as_production:
            out.append(f"note: {name} is the production configuration itself")
        out.append(self.verdict())
        return out

    def to_dict(self) -> dict[str, Any]:
        every = sorted([self.production, *self.others], key=lambda s: -s.score)
        comparison = None
        if self.comparison is not None and self.test is not None and self.best is not None:
            comparison = {"best": self.best.entry.name, **dataclasses.asdict(self.comparison),
                          "margin_test": dataclasses.asdict(self.test), "level": self.level,
                          "correction": f"Bonferroni over the {self.compared} configurations compared"}
        return {"verdict": "worse" if self.worse else "holds", "worse": self.worse, "summary": self.verdict(),
                "margin": self.margin, "confidence": self.confidence, "level": self.level,
                "compared": self.compared, "questions": self.questions, "questions_needed": self.questions_needed,
                "study": self.study,
                "weights": self.weights.used(), "scales": self.scales.as_dict(),
                "production": self.production.to_dict(),
                "best": None if self.best is None else self.best.to_dict(), "comparison": comparison,
                "same_as_production": list(self.same_as_production),
                "configurations": [s.to_dict() for s in every]}

    def markdown(self) -> str:
        """A summary a CI system can show: the verdict, the test, every configuration by score."""
        heading = "❌ production is significantly worse" if self.worse else "✅ production holds"
        lines = [f"## chunkwise check: {heading}", "", self.verdict(), ""]
        if self.best is not None:
            lines += [self.test_line(), ""]
            notes = [line[len("note: "):] for line in self.lines() if line.startswith("note: ")]
            lines += [f"{note[:1].upper()}{note[1:]}." for note in notes]
            lines += [""] if lines[-1] != "" else []
        lines += [f"Scored on {self.questions} questions, weights "
                  f"{', '.join(f'{k}={v:g}' for k, v in self.weights.used().items())}"
                  + (f", study `{self.study}`" if self.study else "") + ".", "",
                  "| configuration | role | score | recall | IoU | context tokens | seconds |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for scored in sorted([self.production, *self.others], key=lambda s: -s.score):
            name = scored.entry.name.replace("|", "\\|")
            name = f"**{name}**" if scored is self.production else name
            lines.append(f"| {name} | {', '.join(scored.entry.roles)} | {scored.score:.4f} | "
                         f"{scored.means.get('recall', 0):.1%} | {scored.means.get('iou', 0):.2%} | "
                         f"{scored.means.get('context_tokens', float('nan')):,.0f} | {scored.seconds:.1f} |")
        return "\n".join(lines) + "\n"


def _standing(scored: Scored, questions: int) -> str:
    return (f"{scored.entry.name}: score {scored.score:.4f}, recall {scored.means.get('recall', 0):.1%} on "
            f"{questions} questions")


def describe_config(config: EvaluationConfig) -> str:
    """``token(size=64, overlap=0), k=1, bm25``: the chunker, k and the retrieval."""
    params = ", ".join(f"{key}={value!r}" for key, value in config.chunker.params.items() if key != "separators")
    return f"{config.chunker.name}({params}), k={config.retrieval.k}, {config.retrieval.describe()}"


def check_margin(margin: float) -> float:
    if not np.isfinite(margin) or margin < 0:
        raise invalid(option("margin"), margin, "a number of score units >= 0 (0: any significant loss fails)")
    return float(margin)


def baseline_entries(production: EvaluationConfig) -> list[Entry]:
    """The baselines as production would run them: its embedder, scoring unit, scope and index;
    each baseline's chunker, retrieval method and k."""
    entries = []
    for baseline in BASELINES:
        retrieval = RetrievalConfig(k=baseline.k, scope=production.retrieval.scope, index=production.retrieval.index,
                                    method=baseline.method)
        config = EvaluationConfig.from_dict({**production.to_dict(), "retrieval": retrieval.to_dict(),
                                             "chunker": {"name": baseline.chunker, "params": dict(baseline.params)}})
        entries.append(Entry(baseline.name, ("built-in baseline",), config))
    return entries


def study_entries(run: str, storage: str | None, corpus: str | None, tied: int | None) -> StudyEntries:
    """A study's recommendation and the configurations tied with its best (the ``tied`` highest
    scoring of them; None: all), with the weights, scales and rates it scores by.

    Raises:
        StudyError, StorageError: no such study or storage.
        InvalidParameterError: the study has no complete trial to recommend.
    """
    from ..tuning import baseline_records
    from ..tuning.outcome import recommend_for_study
    from ..tuning.study import StudySettings, existing_run_storage, load_run_study, storage_errors

    study_storage = existing_run_storage(run, storage)
    with storage_errors(study_storage.display_url):
        study = load_run_study(study_storage, run, corpus, where=study_storage.display_url)
        settings = StudySettings.of(study)
        verdict = recommend_for_study(study, settings)
        evaluated = baseline_records(study)
    if verdict is None:
        raise invalid("study", study.study_name, "a study with a complete trial that has per-question scores to "
                      "recommend (this one has none yet): run it first, or leave the study out of the check")
    chosen = verdict.recommended
    numbers = list(verdict.recommendation.tied)
    kept = numbers if tied is None else numbers[:tied]
    entries = [Entry(f"trial {chosen.number}", ("study recommendation",), _trial_config(chosen), chosen.number)]
    for number in kept:
        record = verdict.records[number]
        if number != chosen.number:
            entries.append(Entry(f"trial {number}", ("study tie set",), _trial_config(record), number))
        else:
            entries[0] = dataclasses.replace(entries[0], roles=("study recommendation", "study tie set"))
    baselines = tuple(Entry(f"{record.baseline} (trial {record.number})", ("study baseline",), _trial_config(record),
                            record.number) for record in sorted(evaluated, key=lambda r: r.number)
                      if record.config is not None)
    return StudyEntries(study.study_name, tuple(entries), baselines, settings.weights, settings.scales, settings.rates,
                        dict(settings.resolved_rates), len(numbers))


def _trial_config(record: Any) -> EvaluationConfig:
    if record.config is None:
        raise invalid("config", record.config, "the configuration it evaluated (it recorded none)",
                      owner=f"trial {record.number}")
    return EvaluationConfig.from_dict(record.config, where=f"trial {record.number}")


def merge_entries(entries: Sequence[Entry]) -> tuple[list[Entry], tuple[str, ...]]:
    """The entries with one per configuration (the first keeps its name, the roles joined);
    the first entry is production, and the names of the others that are production itself."""
    merged: dict[str, Entry] = {}
    same: list[str] = []
    for entry in entries:
        key = entry.key
        if key in merged:
            held = merged[key]
            roles = tuple(dict.fromkeys(held.roles + entry.roles))
            if "production" in held.roles and (entry.trial is None or entry.trial != held.trial):
                same.append(entry.name)  # a trial named once, whatever its roles
            merged[key] = dataclasses.replace(held, roles=roles, trial=held.trial if held.trial is not None
                                              else entry.trial)
        else:
            merged[key] = entry
    return list(merged.values()), tuple(dict.fromkeys(same))


def run_check(corpora: Sequence[Corpus], evalset: EvaluationSet, production: EvaluationConfig, *,
              study: StudyEntries | None = None, weights: Weights | None = None, margin: float = 0.0,
              confidence: float = CONFIDENCE, cache: EmbeddingCache | bool | None = True,
              on_scored: Callable[[int, int, Scored], None] | None = None) -> CheckResult:
    """Score production, the baselines and the study's recommendation and tie set on ``evalset``,
    and test production against the best of the others (see the module docstring)."""
    margin = check_margin(margin)
    weights = weights or (study.weights if study is not None else Weights())
    scales = study.scales if study is not None else Scales()
    baselines = study.baselines if study is not None and study.baselines else baseline_entries(production)
    entries = [Entry(describe_config(production), ("production",), production), *baselines,
               *(study.entries if study is not None else ())]
    entries, same = merge_entries(entries)
    if cache is True:
        cache = EmbeddingCache()
    elif cache is False:
        cache = None
    embedders: dict[str, Embedder] = {}
    rates: dict[str, ResolvedRates] = {}
    scored: list[Scored] = []
    for number, entry in enumerate(entries, start=1):
        embedder_key = json.dumps(entry.config.embedder.to_dict(speed=False), sort_keys=True)
        if embedder_key not in embedders:
            embedders[embedder_key] = entry.config.embedder.build(cache)
            rates[embedder_key] = _rates(entry.config, embedders[embedder_key], study)
        started = time.perf_counter()
        result = evaluate(list(corpora), evalset, entry.config, embedder=embedders[embedder_key], cache=cache)
        attrs = trial_attributes(result, rates[embedder_key], weights, scales)
        per_query = result.scores.at(entry.config.retrieval.k)
        candidate = Candidate(number, per_query["recall"], per_query["iou"], attrs["latency_ms"] / 1000,
                              attrs["cost_usd_per_1k_queries"], int(attrs["chunks"]),
                              {name: values for name, values in per_query.items() if name not in ("recall", "iou")})
        means = {name: float(np.mean(values)) for name, values in per_query.items()}
        found = Scored(entry, candidate, candidate.score(weights, scales), means, time.perf_counter() - started,
                       float(result.embedding.get("cache_hit_rate", 0.0)))
        scored.append(found)
        if on_scored is not None:
            on_scored(number, len(entries), found)
    first, others = scored[0], tuple(scored[1:])
    questions = len(evalset)
    outcome = CheckResult(first, others, weights, scales, margin, confidence, questions,
                          study=None if study is None else study.study, same_as_production=same)
    if not others:
        return outcome
    best = max(others, key=lambda s: (s.score, -s.candidate.number))
    level = outcome.level
    comparison = compare(best.candidate, first.candidate, weights, scales, confidence=1 - level)
    measured, modelled = best.candidate.difference_parts(first.candidate, weights, scales)
    test = paired_tests((measured - margin)[:, None], modelled, flips=flips_for(level))[0]
    return dataclasses.replace(outcome, best=best, comparison=comparison, test=test)


def _rates(config: EvaluationConfig, embedder: Embedder, study: StudyEntries | None) -> ResolvedRates:
    """How a configuration's latency and cost are priced: as its study priced its embedder, else
    the study's rates (or the defaults) resolved for it."""
    if study is not None and (resolved := study.resolved.get(embedder_key(config.embedder))) is not None:
        return resolved
    return resolve_rates(study.rates if study is not None else Rates(), embedder, config.embedder.provider)
