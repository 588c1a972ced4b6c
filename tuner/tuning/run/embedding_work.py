"""What a trial's models do: the embedding work a trial records (in corpus passes as the model does it), the
throughput the study's latest trials observed (which prices later trials), and waiting for another trial
that embeds the same chunks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ...embedding import Embedder
from ...embedding.config import EmbedderConfig, embedder_key
from ...retrieval.config import RetrievalConfig
from ...retrieval.methods import retrieval_method
from ..core.records import (
    BASELINE_ATTR,
    CONFIG_ATTR,
    CONFIRMS_ATTR,
    MODEL_PASSES_ATTR,
    MODEL_READ_ATTR,
    MODEL_TOKENS_ATTR,
    PASS_TOKENS_ATTR,
)
from ..scoring.calibration import RECALIBRATE_MIN_TOKENS

#: Seconds between two looks at a trial that embeds the chunks another one needs.
SAME_CHUNKS_POLL_S = 2.0


def chunks_key(config: dict[str, Any]) -> str | None:
    """What decides the texts a configuration embeds (its chunker, embedder and context header), or
    None when it embeds none: a hybrid configuration and its dense twin share one."""
    retrieval = config.get("retrieval", {})
    if not retrieval_method(retrieval.get("method", RetrievalConfig().method)).embeds:
        return None
    return json.dumps([config.get("chunker"), config.get("embedder"), retrieval.get("context", "none")],
                      sort_keys=True)


def embeds_at_full_fidelity(trial: FrozenTrial, single_rung: bool) -> bool:
    """Whether ``trial`` embeds its chunks at full fidelity at once (a baseline, a confirmation, or any
    trial of a study without rungs or proxy)."""
    return single_rung or bool({BASELINE_ATTR, CONFIRMS_ATTR} & set(trial.user_attrs))


def wait_for_the_same_chunks(study: optuna.Study, number: int, config: dict[str, Any], single_rung: bool,
                             limit_s: float, poll_s: float = SAME_CHUNKS_POLL_S,
                             on_wait: Callable[[int], None] | None = None) -> list[int]:
    """Wait while an earlier running trial embeds, at full fidelity, the very chunks that trial
    ``number`` (``config``) is about to embed (a hybrid baseline beside its dense twin): this one then finds
    their vectors in the cache instead of both workers embedding them. At most ``limit_s`` (a trial whose
    worker died stays RUNNING until reclaimed). Returns the trials waited for."""
    key, waited = chunks_key(config), []
    if key is None:
        return waited
    deadline = time.time() + limit_s
    while time.time() < deadline:
        embedding = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                     if t.number < number and CONFIG_ATTR in t.user_attrs and embeds_at_full_fidelity(t, single_rung)
                     and chunks_key(json.loads(t.user_attrs[CONFIG_ATTR])) == key]
        if not embedding:
            break
        if embedding[0] not in waited:
            waited.append(embedding[0])
            if on_wait is not None:
                on_wait(embedding[0])
        time.sleep(poll_s)
    return waited


class EmbeddingWork:
    """What a trial's models embed, from their counters (texts they computed, cache hits not): the trial's
    embedder, and its proxy's (the pass over the documents apart), since ``start``; ``corpus_own`` is the
    corpus in the model's own tokens (a corpus pass as the model does it)."""

    def __init__(self, embedder: Embedder, proxy: Embedder | None, corpus_own: int) -> None:
        self.embedder, self.proxy, self.corpus_own = embedder, proxy, corpus_own
        self.start = self._counters()

    def _counters(self) -> tuple[float, ...]:
        models = [self.embedder] if self.proxy is None else [self.embedder, self.proxy]
        total = [sum(getattr(m.stats, name) for m in models)
                 for name in ("computed_tokens", "own_tokens", "read_tokens", "model_seconds")]
        passed = [int(getattr(self.proxy, name, 0)) for name in ("pass_tokens", "pass_own_tokens")]
        return (*total, *passed)

    def attributes(self) -> dict[str, Any]:
        """``model_tokens``, ``proxy_pass_tokens``, ``model_passes`` and ``model_read`` (:mod:`..core.records`)."""
        embedded, own, read, seconds, passed, own_passed = (
            now - then for now, then in zip(self._counters(), self.start))
        corpus = max(1, self.corpus_own)
        return {MODEL_TOKENS_ATTR: int(embedded - passed), PASS_TOKENS_ATTR: int(passed),
                MODEL_PASSES_ATTR: [round((own - own_passed) / corpus, 6), round(own_passed / corpus, 6)],
                MODEL_READ_ATTR: [int(read), round(float(seconds), 4)]}


#: How long a worker prices with the throughput it read from the study before reading it again.
OBSERVED_FOR_S = 10.0
#: The latest trials :func:`observed_throughput` reads at most.
OBSERVED_TRIALS = 50


def observed_throughput(study: optuna.Study, config: EmbedderConfig) -> float | None:
    """Tokens per second the study's latest finished trials of ``config``'s embedder read (their
    ``model_read``, newest first, until they hold :data:`~..scoring.calibration.RECALIBRATE_MIN_TOKENS`);
    None while they read fewer. Every worker of every process sees the same figure: the machine as the run
    finds it, not as it was when the calibration was measured."""
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    finished = sorted((t for t in finished if t.datetime_complete is not None and MODEL_READ_ATTR in t.user_attrs),
                      key=lambda t: t.datetime_complete, reverse=True)
    wanted = embedder_key(config)
    tokens, seconds = 0, 0.0
    for trial in finished[:OBSERVED_TRIALS]:
        used = json.loads(trial.user_attrs.get(CONFIG_ATTR) or "{}").get("embedder")
        if embedder_key(EmbedderConfig.from_dict(used) if used else config) != wanted:
            continue
        read, took = trial.user_attrs[MODEL_READ_ATTR]
        tokens, seconds = tokens + int(read), seconds + float(took)
        if tokens >= RECALIBRATE_MIN_TOKENS:
            return tokens / seconds if seconds > 0 else None
    return None
