"""What a study recommends, decided once (:func:`recommend_for_study`) for the summary, the
report, the dashboard and ``export``.

One rule decides, on the strongest out-of-sample evidence the questions allow (issue 60):

1. the *search's choice* is the configuration with the highest score on all the study's
   questions, the configurations not significantly worse than it (the tie gate of
   :mod:`~..scoring.comparisons`) named as its tie set;
2. the *best baseline* is the baseline with the highest score on the same questions;
3. :func:`~..scoring.decision.decide`: the cross-validated gain of that way of choosing over the
   best baseline (:mod:`~..scoring.crossval`: every question, each fold chosen on the others, the
   corrected resampled t) decides between them: the search's choice when its out-of-fold gain is
   above 0, else the best baseline.

With fewer than :data:`~..scoring.decision.DECISION_QUESTIONS` distinct questions in all the
decision claims nothing (:func:`~..scoring.decision.too_few_questions`), and the best baseline is
recommended with "too few questions to tell" as the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna

from ...data.lexical import LexicalOverlap
from ..core.records import BASELINE_ATTR, TrialRecord, recommendable, records
from ..scoring.comparisons import (
    CONFIDENCE,
    TOP_CANDIDATES,
    Recommendation,
    candidate,
    ranked,
    recommend,
)
from ..scoring.crossval import Gain, SearchGain, search_gain
from ..scoring.decision import Decision, decide, too_few_questions
from ..scoring.optimism import Optimism, optimism
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
    """The one recommendation of a study (module docstring), with the records it speaks of. The
    summary, the dashboard note, the report and ``export`` all take :attr:`recommended`,
    :meth:`statement` and :meth:`details` from here."""

    recommendation: Recommendation  # the tie gate on all the questions
    records: dict[int, TrialRecord]
    decision: Decision | None = None  # None: no baseline evaluated
    #: The recommended way of choosing against the token 800/400 default, cross-validated.
    default_gain: Gain | None = None
    default_trial: int | None = None
    optimism: Optimism | None = None
    held_out: bool = False
    #: The study's constraints, described (empty: none): only configurations meeting them compete.
    constraints: str = ""
    #: Why nothing is claimed (empty: enough questions): too few distinct questions to tell.
    too_few: str = ""
    #: How lexical the study's questions are (None for a study made before it was measured).
    lexical: LexicalOverlap | None = None

    @property
    def gain(self) -> SearchGain | None:
        """What the search adds over the baselines out of sample (None: no baseline, too few questions)."""
        return None if self.decision is None else self.decision.gain

    @property
    def recommended(self) -> TrialRecord:
        """What chunkwise recommends: the search's choice, or the best baseline (module docstring)."""
        if self.decision is not None:
            return self.records[self.decision.recommended]
        return self.records[self.recommendation.recommended]

    @property
    def tuned(self) -> TrialRecord:
        """The search's choice: the tie gate's, among all trials (before the decision)."""
        return self.records[self.recommendation.recommended]

    @property
    def best(self) -> TrialRecord:
        return self.records[self.recommendation.best]

    @property
    def fell_back(self) -> bool:
        return self.decision is not None and self.decision.fell_back

    @property
    def best_baseline(self) -> int | None:
        return None if self.decision is None else self.decision.best_baseline

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
        """Why this configuration, in one sentence: the decision and the figure that made it (the
        tie set and the rest are in :meth:`details`)."""
        decision = self.decision
        if self.too_few:
            if decision is None:
                return (f"the highest score, but {self.too_few}; and no baseline was evaluated to fall back on: "
                        "treat it as a guess")
            return f"the best baseline: {self.too_few}"
        constraints = f" among the configurations meeting the constraints ({self.constraints})" if self.constraints \
            else ""
        if decision is None:
            return f"the highest score{constraints}; no baseline was evaluated to check it against"
        if not decision.fell_back and self.recommended.baseline is not None:
            return f"the highest score{constraints}, and itself a baseline ({self.recommended.baseline})"
        over = None if decision.gain is None else decision.gain.over_best_baseline
        figure = "" if over is None else f" (cross-validated: {over.describe()})"
        if decision.fell_back:
            return (f"the best baseline: out of sample the search's choice (trial {decision.search_choice}, "
                    f"{self.tuned.label()}) does no better than it{figure}")
        return (f"the highest score{constraints}; out of sample it is ahead of the best baseline "
                f"({self._baseline(decision.best_baseline)}){figure}")

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
            ", for nothing in context tokens, IoU, cost or latency (its weighted score chose it)")

    def statement(self) -> list[str]:
        """What a user acts on, stated once: which configuration and why; its gain over the token
        800/400 default out of sample (cross-validated, with the interval); its recall and context
        tokens on all questions, labelled in-sample; whether the search added anything. Every
        summary prints these lines; :meth:`details` gives the reasoning behind them."""
        chosen = self.recommended
        mine = Standing.of(chosen)
        out = [f"recommended: {chosen.describe()}   [trial {chosen.number}]", f"why: {self.why()}"]
        if not self.too_few and self.default_gain is not None and self.default_trial != chosen.number:
            out.append(f"out of sample (cross-validated), against the token 800/400 default: "
                       f"{self.default_gain.describe()}")
        scope = f"all {mine.questions} questions" if mine.questions else "the search questions"
        out.append(f"on {scope} (in-sample: they chose it): {mine.describe()}")
        if self.default_trial is not None:
            out.append(self._against("in-sample, against the token 800/400 default", self.default_trial))
        else:
            out.append("the token 800/400 default is not in this study's space (or not evaluated yet): no "
                       "comparison with it")
        if not self.too_few and self.gain is not None and not self.fell_back:
            out.append(f"what the search adds: {self.gain.verdict()}")
        return out

    def details(self) -> list[str]:
        """The reasoning behind :meth:`statement`: the tie set, the cross-validated figures, the
        best baseline in-sample, the optimism of the search questions, how lexical the questions
        are (``tune --details`` and the report print them)."""
        out = []
        chosen = self.recommended
        decision = self.decision
        if decision is not None and decision.best_baseline not in (self.default_trial, chosen.number, None):
            out.append(self._against("in-sample, against the best baseline", decision.best_baseline))
        if self.too_few:  # no interval, no separation, no optimism: nothing is claimed from so few questions
            return out + self._questions()
        out.append(f"the search's choice (trial {self.recommendation.best}): {self.recommendation.why()}")
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
    """THE recommendation of a study (module docstring): the tie gate on all its questions over its
    best configurations that meet its constraints, then :func:`decide` between its choice and the
    best baseline (a fallback must meet the constraints too) by the cross-validated gain. The
    summary, the dashboard note, the report and ``export`` all call this, with no option of their
    own, so they name the same trial."""
    seed = 0
    settings = settings if settings is not None else StudySettings.of(study)
    weights, scales = settings.weights, settings.scales
    meeting = recommendable(study)
    scored = [(record, found) for record in meeting if (found := candidate(record)) is not None]
    if not scored:
        return None
    questions = len(scored[0][1].recall)
    scored = [(record, found) for record, found in scored if len(found.recall) == questions]
    records_by_number = {record.number: record for record, _ in scored}
    candidates = [found for _, found in scored]
    top = [candidates[i] for i in ranked(candidates, weights, scales)[:TOP_CANDIDATES]]
    verdict = recommend(top, weights, scales, seed=seed)
    measured = [b for b in baseline_records(study) if b.stored_per_query is not None
                and int(b.stored_per_query["queries"]) == questions]
    for record in measured:
        records_by_number.setdefault(record.number, record)
    # A baseline over the study's constraints is compared with, never fallen back on.
    feasible = [b for b in measured if b.feasible(settings.constraints)]
    search = settings.search_mask(questions)
    held_out = bool((~search).any())
    too_few = too_few_questions(*settings.distinct_questions(search))
    default = next((b for b in measured if b.baseline == DEFAULT_BASELINE), None)
    reference = [c for b in feasible if (c := candidate(b)) is not None]
    default_candidate = None if default is None else candidate(default)
    decision = default_gain = None
    if reference:
        gain = None if too_few else search_gain(candidates, reference, default_candidate, weights, scales, seed=seed)
        decision = decide(candidates, reference, gain, weights, scales)
        if too_few:  # the best baseline whatever the search found; nothing is claimed
            decision = Decision(decision.search_choice, decision.best_baseline, decision.best_baseline, None)
        if gain is not None and default_candidate is not None:
            # The recommended way of choosing against the default: the search's, or the baselines' own.
            chosen_way = gain if not decision.fell_back else search_gain(
                reference, reference, default_candidate, weights, scales, seed=seed)
            default_gain = None if chosen_way is None else chosen_way.over_default
    chosen = records_by_number[decision.recommended if decision is not None else verdict.recommended]
    return StudyRecommendation(verdict, records_by_number, decision, default_gain,
                               None if default is None else default.number,
                               optimism(chosen, search, weights, scales, seed=seed), held_out,
                               settings.constraints.describe(), too_few,
                               LexicalOverlap.from_dict((settings.question_profile or {}).get("lexical")))
