"""What a run left in a study, as the summary prints it: the trials by what happened to them
(:class:`StudySummary`), the embedding work by phase, and per corpus the outcome with its
recommendation (:class:`CorpusOutcome`, :func:`format_outcomes`)."""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass, field

import optuna
from optuna.trial import TrialState

from ...errors import option
from ...evaluation.evaluator import TRUNCATION_WARNING
from ...evaluation.fidelity import PROXIES
from ..core.records import (
    BASELINE_ATTR,
    CLIMB_BUDGET_ATTR,
    CONFIRMS_ATTR,
    INNER_POINTS_ATTR,
    INTERRUPTED,
    LOST_ATTR,
    MODEL_PASSES_ATTR,
    MODEL_TOKENS_ATTR,
    PASS_TOKENS_ATTR,
    STOPPED_AT_ATTR,
    TrialRecord,
    records,
)
from ..study.settings import StudySettings
from .embedders import EmbedderComparison
from .selection import StudyRecommendation


def format_duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"`` or ``"3.5 h"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


#: A time budget that ends a run with at least this much of it left (and 5% of it) is said to have ended early.
EARLY_END_S = 30.0


@dataclass
class CorpusOutcome:
    """What a run left in one corpus's study."""

    corpus: str
    study: str
    summary: StudySummary
    best: TrialRecord | None
    target: int
    added: int
    reclaimed: list[int] = field(default_factory=list)
    lost_workers: int = 0
    exhausted: bool = False
    recommendation: StudyRecommendation | None = None
    #: The time budget ended the run before the study reached its target.
    budget_ended: bool = False
    #: Seconds of the time budget still left when it ended the run: no trial the sampler proposed fitted in them.
    budget_left: float = 0.0
    timeout: float | None = None
    #: Why the futility checkpoint stopped the run early (empty: it did not).
    futile: str = ""
    #: Each searched embedder's best trial and cost (None: the study searched one embedder).
    embedders: EmbedderComparison | None = None
    #: What changed since the corpus's earlier version (:func:`~.versions.version_change`; empty: none).
    changed: str = ""

    @property
    def recommended(self) -> TrialRecord | None:
        """What the study recommends (:func:`~tuner.tuning.outcome.selection.recommend_for_study`)."""
        return None if self.recommendation is None else self.recommendation.recommended

    @property
    def complete(self) -> int:
        return self.summary.complete

    @property
    def failed(self) -> int:
        return self.summary.failed


def format_outcomes(outcomes: list[CorpusOutcome], details: bool = False) -> str:
    """What a run left, per corpus: what the study holds and its recommended configuration; what
    a user acts on first (at most about a dozen lines a corpus), and with ``details`` the reasoning
    behind it (the embedding work, the tie set, the cross-validated figures, the held-out and
    search scores, lexical overlap, notes)."""
    lines = ["", "configuration per corpus:"]
    for item in outcomes:
        summary = item.summary
        lines.append(f"  {item.corpus}  (study {item.study}: {summary.describe()})")
        if details and (work := summary.describe_work()):
            lines.append(f"    embedding work: {work}")
        lines += [f"    note: {note}" for note in _run_notes(item)]
        best = item.best
        if best is None:
            lines.append("    no complete trial yet")
            continue
        if item.recommendation is None:
            lines.append(f"    best: {best.describe()}   [trial {best.number}]")
            lines.append(f"    {best.headline()}")
            chosen = best
        else:
            chosen = item.recommended
            said = item.recommendation.statement() + (item.recommendation.details() if details else [])
            for line in said:
                lines += [f"    {part}" for part in textwrap.wrap(line, 100, subsequent_indent="  ")]
        if not details:
            continue
        if item.recommendation is not None:
            lines.append(f"    search questions: {chosen.headline()}")
        if held_out := chosen.validation_line():
            lines.append(f"    {held_out}")
        if (truncated := chosen.metric("truncated_chunks")) > TRUNCATION_WARNING:
            lines.append(f"    note: {truncated:.0%} of its chunks exceed the embedder's input window "
                         f"({chosen.metric('unread_text'):.0%} of their text is never embedded)")
        if item.embedders is not None:
            lines += [f"    {line}" for line in item.embedders.describe()]
        if chosen.number != best.number:
            lines.append(f"    highest score: {best.describe()}   [trial {best.number}, score {best.score:.4f}; "
                         f"export it with {option('best', True)}]")
    if not details and any(item.best is not None for item in outcomes):
        lines += ["", f"(the reasoning behind each recommendation: the same command with {option('details', True)}, "
                      "or chunkwise report)"]
    return "\n".join(lines)


def _run_notes(item: CorpusOutcome) -> list[str]:
    """What happened to the run itself: lost workers, trials still running, the budget's end, the
    checkpoint's stop, an exhausted space."""
    summary = item.summary
    notes = [item.changed] if item.changed else []
    if item.reclaimed:
        notes.append(f"{len(item.reclaimed)} trial(s) of lost workers failed and retried "
                     f"({', '.join(map(str, item.reclaimed[:10]))})")
    if item.lost_workers:
        notes.append(f"{item.lost_workers} worker process(es) lost and replaced")
    if summary.running:
        notes.append(f"{summary.running} trial(s) still running in other processes")
    evaluated = summary.complete + summary.stopped_early
    if item.budget_ended:
        # A budget that ends the run well before its end does so because nothing proposed fitted: say so,
        # or "the 12 min budget ended the run" after 5 minutes reads as a fault.
        early = (f", {format_duration(item.budget_left)} before its end: no trial the sampler proposed fitted in "
                 "what was left" if item.budget_left >= max(EARLY_END_S, 0.05 * (item.timeout or 0)) else "")
        notes.append(f"the time budget ({format_duration(item.timeout or 0)}) ended the run after {item.added} "
                     f"trial(s){early}; run the same command to continue the study")
    if item.futile:
        notes.append(f"{item.futile}; the rest of the budget was not spent (give {option('full_budget', True)} to "
                     "spend it all; running the same command continues the study)")
    if item.exhausted and evaluated < item.target:
        notes.append(f"the search space looks exhausted: {evaluated} distinct configurations evaluated "
                     f"of the {item.target} asked for")
    return notes


@dataclass(frozen=True)
class StudySummary:
    """How many trials a study holds, by what happened to them."""

    complete: int
    #: Failed trials, interrupted ones left out: the configuration failed, or its worker was lost.
    failed: int
    lost: int  # among ``failed``
    pruned: int
    duplicates: int
    running: int
    waiting: int
    #: Pruned by successive halving at a low-fidelity rung (among ``pruned``).
    stopped_early: int = 0
    #: Stopped by Ctrl-C or SIGTERM (FAIL in Optuna, but counted apart from ``failed``).
    interrupted: int = 0
    #: ``stopped_early`` by rung (``late``: the proxy; ``0.05``: a share of the distractors).
    stopped_at: dict[str, int] = field(default_factory=dict)
    #: Among ``stopped_early``: promoted, but left for the time budget.
    not_climbed: int = 0
    #: Among ``complete``: a proxy's configurations confirmed at full fidelity.
    confirmed: int = 0
    #: Query-time points (a ``k``, a fusion) the trials scored in their inner loops (:mod:`..scoring.inner`).
    points: int = 0
    #: Embedding work in corpus passes as the model does it (its own tokens it ran over the corpus's) by
    #: phase (:data:`PHASES`), and the wall time of each phase's trials, summed; empty for a study that did
    #: not record them (see :func:`embedding_work`).
    passes: dict[str, float] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def describe_work(self) -> str:
        """``2.31 corpus passes: baselines 1.00 (2 min of trials), proxy pass 1.00, proxy trials 0.00
        (40 s), confirmations 0.31 (1 min)`` (empty without :attr:`passes`)."""
        if not self.passes:
            return ""
        parts = [f"{phase} {passes:.2f}" + (f" ({format_duration(self.phase_seconds[phase])} of trials)"
                                            if phase in self.phase_seconds else "")
                 for phase, passes in self.passes.items()]
        return f"{sum(self.passes.values()):.2f} corpus passes: " + ", ".join(parts)

    def describe(self) -> str:
        """``12 complete, 3 stopped at low fidelity (2 at the late proxy, 1 at 0.05), 1 failed (1 lost
        with its worker), 2 interrupted``."""
        confirmed = f" ({self.confirmed} of them the proxy's best, confirmed)" if self.confirmed else ""
        parts = [f"{self.complete} complete{confirmed}"]
        if self.stopped_early:
            rungs = ", ".join(f"{count} at {'the ' + rung + ' proxy' if not _is_number(rung) else rung}"
                              for rung, count in self.stopped_at.items())
            if self.not_climbed:
                rungs += f"; {self.not_climbed} of them promoted, but left there for the time budget"
            parts.append(f"{self.stopped_early} stopped at low fidelity" + (f" ({rungs})" if rungs else ""))
        parts.append(f"{self.failed} failed" + (f" ({self.lost} lost with their worker)" if self.lost else ""))
        if self.interrupted:
            parts.append(f"{self.interrupted} interrupted by Ctrl-C or SIGTERM")
        inner = f"; {self.points:,} query-time points scored in their inner loops" if self.points else ""
        return ", ".join(parts) + inner


def summarize(study: optuna.Study) -> StudySummary:
    """Count a study's trials (``lost``: failed because their worker disappeared; ``interrupted``:
    stopped by Ctrl-C or SIGTERM, counted apart from ``failed``)."""
    all_records = records(study)

    def count(state: TrialState) -> int:
        return sum(r.state == state for r in all_records)

    return StudySummary(
        complete=sum(r.evaluated for r in all_records),
        failed=sum(r.state == TrialState.FAIL and r.attrs.get(LOST_ATTR) != INTERRUPTED for r in all_records),
        lost=sum(r.state == TrialState.FAIL and r.lost and r.attrs.get(LOST_ATTR) != INTERRUPTED
                 for r in all_records),
        pruned=count(TrialState.PRUNED),
        duplicates=sum(r.duplicate_of is not None for r in all_records),
        running=count(TrialState.RUNNING),
        waiting=count(TrialState.WAITING),
        stopped_early=sum(r.state == TrialState.PRUNED and STOPPED_AT_ATTR in r.attrs for r in all_records),
        interrupted=sum(r.state == TrialState.FAIL and r.attrs.get(LOST_ATTR) == INTERRUPTED for r in all_records),
        stopped_at=dict(sorted(Counter(f"{r.attrs[STOPPED_AT_ATTR]:g}" if _is_number(r.attrs[STOPPED_AT_ATTR])
                                       else str(r.attrs[STOPPED_AT_ATTR]) for r in all_records
                                       if r.state == TrialState.PRUNED and STOPPED_AT_ATTR in r.attrs).items())),
        not_climbed=sum(r.state == TrialState.PRUNED and CLIMB_BUDGET_ATTR in r.attrs for r in all_records),
        confirmed=sum(r.evaluated and CONFIRMS_ATTR in r.attrs for r in all_records),
        points=sum(len(r.attrs.get(INNER_POINTS_ATTR) or ()) for r in all_records
                   if r.evaluated or STOPPED_AT_ATTR in r.attrs),
        **embedding_work(study),
    )


#: The phases of a study's embedding work, in the order a run goes through them: the baselines, the
#: proxy's pass over the documents, the trials the proxy scored, their confirmations at full fidelity, and
#: the other sampled trials (full fidelity, or rungs).
PHASES = ("baselines", "proxy pass", "proxy trials", "confirmations", "trials")


def trial_phase(attrs: dict) -> str:
    """The phase (:data:`PHASES`) a trial's embedding belongs to, by what it recorded."""
    if BASELINE_ATTR in attrs:
        return "baselines"
    if CONFIRMS_ATTR in attrs:
        return "confirmations"
    if attrs.get(STOPPED_AT_ATTR) in PROXIES:
        return "proxy trials"
    return "trials"


def embedding_work(study: optuna.Study) -> dict[str, dict[str, float]]:
    """``passes`` and ``phase_seconds`` of :class:`StudySummary`: the study's embedding work in corpus passes
    by phase, as the model does it (``model_passes``: its own tokens, each text up to its window, the
    proxy pass's overlapping windows; failed and interrupted trials' work included), a count no load on
    the machine moves; and beside it the wall time each phase's trials took, summed. A study whose trials
    recorded only cl100k tokens (``model_tokens``, before chunkwise counted the model's own) is counted in
    those, over the corpus's. Empty when no trial recorded its work."""
    corpus_tokens = StudySettings.stored_field(study, "corpus_tokens")
    tokens = dict.fromkeys(PHASES, 0.0)
    seconds = dict.fromkeys(PHASES, 0.0)
    counted = set()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)):
        attrs = trial.user_attrs
        if MODEL_PASSES_ATTR in attrs:
            done, passed = (float(v) for v in attrs[MODEL_PASSES_ATTR])
        elif MODEL_TOKENS_ATTR in attrs and corpus_tokens:
            done = int(attrs[MODEL_TOKENS_ATTR]) / corpus_tokens
            passed = int(attrs.get(PASS_TOKENS_ATTR) or 0) / corpus_tokens
        else:
            continue
        phase = trial_phase(attrs)
        counted.add(phase)
        tokens[phase] += done
        if passed:
            tokens["proxy pass"] += passed
            counted.add("proxy pass")
        if trial.datetime_start is not None and trial.datetime_complete is not None:
            seconds[phase] += (trial.datetime_complete - trial.datetime_start).total_seconds()
    if not counted:
        return {}
    if "proxy trials" in counted:
        counted.add("proxy pass")  # 0.00 when the documents' token embeddings were cached before the study
    return {"passes": {phase: tokens[phase] for phase in PHASES if phase in counted},
            "phase_seconds": {phase: seconds[phase] for phase in PHASES if phase in counted and phase != "proxy pass"}}


def _is_number(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True
