"""What a study recommends, decided once (:func:`recommend_for_study`) for the summary, the
report, the dashboard and ``export``.

The recommendation is the configuration with the highest score on the search questions, with
the configurations not significantly worse than it (the tie gate of :mod:`.comparisons`) named
as its tie set; it must then beat the best baseline on the held-out questions, or the best
baseline itself is recommended.

Below :data:`~.comparisons.MIN_QUESTIONS` distinct search questions, or distinct held-out ones
when some are held out, no paired comparison can be significant (see
:func:`~.comparisons.minimum_questions`): the tie gate and the held-out check claim nothing, and
the best baseline is recommended with "too few questions to tell" as the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import optuna

from ...data.lexical import LexicalOverlap
from ..core.objective import Scales, Weights
from ..core.records import BASELINE_ATTR, TrialRecord, recommendable, records
from ..scoring.baseline_check import BaselineCheck, Optimism, best_baseline, check_baselines, optimism
from ..scoring.comparisons import (
    CONFIDENCE,
    MIN_QUESTIONS,
    TOP_CANDIDATES,
    Comparison,
    Recommendation,
    candidate,
    compare,
    recommend,
)
from ..scoring.crossval import SearchGain, search_gain
from ..search.baselines import DEFAULT_BASELINE
from ..study.settings import StudySettings


@dataclass(frozen=True)
class Standing:
    """A configuration on all the questions (search and held-out together)."""

    recall: float
    iou: float
    context_tokens: float  # NaN for a trial recorded before the metric existed
    questions: int

    @classmethod
    def of(cls, record: TrialRecord) -> Standing:
        per_query = record.per_query()
        if per_query is None:  # recorded before per-question scores: its means are all there is
            return cls(record.recall, record.iou, record.context_tokens, 0)
        tokens = per_query.get("context_tokens")
        return cls(float(per_query["recall"].mean()), float(per_query["iou"].mean()),
                   record.context_tokens if tokens is None else float(tokens.mean()), len(per_query["recall"]))

    def describe(self) -> str:
        """``recall 84.0%, 412 context tokens per query``."""
        tokens = "" if math.isnan(self.context_tokens) else f", {self.context_tokens:,.0f} context tokens per query"
        return f"recall {self.recall:.1%}{tokens}"


#: A ratio below this is not called a gain (noise in a modelled latency, a rounding of tokens).
_GAIN_RATIO = 1.05


def gained(chosen: TrialRecord, other: TrialRecord) -> list[str]:
    """What ``chosen`` offers over ``other`` besides recall, on all questions: fewer context
    tokens, a higher IoU, a lower cost or latency (``["4.2x fewer context tokens"]``); empty
    when nothing."""
    mine, theirs = Standing.of(chosen), Standing.of(other)
    found = []
    # (the larger value, the smaller one, the gain's wording): a gain is larger / smaller.
    for larger, smaller, text in (
            (theirs.context_tokens, mine.context_tokens, "fewer context tokens"),
            (mine.iou, theirs.iou, "higher IoU"),
            (other.cost_usd_per_1k_queries, chosen.cost_usd_per_1k_queries, "lower cost per query"),
            (other.latency_ms, chosen.latency_ms, "lower latency")):
        if math.isnan(larger) or math.isnan(smaller) or larger <= 0:
            continue
        if smaller <= 0:
            if text.startswith("lower"):  # "no cost per query": a free configuration against a paid one
                found.append(f"no {text.split(' ', 1)[1]}")
        elif larger / smaller >= _GAIN_RATIO:
            found.append(f"{larger / smaller:.1f}x {text}")
    return found


@dataclass(frozen=True)
class StudyRecommendation:
    """The one recommendation of a study: the tie gate's choice, checked against the best
    baseline, with the records it speaks of. The summary, the dashboard note, the report and
    ``export`` all take :attr:`recommended` and :meth:`statement` from here."""

    recommendation: Recommendation
    records: dict[int, TrialRecord]
    baselines: BaselineCheck | None = None
    default_gain: Comparison | None = None  # the recommended against the token 800/400 default
    default_trial: int | None = None
    optimism: Optimism | None = None
    held_out: bool = False
    #: The study's constraints, described (empty: none): only configurations meeting them compete.
    constraints: str = ""
    #: Why nothing is claimed (empty: enough questions): too few distinct questions to tell.
    too_few: str = ""
    #: How lexical the study's questions are (None for a study made before it was measured).
    lexical: LexicalOverlap | None = None
    #: What the search adds over the baselines out of sample (None: no baseline, too few questions).
    gain: SearchGain | None = None

    @property
    def recommended(self) -> TrialRecord:
        """What chunkwise recommends: the tie gate's choice, or the best baseline when that choice
        is not significantly better than it."""
        if self.baselines is not None and self.baselines.fallback is not None:
            return self.records[self.baselines.fallback]
        return self.records[self.recommendation.recommended]

    @property
    def tuned(self) -> TrialRecord:
        """The tie gate's choice among all trials (before the baseline check)."""
        return self.records[self.recommendation.recommended]

    @property
    def best(self) -> TrialRecord:
        return self.records[self.recommendation.best]

    @property
    def fell_back(self) -> bool:
        return self.baselines is not None and self.baselines.fell_back

    def _baseline(self, number: int) -> str:
        """``markdown 256/0 hybrid, trial 8``; with what the study's space made of it when the
        space could not hold it as such (``token 800/400 dense as this space holds it: token
        512/256 k=5, trial 0``)."""
        record = self.records[number]
        name = record.baseline or "a baseline"
        chunking = name.rsplit(" ", 1)[0]  # "token 800/400" of "token 800/400 dense"
        label = record.label()
        if label.startswith(chunking) and record.k == 5:
            return f"{name}, trial {number}"
        return f"{name} as this space holds it: {label}, trial {number}"

    def why(self) -> str:
        """Why this configuration: the tie set, the constraints, the baseline check."""
        check = self.baselines
        if self.too_few:
            if check is None:
                return (f"the highest score, but {self.too_few}; and no baseline was evaluated to fall back on: "
                        "treat it as a guess")
            return f"the best baseline: {self.too_few}"
        questions = "held-out questions" if self.held_out else "questions (none held out)"
        tie = self.recommendation.why()
        if self.constraints:
            tie += f", among the configurations meeting the constraints ({self.constraints})"
        if check is not None and check.fell_back:
            return (f"the best baseline: the search chose trial {check.tuned} ({self.tuned.label()}), {tie}; but "
                    f"trial {check.tuned} is not significantly better than this baseline on the {questions}: "
                    f"{check.comparison.describe()}")
        if check is None:
            return f"{tie}; no baseline was evaluated to check it against"
        if check.comparison is None:
            return f"{tie}; it is itself a baseline ({self.recommended.baseline})"
        return (f"{tie}; significantly better than the best baseline ({self._baseline(check.best_baseline)}) on "
                f"the {questions}: {check.comparison.describe()}")

    def _against(self, what: str, number: int) -> str:
        """The recommendation against trial ``number`` on all questions, and the trade when it
        has less recall."""
        chosen, other = self.recommended, self.records[number]
        if other.number == chosen.number:
            return f"{what} ({self._baseline(number)}): it is the recommendation itself"
        mine, theirs = Standing.of(chosen), Standing.of(other)
        difference = (mine.recall - theirs.recall) * 100
        text = f"{what} ({self._baseline(number)}): {theirs.describe()}; "
        if round(difference, 1) > 0:
            return text + f"{difference:.1f} points more recall"
        gains = gained(chosen, other)
        if round(difference, 1) == 0:
            return text + "the same recall" + (f", with {', '.join(gains)}" if gains else "")
        return text + f"{-difference:.1f} points less recall" + (
            f" for {', '.join(gains)}" if gains else
            ", for nothing in context tokens, IoU, cost or latency (its weighted score on the search questions "
            "chose it)")

    def statement(self) -> list[str]:
        """The recommendation, stated once: which configuration and why; then its comparison with
        the token 800/400 default on the held-out questions (out of sample: the headline); then its
        recall and context tokens on all questions against the default and the best baseline, each
        labelled in-sample; then what the search adds cross-validated, and warnings. Every summary
        prints these lines."""
        chosen = self.recommended
        mine = Standing.of(chosen)
        out = [f"recommended: {chosen.describe()}   [trial {chosen.number}]", f"why: {self.why()}"]
        if not self.too_few and self.default_gain is not None and self.default_trial != chosen.number:
            scope = (f"out of sample, on the {self.default_gain.questions} held-out questions" if self.held_out
                     else "in-sample (none held out)")
            out.append(f"{scope}, against the token 800/400 default: {self.default_gain.describe()}")
        chose = "the search questions among them chose it" if self.held_out else "they chose it"
        scope = f"all {mine.questions} questions" if mine.questions else "the search questions"
        out.append(f"on {scope} (in-sample: {chose}): {mine.describe()}")
        if self.default_trial is not None:
            out.append(self._against("in-sample, against the token 800/400 default", self.default_trial))
        else:
            out.append("the token 800/400 default is not in this study's space (or not evaluated yet): no "
                       "comparison with it")
        check = self.baselines
        if check is not None and check.best_baseline not in (self.default_trial, chosen.number):
            out.append(self._against("in-sample, against the best baseline", check.best_baseline))
        if self.too_few:  # no interval, no separation, no optimism: nothing is claimed from so few questions
            return out + self._questions()
        if separation := self.recommendation.separation():
            out.append(separation)
        if self.gain is not None:
            out += self.gain.describe("the token 800/400 default")
        if self.optimism is not None and self.optimism.beyond_interval:
            out.append(f"warning: the optimism gap ({self.optimism.gap:+.4f}: search score minus held-out score) "
                       f"exceeds the held-out score's {CONFIDENCE:.0%} interval (±{self.optimism.half_width:.4f}); "
                       "the search questions flatter this configuration: more questions would help")
        return out + self._questions()

    def _questions(self) -> list[str]:
        """How lexical the questions are, with its warning (nothing for a study made before)."""
        return [] if self.lexical is None else self.lexical.describe().splitlines()


def baseline_records(study: optuna.Study) -> list[TrialRecord]:
    """The evaluated baselines of ``study`` (a baseline pruned as a duplicate is the trial that
    evaluated its configuration first)."""
    everything = {r.number: r for r in records(study)}
    found: dict[int, TrialRecord] = {}
    for record in everything.values():
        if record.baseline is None:
            continue
        if record.duplicate_of is not None and record.duplicate_of in everything:
            holder = everything[record.duplicate_of]
            record = TrialRecord.from_attrs(holder.number, {**holder.attrs, BASELINE_ATTR: record.baseline},
                                            holder.state, holder.stored_per_query)
        if record.evaluated:
            found.setdefault(record.number, record)
    return list(found.values())


def recommend_for_study(study: optuna.Study, settings: StudySettings | None = None) -> StudyRecommendation | None:
    """THE recommendation of a study: the tie gate (the highest score and its tie set) on
    the study's best configurations that meet its constraints, on its search questions, then
    its choice checked against the best baseline (a fallback must meet the constraints too) and
    the token 800/400 default. The summary, the dashboard note, the report and ``export`` all
    call this, with no option of their own, so they name the same trial."""
    seed = 0
    settings = settings if settings is not None else StudySettings.of(study)
    meeting = recommendable(study)
    ranked = sorted(meeting, key=lambda r: (-r.score, r.number))[:TOP_CANDIDATES]
    records_by_number, candidates = {}, []
    search = None
    for record in ranked:
        stored = record.stored_per_query
        if stored is None:
            continue
        search = settings.search_mask(int(stored["queries"]))
        found = candidate(record, search)
        if found is not None:
            records_by_number[record.number] = record
            candidates.append(found)
    if not candidates:
        return None
    verdict = recommend(candidates, settings.weights, settings.scales, seed=seed)
    measured = [b for b in baseline_records(study) if b.stored_per_query is not None
                and int(b.stored_per_query["queries"]) == len(search)]
    for record in measured:
        records_by_number.setdefault(record.number, record)
    # A baseline over the study's constraints is compared with, never fallen back on.
    baselines = [b for b in measured if b.feasible(settings.constraints)]
    weights, scales = settings.weights, settings.scales
    held_out = bool((~search).any())
    too_few = too_few_questions(*settings.distinct_questions(search))
    if too_few:
        check = best_baseline_instead(records_by_number[verdict.best], baselines, search, weights, scales)
    else:
        check = check_baselines(records_by_number[verdict.recommended], baselines, search, weights, scales, seed=seed)
    chosen = records_by_number[check.fallback if check is not None and check.fell_back else verdict.recommended]
    questions = ~search if held_out else slice(None)
    default = next((b for b in measured if b.baseline == DEFAULT_BASELINE), None)
    gain = None
    if default is not None:
        gain = compare(candidate(chosen), candidate(default), weights, scales, questions, seed=seed)
    return StudyRecommendation(verdict, records_by_number, check, gain, None if default is None else default.number,
                               optimism(chosen, search, weights, scales, seed=seed), held_out,
                               settings.constraints.describe(), too_few,
                               LexicalOverlap.from_dict((settings.question_profile or {}).get("lexical")),
                               None if too_few else study_search_gain(settings, meeting, baselines, default,
                                                                      seed=seed))


def study_search_gain(settings: StudySettings, meeting: list[TrialRecord], baselines: list[TrialRecord],
                      default: TrialRecord | None, *, seed: int = 0) -> SearchGain | None:
    """:func:`~.crossval.search_gain` of a study: its choice among ``meeting`` (every configuration
    that meets its constraints), over its best baseline and the token 800/400 default,
    cross-validated over all its questions (search and held-out alike: each fold is chosen on the
    others)."""
    candidates = [c for r in meeting if (c := candidate(r)) is not None]
    if not candidates:
        return None
    size = len(candidates[0].recall)
    candidates = [c for c in candidates if len(c.recall) == size]
    reference = [c for r in baselines if (c := candidate(r)) is not None and len(c.recall) == size]
    base = None if default is None else candidate(default)
    return search_gain(candidates, reference, base if base is not None and len(base.recall) == size else None,
                       settings.weights, settings.scales, seed=seed)


def too_few_questions(search: int, held_out: int | None) -> str:
    """Why nothing can be claimed from ``search`` distinct search questions and ``held_out``
    distinct held-out ones (None: none held out), or an empty string when there are enough
    (:data:`~.comparisons.MIN_QUESTIONS` of each).

    >>> too_few_questions(22, 8)
    ''
    >>> too_few_questions(2, None)  # doctest: +NORMALIZE_WHITESPACE
    'too few questions to tell: 2 distinct search questions (none held out); no paired comparison of fewer than 6
    can be significant at 95%, even one won on every question (exact sign test), so no configuration is called
    better than another'
    """
    short = search < MIN_QUESTIONS or (held_out is not None and held_out < MIN_QUESTIONS)
    if not short:
        return ""
    counted = f"{search} distinct search question{'s' if search != 1 else ''}"
    counted += (" (none held out)" if held_out is None else
                f" and {held_out} distinct held-out question{'s' if held_out != 1 else ''}")
    return (f"too few questions to tell: {counted}; no paired comparison of fewer than {MIN_QUESTIONS} can be "
            f"significant at {CONFIDENCE:.0%}, even one won on every question (exact sign test), so no configuration "
            "is called better than another")


def best_baseline_instead(best: TrialRecord, baselines: list[TrialRecord], search: np.ndarray, weights: Weights,
                          scales: Scales) -> BaselineCheck | None:
    """With too few questions to tell: the best baseline (highest score on the search questions)
    recommended in place of the tie gate's choice, compared with nothing; None without an
    evaluated baseline (the highest score stands, claimed as nothing)."""
    found = best_baseline(baselines, search, weights, scales)
    if found is None:
        return None
    record, _ = found
    return BaselineCheck(best.number, record.number, record.baseline or f"trial {record.number}", None,
                         bool((~search).any()), record.number)
