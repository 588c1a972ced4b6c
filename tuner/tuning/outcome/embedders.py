"""What a stronger embedding model buys, where a study searched more than one.

A search space can list embedders (``embedders:``); the study then holds dense and hybrid trials
of each. :func:`compare_embedders` takes each embedder's best such trial (highest weighted score
among the full-fidelity trials meeting the study's constraints), its recall on the search
questions (in-sample: those questions chose it) and on the held-out ones, and what the embedder
costs: the seconds its model took per corpus pass, measured over the study's own trials (model
seconds over the tokens the model embedded, times the corpus's tokens). BM25 trials embed
nothing and are left out. The summary prints :meth:`EmbedderComparison.describe`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna

from ...retrieval.config import RetrievalConfig
from ..core.records import MODEL_TOKENS_ATTR, TrialRecord, recommendable, records
from ..study.settings import StudySettings


@dataclass(frozen=True)
class EmbedderResult:
    """One embedder's best dense or hybrid trial and its measured cost."""

    embedder: str  # provider:model
    trials: int  # its evaluated dense or hybrid trials
    best: TrialRecord
    #: Seconds its model took per pass over the corpus on this machine (None: nothing measured).
    seconds_per_pass: float | None

    def describe(self) -> str:
        held_out = self.best.validation_recall
        recall = f"recall {self.best.recall:.1%}" + ("" if math.isnan(held_out) else f" (held-out {held_out:.1%})")
        cost = "" if self.seconds_per_pass is None else f"; a corpus pass {_duration(self.seconds_per_pass)}"
        return (f"{self.embedder}: {recall}, score {self.best.score:.4f} [trial {self.best.number}, "
                f"{self.trials} trial(s)]{cost}")


@dataclass(frozen=True)
class EmbedderComparison:
    """Each searched embedder's best trial, the fastest first."""

    results: tuple[EmbedderResult, ...]

    def describe(self) -> list[str]:
        """What the summary prints: one line per embedder, then what each slower one buys over
        the fastest, in recall points (held-out where the study holds questions out) against its
        time per corpus pass."""
        out = ["embedders searched (each one's best dense or hybrid trial; recall on the search questions is "
               "in-sample, held-out beside it):"]
        out += [f"  {result.describe()}" for result in self.results]
        base = self.results[0]
        for other in self.results[1:]:
            held_out = not math.isnan(other.best.validation_recall) and not math.isnan(base.best.validation_recall)
            gain = (other.best.validation_recall - base.best.validation_recall if held_out
                    else other.best.recall - base.best.recall)
            ratio = ("" if not other.seconds_per_pass or not base.seconds_per_pass
                     else f" for {other.seconds_per_pass / base.seconds_per_pass:.1f}x the time per corpus pass")
            where = "on the held-out questions" if held_out else "on the search questions (in-sample)"
            out.append(f"  {other.embedder} against {base.embedder}: {gain * 100:+.1f} points of recall {where}"
                       f"{ratio}")
        return out


def compare_embedders(study: optuna.Study) -> EmbedderComparison | None:
    """Each embedder's best dense or hybrid trial in ``study`` and its time per corpus pass; None
    unless the study evaluated dense or hybrid trials of two embedders or more."""
    best: dict[str, TrialRecord] = {}
    counts: dict[str, int] = {}
    for record in recommendable(study):
        name = _embedder_of(record)
        if name is None:
            continue
        counts[name] = counts.get(name, 0) + 1
        if name not in best or (record.score, -record.number) > (best[name].score, -best[name].number):
            best[name] = record
    if len(best) < 2:
        return None
    corpus_tokens = StudySettings.stored_field(study, "corpus_tokens")
    seconds: dict[str, float] = {}
    tokens: dict[str, int] = {}
    for record in records(study):
        name = _embedder_of(record)
        embedded = int(record.attrs.get(MODEL_TOKENS_ATTR) or 0)
        spent = record.attrs.get("model_seconds")
        if name in best and embedded > 0 and isinstance(spent, (int, float)) and spent > 0:
            seconds[name] = seconds.get(name, 0.0) + float(spent)
            tokens[name] = tokens.get(name, 0) + embedded

    def per_pass(name: str) -> float | None:
        if not corpus_tokens or not tokens.get(name):
            return None
        return seconds[name] / tokens[name] * corpus_tokens

    results = [EmbedderResult(name, counts[name], best[name], per_pass(name)) for name in best]
    results.sort(key=lambda r: (math.inf if r.seconds_per_pass is None else r.seconds_per_pass, r.embedder))
    return EmbedderComparison(tuple(results))


def _embedder_of(record: TrialRecord) -> str | None:
    """``provider:model`` of a trial that embeds (dense or hybrid); None for BM25 or an unknown one."""
    config = record.config or {}
    retrieval, embedder = config.get("retrieval") or {}, config.get("embedder") or {}
    if not RetrievalConfig.from_dict(retrieval).embeds or not embedder.get("model"):
        return None
    return f"{embedder.get('provider', 'sentence-transformers')}:{embedder['model']}"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
