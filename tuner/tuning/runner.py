"""Running studies: the trial objective, worker processes and the ``tune`` loop."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from ..config import EmbedderConfig, EvaluationConfig, RetrievalConfig
from ..corpus import Corpus
from ..embedding import Embedder, EmbeddingCache
from ..errors import ChunkwiseError
from ..evalset import EvaluationSet
from ..evaluation import evaluate
from .objective import Rates, ResolvedRates, Scales, Weights, resolve_rates, trial_attributes
from .samplers import DUPLICATE_ATTR, SCORE_ATTR, WeightedScoreSampler
from .storage import make_storage
from .study import (
    SETTINGS_ATTR,
    TARGET_ATTR,
    StudyError,
    StudySpec,
    load_study_data,
    load_study_inputs,
    open_study,
    settings_space,
    study_settings,
)

RESOLVED_RATES_ATTR = "resolved_rates"
ERROR_ATTR = "error"
#: Proposals a worker may make per trial it still owes (duplicates are pruned, not counted).
MAX_PROPOSALS_PER_TRIAL = 20
#: Consecutive failed trials after which a worker gives up.
MAX_FAILURES_IN_A_ROW = 5
#: Consecutive duplicate proposals after which a worker considers the space exhausted.
MAX_DUPLICATES_IN_A_ROW = 50


class TrialObjective:
    """Score the configuration a trial samples; record every metric as user attributes.

    Returns ``(recall, IoU)``, the study's two objectives; the weighted score is the
    ``score`` user attribute that :class:`WeightedScoreSampler` optimises.
    """

    def __init__(self, corpus: Corpus, evaluation_set: EvaluationSet, settings: dict[str, Any],
                 cache: EmbeddingCache | None) -> None:
        self.corpus = corpus
        self.evaluation_set = evaluation_set
        self.space = settings_space(settings)
        self.default_embedder = EmbedderConfig.from_dict(settings["embedder"])
        self.unit = settings["unit"]
        self.weights = Weights(**settings["weights"])
        self.scales = Scales(**settings["scales"])
        self.resolved_rates = {key: ResolvedRates(**value)
                               for key, value in settings.get(RESOLVED_RATES_ATTR, {}).items()}
        self.rates = Rates(**settings["rates"])
        self.cache = cache

    def embedder(self, config: EmbedderConfig) -> Embedder:
        return shared_embedder(config, self.cache)

    def rates_for(self, config: EmbedderConfig) -> ResolvedRates:
        key = embedder_key(config)
        if key not in self.resolved_rates:
            self.resolved_rates[key] = resolve_rates(self.rates, self.embedder(config), config.provider)
        return self.resolved_rates[key]

    def __call__(self, trial: optuna.Trial) -> tuple[float, float]:
        chunker, k, embedder_config = self.space.sample(trial)
        embedder_config = embedder_config or self.default_embedder
        config = EvaluationConfig(chunker, embedder_config, RetrievalConfig(k=k), self.unit)
        prune_duplicate(trial, json.dumps(config.to_dict(), sort_keys=True))
        try:
            result = evaluate(self.corpus, self.evaluation_set, config, embedder=self.embedder(embedder_config))
        except ChunkwiseError as exc:
            trial.set_user_attr(ERROR_ATTR, str(exc))  # the trial fails; the callback reports why
            raise
        attrs = trial_attributes(result, self.rates_for(embedder_config), self.weights, self.scales)
        attrs["chunker"] = chunker.name
        attrs["params"] = chunker.params
        attrs["k"] = k
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        return attrs["recall"], attrs["iou"]


def prune_duplicate(trial: optuna.Trial, config_key: str) -> None:
    """Prune a trial whose configuration was already evaluated, or is being evaluated by
    an earlier trial of another worker (see :mod:`.samplers`).

    The configuration is recorded first, so a worker proposing one that another worker is
    evaluating sees it and yields. The check is not atomic: two workers proposing the same
    configuration at the same instant may both evaluate it, which costs time, never
    correctness. One worker never evaluates a configuration twice.
    """
    trial.set_user_attr("config", config_key)
    for other in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
        if (other.number < trial.number and other.user_attrs.get("config") == config_key
                and DUPLICATE_ATTR not in other.user_attrs):
            trial.set_user_attr(DUPLICATE_ATTR, other.number)
            raise optuna.TrialPruned(f"same configuration as trial {other.number}")


def embedder_key(config: EmbedderConfig) -> str:
    return f"{config.provider}:{config.model}:{config.base_url}:{config.dimensions}"


_EMBEDDERS: dict[tuple[str, str | None], Embedder] = {}


def shared_embedder(config: EmbedderConfig, cache: EmbeddingCache | None) -> Embedder:
    """One embedder per configuration and cache file per process: the model loads once."""
    key = (embedder_key(config), None if cache is None else str(cache.path))
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = config.build(cache)
    return _EMBEDDERS[key]


def limit_threads(threads: int) -> None:
    """Cap the math libraries' threads so parallel workers do not oversubscribe the cores."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    import torch

    torch.set_num_threads(threads)


@dataclass(frozen=True)
class WorkerOptions:
    """How one worker process runs (picklable, for joblib)."""

    storage: str
    study: str
    seed: int
    target: int
    threads: int
    heartbeat_interval: int = 10
    grace_period: int = 30
    cache: str | None = None
    corpus_path: str | None = None
    queries_path: str | None = None
    #: Optuna's log level in the worker (default: the creating process's level).
    verbosity: int = field(default_factory=optuna.logging.get_verbosity)


def run_worker(options: WorkerOptions,
               on_trial: Callable[[optuna.Study, optuna.trial.FrozenTrial], None] | None = None) -> int:
    """Join a study and run trials until it holds ``target`` complete trials.

    Each worker builds its own storage connection and sampler (seeded ``options.seed``),
    loads the corpus and queries named in the study's settings (or the given paths) and
    checks their hashes. Returns the number of trials this worker completed.
    """
    limit_threads(options.threads)
    optuna.logging.set_verbosity(options.verbosity)
    storage = make_storage(options.storage, heartbeat_interval=options.heartbeat_interval,
                           grace_period=options.grace_period)
    try:
        study = optuna.load_study(study_name=options.study, storage=storage,
                                  sampler=WeightedScoreSampler(seed=options.seed))
    except KeyError:
        raise StudyError(f"no study named {options.study!r} in {options.storage}") from None
    settings = study.user_attrs.get(SETTINGS_ATTR)
    if settings is None:
        raise StudyError(f"study {options.study!r} was not created by chunkwise (no settings)")
    corpus, evalset = load_study_inputs(settings, options.study, options.corpus_path, options.queries_path)
    cache = EmbeddingCache(options.cache) if options.cache else EmbeddingCache()
    objective = TrialObjective(corpus, evalset, settings, cache)
    stop = _StopAtTarget(options.target, on_trial)
    remaining = options.target - _count(study, (TrialState.COMPLETE,))
    if remaining <= 0:
        return 0
    # Duplicates (pruned at once) and failures do not count toward the target; the cap on
    # proposals and the stop after repeated failures keep an exhausted space or a broken
    # endpoint from looping forever.
    study.optimize(objective, n_trials=remaining * MAX_PROPOSALS_PER_TRIAL, callbacks=[stop],
                   catch=(ChunkwiseError,), gc_after_trial=False)
    if stop.failed_in_a_row >= MAX_FAILURES_IN_A_ROW:
        raise StudyError(f"study {options.study!r}: {stop.failed_in_a_row} trials failed in a row; stopping "
                         f"(last error: {stop.last_error})")
    if stop.exhausted:
        _print_err(f"study {options.study!r}: the last {MAX_DUPLICATES_IN_A_ROW} proposals repeated evaluated "
                   "configurations; the search space looks exhausted, stopping")
    return stop.completed


class _StopAtTarget:
    """Stop the study once complete plus running trials reach the target, or when
    trials keep failing."""

    def __init__(self, target: int, on_trial: Callable | None) -> None:
        self.target = target
        self.on_trial = on_trial
        self.completed = 0
        self.failed_in_a_row = 0
        self.duplicates_in_a_row = 0
        self.last_error = ""

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.state == TrialState.COMPLETE:
            self.completed += 1
        if trial.state == TrialState.FAIL:
            self.failed_in_a_row += 1
            self.last_error = trial.user_attrs.get(ERROR_ATTR, "see the study")
        elif trial.state == TrialState.COMPLETE:
            self.failed_in_a_row = 0
        self.duplicates_in_a_row = self.duplicates_in_a_row + 1 if DUPLICATE_ATTR in trial.user_attrs else 0
        if self.on_trial is not None:
            self.on_trial(study, trial)
        if (self.failed_in_a_row >= MAX_FAILURES_IN_A_ROW or self.exhausted
                or _count(study, (TrialState.COMPLETE, TrialState.RUNNING)) >= self.target):
            study.stop()

    @property
    def exhausted(self) -> bool:
        """Proposals keep repeating evaluated configurations: the space looks used up."""
        return self.duplicates_in_a_row >= MAX_DUPLICATES_IN_A_ROW


def _count(study: optuna.Study, states: tuple[TrialState, ...]) -> int:
    return len(study.get_trials(deepcopy=False, states=states))


@dataclass
class CorpusOutcome:
    """What a run left in one corpus's study."""

    corpus: str
    study: str
    complete: int
    failed: int
    best: dict[str, Any] | None


def tune(spec: StudySpec, *, progress: bool = True, echo: Callable[[str], None] = print) -> list[CorpusOutcome]:
    """Run (or resume) one study per corpus; add ``spec.trials`` complete trials to each.

    With ``spec.jobs > 1``, that many worker processes share each study (joblib, loky),
    each capped to its share of the cores.
    """
    data = load_study_data(spec)
    outcomes = []
    for corpus in data.corpora:
        name = spec.study_name(corpus.name)
        evalset = data.evaluation_sets[corpus.name]
        storage = make_storage(spec.storage, heartbeat_interval=spec.heartbeat_interval,
                               grace_period=spec.grace_period)
        settings = study_settings(spec, corpus, evalset, data.space, dict(spec.corpora)[corpus.name])
        study = open_study(storage, name, settings)
        _store_resolved_rates(study, spec)
        complete = _count(study, (TrialState.COMPLETE,))
        target = complete + spec.trials
        study.set_user_attr(TARGET_ATTR, target)
        echo(f"study {name}: {complete} complete trial(s), running {spec.trials} more "
             f"({spec.jobs} worker{'s' if spec.jobs > 1 else ''}) in {spec.storage}")
        _run_workers(spec, name, target, complete, progress)
        result = outcome(study, corpus.name)
        write_note(study, result)
        outcomes.append(result)
    return outcomes


def write_note(study: optuna.Study, result: CorpusOutcome) -> None:
    """The study's markdown note in optuna-dashboard: corpus, queries, weights, best configuration."""
    import optuna_dashboard

    settings = study.user_attrs[SETTINGS_ATTR]
    weights = ", ".join(f"{k} {v:g}" for k, v in settings["weights"].items())
    lines = [
        f"## chunkwise study `{study.study_name}`",
        "",
        f"- **corpus**: `{settings['corpus']}` ({settings['corpus_path']})",
        f"- **queries**: {settings['queries']} ({settings['queries_path']})",
        f"- **embedder**: {settings['embedder']['provider']}:{settings['embedder']['model']}; "
        f"unit: {settings['unit']}",
        f"- **weights**: {weights}",
        f"- **trials**: {result.complete} complete, {result.failed} failed",
        "",
        "Objectives: recall and IoU (the Pareto front). Best = highest weighted `score` user attribute.",
        "",
    ]
    best = result.best
    if best is not None:
        params = ", ".join(f"{k}={v!r}" for k, v in best["params"].items() if k != "separators")
        lines += [
            f"### Best configuration: trial {best['number']}",
            "",
            f"`{best['chunker']}({params})`, k = {best['k']}",
            "",
            "| score | recall | IoU | precision-Ω | latency | cost / 1k queries |",
            "|---|---|---|---|---|---|",
            f"| {best['score']:.4f} | {best['recall']:.1%} | {best['iou']:.2%} | {best['precision_omega']:.1%} "
            f"| {best['latency_ms']:.0f} ms | ${best['cost_usd_per_1k_queries']:.3f} |",
        ]
    optuna_dashboard.save_note(study, "\n".join(lines))


def _store_resolved_rates(study: optuna.Study, spec: StudySpec) -> None:
    """Resolve embedder-dependent rates once per study, so every worker scores alike."""
    settings = dict(study.user_attrs[SETTINGS_ATTR])
    resolved = dict(settings.get(RESOLVED_RATES_ATTR, {}))
    embedders = [spec.embedder, *settings_space(settings).embedders]
    missing = [e for e in embedders if embedder_key(e) not in resolved]
    if not missing:
        return
    cache = EmbeddingCache(spec.cache) if spec.cache else EmbeddingCache()
    for config in missing:
        embedder = shared_embedder(config, cache)
        resolved[embedder_key(config)] = asdict(resolve_rates(spec.rates, embedder, config.provider))
    settings[RESOLVED_RATES_ATTR] = resolved
    study.set_user_attr(SETTINGS_ATTR, settings)


def _run_workers(spec: StudySpec, name: str, target: int, complete: int, progress: bool) -> None:
    cores = os.cpu_count() or 1
    options = [
        WorkerOptions(spec.storage, name, spec.seed + worker, target, max(1, cores // spec.jobs),
                      spec.heartbeat_interval, spec.grace_period, spec.cache)
        for worker in range(spec.jobs)
    ]
    bar = _ProgressBar(progress, target - complete, name)
    try:
        if spec.jobs == 1:
            run_worker(options[0], on_trial=bar.on_trial)
        else:
            from joblib import Parallel, delayed

            poller = threading.Thread(target=bar.poll, args=(spec.storage, name, complete), daemon=True)
            poller.start()
            Parallel(n_jobs=spec.jobs, backend="loky")(delayed(run_worker)(o) for o in options)
    finally:
        bar.close()


class _ProgressBar:
    """Trials completed and best score so far, on stderr when it is a terminal."""

    def __init__(self, enabled: bool, total: int, name: str) -> None:
        self.bar = None
        self.best = float("-inf")
        self._stop = threading.Event()
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=name, unit="trial", disable=None, dynamic_ncols=True)

    def on_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.state == TrialState.FAIL and ERROR_ATTR in trial.user_attrs:
            message = f"trial {trial.number} failed: {trial.user_attrs[ERROR_ATTR]}"
            (self.bar.write if self.bar is not None else _print_err)(message)
        if self.bar is not None and trial.state == TrialState.COMPLETE:
            self.best = max(self.best, trial.user_attrs.get(SCORE_ATTR, float("-inf")))
            self.bar.set_postfix(best_score=f"{self.best:.4f}")
            self.bar.update(1)

    def poll(self, storage_url: str, name: str, start: int) -> None:
        if self.bar is None:
            return
        storage = make_storage(storage_url, heartbeat_interval=None)
        while not self._stop.wait(1.0):
            try:
                trials = storage.get_all_trials(storage.get_study_id_from_name(name), deepcopy=False,
                                                states=(TrialState.COMPLETE,))
            except Exception:  # a transient lock while workers write: try again
                continue
            scores = [t.user_attrs.get(SCORE_ATTR, float("-inf")) for t in trials]
            self.bar.n = min(len(trials) - start, self.bar.total)
            self.bar.set_postfix(best_score=f"{max(scores, default=float('-inf')):.4f}")

    def close(self) -> None:
        self._stop.set()
        if self.bar is not None:
            self.bar.close()


def _print_err(message: str) -> None:
    print(message, file=sys.stderr)


def best_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    """The complete trial with the highest weighted score (what export picks)."""
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if SCORE_ATTR in t.user_attrs]
    return max(trials, key=lambda t: (t.user_attrs[SCORE_ATTR], -t.number), default=None)


def outcome(study: optuna.Study, corpus: str) -> CorpusOutcome:
    trials = study.get_trials(deepcopy=False)
    best = best_trial(study)
    return CorpusOutcome(
        corpus=corpus,
        study=study.study_name,
        complete=sum(t.state == TrialState.COMPLETE for t in trials),
        failed=sum(t.state == TrialState.FAIL for t in trials),
        best=None if best is None else {"number": best.number, **best.user_attrs},
    )
