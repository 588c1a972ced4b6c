"""Know the cost before paying it: what a tuning run will embed, and about how long it takes.

``chunkwise tune --dry-run`` loads the corpora and questions, samples configurations from the
search space (chunking is cheap: nothing is embedded), and prints per corpus the documents,
cl100k tokens, trials, the embedding work of a cold trial, the estimated wall time of the run
from the embedder's calibrated throughput and ``--jobs`` (each embedder's own when the search space lists
several), and the API cost for an OpenAI embedder, at its list price (``rates.embed_usd_per_mtok`` overrides). The
estimate is an upper bound: every trial is priced cold, while trials that share chunks reuse
the embedding cache. With fidelity rungs, a trial is priced at the expected share
of the distractors successive halving lets it embed (:meth:`Fidelity.expected_share`). Behind a
proxy, its pass over the corpus is priced once, each dense trial as a BM25 one, and the confirmations and
dense baselines as full evaluations; every text read up to the model's window (:func:`.cost.chunk_passes`).
Trials with LLM-written context headers (``context: llm``) are priced in LLM tokens too, at the
reader's rate (``rates.reader_usd_per_mtok``): per chunk, the document or its window, the chunk,
the prompt and a reply (:func:`tuner.retrieval.llm_context.estimated_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import optuna

from ...embedding import EmbeddingCache, embedding_provider
from ...embedding.config import EmbedderConfig, embedder_key, shared_embedder
from ...errors import option
from ...retrieval.llm_context import estimated_tokens
from ...text.tokens import count_tokens_batch
from ..outcome.summary import format_duration
from ..scoring.calibration import calibrated_throughput, describe_measured, stored_calibration
from ..scoring.measures import resolve_rates
from ..search.baselines import BASELINES, baseline_points
from ..search.cost import (
    BM25,
    DENSE,
    KINDS,
    SEMANTIC,
    chunk_passes,
    embedding_seconds,
    pass_factor,
    reading_window,
    trial_kind,
)
from ..search.space import SearchSpace
from ..study.opening import load_study_data, resumable_settings
from ..study.settings import resolve_fidelity
from ..study.spec import StudySpec

#: Configurations sampled from the space to estimate the embedding work of a trial.
SAMPLED_CONFIGURATIONS = 40
#: A semantic chunker embeds its units (about the corpus once) before its chunks.
SEMANTIC_UNIT_FACTOR = 1.0


@dataclass(frozen=True)
class CorpusPlan:
    corpus: str
    documents: int
    tokens: int
    queries: int
    trials: int
    tokens_per_cold_trial: float
    seconds_per_cold_trial: float
    wall_seconds: float
    api_usd: float | None
    rungs: tuple[float, ...] = (1.0,)
    #: The expected share of a full trial's embedding a trial pays at these rungs.
    fidelity_share: float = 1.0
    #: Share of each kind of trial (bm25, dense, semantic) among the space's configurations.
    kinds: dict[str, float] = field(default_factory=dict)
    #: Cold price of one trial of each kind, in seconds.
    kind_seconds: dict[str, float] = field(default_factory=dict)
    #: The embedding price the API cost is computed at (USD per million tokens).
    usd_per_mtok: float | None = None
    #: Workers the wall time is divided among (a cluster's: the threads of its workers).
    jobs: int = 1
    #: Share of trials whose context headers an LLM writes (``context: llm``), the LLM tokens one
    #: of them costs cold, and what all of them cost at the reader's rate (None: no such trial).
    llm_context_share: float = 0.0
    llm_context_tokens: float = 0.0
    llm_context_usd: float | None = None
    reader_usd_per_mtok: float = 0.0
    #: The embedding throughput the trials are priced at, and where it comes from
    #: (``1,147 tokens/s, measured 2026-11-20 10:02 UTC on this machine``); empty for a hosted model.
    priced_at: str = ""
    #: Per embedder the space lists (its model), a cold dense trial's seconds at its own throughput (empty
    #: with one embedder).
    embedder_seconds: dict[str, float] = field(default_factory=dict)
    #: A proxy rung's proxy (``late``) and its pass over the corpus, paid once per embedder.
    proxy: str | None = None
    proxy_seconds: float = 0.0
    #: Behind a proxy: the configurations it confirms, and the full-fidelity evaluations (those and
    #: the dense baselines) in seconds.
    confirm: int = 0
    full_seconds: float = 0.0
    #: Embedding work, cold, in corpus passes by phase, as the summary counts it (:data:`~..outcome.summary.PHASES`).
    passes: dict[str, float] = field(default_factory=dict)
    #: The corpus's share of the run's time budget (None without one).
    budget_seconds: float | None = None
    #: What the run would say at its start beyond the question count (its language and embedders, unreviewed
    #: generated questions: :attr:`~tuner.tuning.study.opening.LoadedStudyData.notes`), the same for every corpus.
    notes: tuple[str, ...] = ()

    @property
    def fixed_seconds(self) -> float:
        """Behind a proxy, the work a run does whatever its budget (:func:`fixed_work_seconds`)."""
        return fixed_work_seconds(self.proxy_seconds, self.full_seconds, self.jobs)


def fixed_work_seconds(proxy_seconds: float, full_seconds: float, jobs: int) -> float:
    """The pass, then the dense baselines and the confirmations shared among the workers."""
    return proxy_seconds + full_seconds / jobs


#: One sampled configuration (:func:`_sampled`): its kind, the tokens it embeds per corpus token, its
#: LLM contexts' ``(size, overlap)`` (None without), and its embedder (None: the study's).
Sampled = tuple[str, float, "tuple[int, int] | None", "EmbedderConfig | None"]


def kind_shares(sampled: list[Sampled]) -> dict[str, tuple[float, float]]:
    """Per kind of trial (:data:`.cost.KINDS`) among sampled configurations (:func:`_sampled`):
    its share, and the mean tokens it embeds per corpus token."""
    out = {}
    for kind in KINDS:
        factors = [factor for k, factor, *_ in sampled if k == kind]
        out[kind] = (len(factors) / len(sampled), float(np.mean(factors)) if factors else 0.0)
    return out


def _sampled(space: SearchSpace, samples: int, seed: int, window: float | None = None) -> list[Sampled]:
    """``(kind, tokens embedded per corpus token, LLM contexts, embedder)`` of configurations sampled at
    random: overlap re-embeds text (``1 / (1 - overlap / size)``), semantic chunkers embed their
    units first, BM25 trials embed nothing; the third is the chunks' ``(size, overlap)`` when an
    LLM writes their context headers (:data:`LLM_CONTEXT_CHUNK_TOKENS` for a chunker without a
    size), else None; the embedder is the one the space samples (None when it lists none: the study's)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(samples):
        trial = study.ask()
        chunker, _, embedder = space.sample(trial)
        retrieval = space.sample_retrieval(trial, 1)
        params = chunker.params
        size, overlap = params.get("size"), params.get("overlap", 0) or 0
        factor = chunk_passes(params, window)
        kind = trial_kind(chunker.name, retrieval.method)
        if kind == SEMANTIC:
            factor += SEMANTIC_UNIT_FACTOR
        contexts = ((size or LLM_CONTEXT_CHUNK_TOKENS, overlap if size else 0) if retrieval.context == "llm"
                    else None)
        out.append((kind, 0.0 if kind == BM25 else factor, contexts, embedder))
        study.tell(trial, 0.0)
    return out


def baseline_passes(space: SearchSpace, window: float | None = None) -> float:
    """Corpus passes the space's baselines embed, cold: each chunking an embedding baseline embeds, once,
    read up to ``window`` cl100k tokens a chunk (:func:`chunk_passes`)."""
    by_name = {baseline.name: baseline for baseline in BASELINES}
    chunkings = {(by_name[name].chunker, repr(sorted(by_name[name].params.items()))): by_name[name]
                 for name, _ in baseline_points(space)
                 if trial_kind(by_name[name].chunker, by_name[name].method) == DENSE}
    return sum(chunk_passes(baseline.params, window) for baseline in chunkings.values())


def plan_run(spec: StudySpec) -> list[CorpusPlan]:
    """The cost preview of ``spec`` (see the module docstring)."""
    from .runner import run_jobs

    jobs = run_jobs(spec)  # a cluster's: its workers' threads
    data = load_study_data(spec)
    resumed, versions = resumable_settings(spec, data)  # a run that would be refused has no price
    cache = EmbeddingCache(spec.cache) if spec.cache else EmbeddingCache()
    embedder = shared_embedder(spec.embedder, cache)
    # Passes as the model does them (the summary's): what it reads of each chunk, its pass's overlapping windows.
    window = reading_window(embedder, [document.text for corpus in data.corpora for document in corpus])
    sampled = _sampled(data.space, SAMPLED_CONFIGURATIONS, spec.seed, window)  # once: the factor and the kinds
    factor = float(np.mean([f for _, f, *_ in sampled]))
    contexts = [c for _, _, c, _ in sampled if c is not None]
    shares = kind_shares(sampled)
    rates = resolve_rates(spec.rates, embedder, spec.embedder.provider)
    # Each embedder the space lists at its own throughput, as the run prices its trials (the study's own
    # embedder when the space lists none); the baselines use the first one listed.
    listed = list(data.space.embedders) or [spec.embedder]
    speeds = {embedder_key(config): resolve_rates(spec.rates, shared_embedder(config, cache),
                                                  config.provider).embed_tokens_per_s for config in listed}
    priced = [(kind, f, speeds[embedder_key(config or spec.embedder)], _screened(config or spec.embedder))
              for kind, f, _, config in sampled]
    priced_at = _priced_at(spec, listed, speeds, cache)
    plans = []
    for corpus in data.corpora:
        tokens = corpus.token_count()
        # A study that exists keeps the fidelity it stored (what `auto` chooses now may differ).
        fidelity = (resumed[corpus.name].fidelity if corpus.name in resumed
                    else resolve_fidelity(spec.fidelity, corpus, spec.embedder, data.space))
        share = fidelity.expected_share(spec.trials_to_add)
        per_trial = tokens * factor
        seconds = embedding_seconds(tokens, [f for _, f, _, _ in priced], [rate for _, _, rate, _ in priced])
        kind_seconds = {kind: max(MIN_TRIAL_S, share * embedding_seconds(
            tokens, [f for k, f, _, _ in priced if k == kind], [rate for k, _, rate, _ in priced if k == kind]))
            for kind in shares}
        # Behind a proxy, a dense trial whose embedder gives token embeddings pools its vectors (about a BM25
        # trial); one whose embedder does not climbs the rungs alone.
        screened = [(f, rate) for kind, f, rate, readable in priced if kind == DENSE and readable]
        behind_proxy = fidelity.proxy is not None and bool(screened)
        if behind_proxy:
            dense = [MIN_TRIAL_S if readable else max(MIN_TRIAL_S, share * tokens * f / rate)
                     for kind, f, rate, readable in priced if kind == DENSE]
            kind_seconds[DENSE] = float(np.mean(dense))
        mean_s = sum(kind_share * kind_seconds[kind] for kind, (kind_share, _) in shares.items())
        passes = {"baselines": baseline_passes(data.space, window)}
        # Behind a proxy the fixed work comes first: the pass reads every document once, and the dense
        # baselines and the proxy's best are embedded at full fidelity (the passes priced below).
        # One pass per embedder that gives token embeddings, at its own throughput.
        readers = [speeds[embedder_key(config)] for config in listed if _screened(config)]
        reread = pass_factor(embedder)
        proxy_s = sum(reread * tokens / rate for rate in readers) if behind_proxy else 0.0
        full_s = 0.0
        if behind_proxy:
            passes.update({"proxy pass": reread * len(readers), "proxy trials": 0.0,
                           "confirmations": fidelity.confirm * shares[DENSE][1]})
            # The dense baselines with the first embedder listed; the confirmations with the screened ones.
            full_s = (passes["baselines"] * tokens / speeds[embedder_key(listed[0])]
                      + fidelity.confirm * embedding_seconds(tokens, *zip(*screened)))
        budget_s = None if spec.timeout is None else spec.timeout / len(data.corpora)  # run.budget_share
        trials = spec.trials_to_add
        if budget_s is not None:  # as many as fit in the corpus's share of the budget, after the fixed work
            trials = min(trials, int(max(0.0, budget_s - fixed_work_seconds(proxy_s, full_s, jobs)) * jobs / mean_s))
        if behind_proxy:  # a semantic chunker still embeds its units
            passes["proxy trials"] = trials * shares[SEMANTIC][0] * SEMANTIC_UNIT_FACTOR
        else:
            passes["trials"] = trials * factor * share
        api = (trials * per_trial * share * rates.embed_usd_per_mtok / 1e6
               if embedding_provider(spec.embedder.provider).priced_per_token else None)
        llm = {}
        if contexts:  # every chunk's context is written when the trial chunks, whatever its fidelity
            documents = count_tokens_batch([d.text for d in corpus])
            tokens_each = float(np.mean([estimated_tokens(documents, size, overlap) for size, overlap in contexts]))
            llm_share = len(contexts) / len(sampled)
            llm = {"llm_context_share": llm_share, "llm_context_tokens": tokens_each,
                   "llm_context_usd": trials * llm_share * tokens_each * rates.reader_usd_per_mtok / 1e6,
                   "reader_usd_per_mtok": rates.reader_usd_per_mtok}
        wall_s = (trials * mean_s + full_s) / jobs + proxy_s
        per_embedder = ({config.model: max(MIN_TRIAL_S, tokens * shares[DENSE][1] / speeds[embedder_key(config)])
                         for config in listed} if len(listed) > 1 else {})
        plans.append(CorpusPlan(corpus.name, len(corpus), tokens, len(data.evaluation_sets[corpus.name]), trials,
                                per_trial, seconds, wall_s if budget_s is None else min(wall_s, budget_s), api,
                                fidelity.rungs, share,
                                {kind: kind_share for kind, (kind_share, _) in shares.items()}, kind_seconds,
                                rates.embed_usd_per_mtok if api is not None else None, jobs, **llm,
                                priced_at=priced_at, embedder_seconds=per_embedder, proxy=fidelity.proxy,
                                proxy_seconds=proxy_s,
                                confirm=fidelity.confirm, full_seconds=full_s, passes=passes,
                                budget_seconds=budget_s, notes=(*data.notes, *versions)))
    return plans


def _screened(config: EmbedderConfig) -> bool:
    """Whether a proxy rung can screen a trial of this embedder: it gives token embeddings (and does not
    chunk late already), as :meth:`~tuner.tuning.run.trial.TrialObjective.proxy_embedder` decides."""
    return not config.late_chunking and embedding_provider(config.provider).token_embeddings


def _priced_at(spec: StudySpec, listed: list[EmbedderConfig], speeds: dict[str, float],
               cache: EmbeddingCache) -> str:
    """Where the throughput the trials are priced at comes from (empty for a hosted model): the configured
    rate, else each local embedder's calibration on this machine, and when it was measured."""
    if spec.rates.embed_tokens_per_s is not None:
        return f"{spec.rates.embed_tokens_per_s:,.0f} tokens/s (the configured rates.embed_tokens_per_s)"
    described = []
    for config in listed:
        if config.local:
            calibration = stored_calibration(shared_embedder(config, cache))
            measured = describe_measured(None if calibration is None else calibration.measured)
            described.append((config.model, f"{speeds[embedder_key(config)]:,.0f} tokens/s", measured))
    if len(listed) == 1:
        return f"{described[0][1]}, {described[0][2]} on this machine" if described else ""
    return ("each embedder's own throughput on this machine: "
            + ", ".join(f"{model} {rate} ({measured})" for model, rate, measured in described)) if described else ""


def recalibrate(spec: StudySpec) -> str | None:
    """Measure the run's local embedder's throughput again (the figure that prices cold
    trials, on this machine now); what was measured, or None for a hosted model or a rate
    set by hand."""
    if not spec.embedder.local or spec.rates.embed_tokens_per_s is not None:
        return None
    embedder = shared_embedder(spec.embedder, EmbeddingCache(spec.cache) if spec.cache else EmbeddingCache())
    before = stored_calibration(embedder)
    measured = calibrated_throughput(embedder, recalibrate=True)
    was = (f" (was {before.tokens_per_s:,.0f} tokens/s, {describe_measured(before.measured)})"
           if before is not None else "")
    return f"measured {spec.embedder.model} again on this machine: {measured:,.0f} tokens/s{was}"


#: The chunk size LLM contexts are priced at for a chunker without a ``size`` (semantic, LLM chunkers).
LLM_CONTEXT_CHUNK_TOKENS = 250
#: What a trial that embeds nothing (BM25) is priced at: chunking and scoring take seconds.
MIN_TRIAL_S = 5.0
#: Beyond this, a run without --n-trials or --timeout is worth a word before it starts.
LONG_RUN_S = 3600.0


def warn_if_long(spec: StudySpec, echo: Callable[[str], None]) -> None:
    """Before an unbounded run (no trial count, no time budget) priced above an hour: say what
    will happen and how to bound it."""
    if spec.bounded:
        return
    plans = plan_run(spec)
    total = sum(p.wall_seconds for p in plans)
    if total > LONG_RUN_S:
        echo(f"note: {spec.trials_to_add} trials per corpus are priced at up to {format_duration(total)} on this "
             f"machine (the dry run shows how). Completed trials are kept whenever you stop (Ctrl-C), or bound the "
             f"run: {option('timeout', '45m')} runs as many trials as fit, {option('trials', 10)} fewer trials.")


def format_plan(spec: StudySpec, plans: list[CorpusPlan]) -> str:
    resolved = spec.embedder.resolved_precision
    if spec.embedder.precision == "auto":
        precision = f" (precision auto: {resolved} on this machine)" if spec.embedder.local else ""
    else:
        precision = f" ({resolved})" if resolved != "fp32" else ""
    jobs = plans[0].jobs if plans else spec.jobs
    where = f" on the Dask cluster at {spec.scheduler}" if spec.backend == "dask" else ""
    count = (f"{spec.trials_to_add} trial(s)" if spec.timeout is None
             else f"as many trials as fit in {format_duration(spec.timeout)}"
             + (f" (at most {spec.trials})" if spec.trials is not None else ""))
    lines = [f"dry run of {spec.name}: {count} per corpus, {jobs} worker(s){where}, embedder "
             f"{spec.embedder.provider}:{spec.embedder.model}{precision}; nothing is embedded or stored"]
    lines += list(plans[0].notes if plans else ())
    if plans and plans[0].priced_at:
        lines.append(f"embedding priced at {plans[0].priced_at}"
                     + (f" ({option('recalibrate', True)} measures it again)" if "measured" in plans[0].priced_at
                        else ""))
    lines.append("")
    for p in plans:
        cost = (f", about ${p.api_usd:.2f} of API embedding at ${p.usd_per_mtok:g} per million tokens"
                if p.api_usd is not None else "")
        lines += [f"  {p.corpus}: {p.documents} document(s), {p.tokens:,} tokens, {p.queries} questions",
                  f"    a cold trial embeds about {p.tokens_per_cold_trial:,.0f} tokens at full fidelity: "
                  f"{format_duration(p.seconds_per_cold_trial)}"]
        if p.proxy is not None:
            lines.append(f"    a {p.proxy}-chunking proxy rung first: one pass over the corpus per embedder, about "
                         f"{format_duration(p.proxy_seconds)}; then each chunking costs about what BM25 does; its "
                         f"best {p.confirm} and the dense baselines at full fidelity: about "
                         f"{format_duration(p.full_seconds)} of embedding"
                         + (f" ({format_duration(p.full_seconds / p.jobs)} on {p.jobs} workers)" if p.jobs > 1 else ""))
            if p.budget_seconds is not None and p.fixed_seconds > p.budget_seconds:
                lines.append(f"    that work alone is priced at {format_duration(p.fixed_seconds)}, beyond the "
                             f"budget's {format_duration(p.budget_seconds)}: the run may end before it confirms the "
                             f"proxy's best (give it more time, or {option('fidelity', 'full')})")
        if p.embedder_seconds:
            lines.append("    a cold dense trial per embedder: " + ", ".join(
                f"{model} about {format_duration(seconds)}" for model, seconds in p.embedder_seconds.items()))
        if len(p.rungs) > 1:
            lines.append(f"    fidelity rungs {', '.join(f'{r:g}' for r in p.rungs)}: a trial embeds about "
                         f"{p.fidelity_share:.0%} of that on average, plus the chunks holding references")
        if p.kinds:
            kinds = ", ".join(f"{share:.0%} {kind} (a cold one about {format_duration(p.kind_seconds[kind])})"
                              for kind, share in p.kinds.items() if share > 0)
            lines.append(f"    trials by kind: {kinds}")
        within = f" (as many as fit in {format_duration(spec.timeout)})" if spec.timeout is not None else ""
        lines.append(f"    {p.trials} trials{within}: at most {format_duration(p.wall_seconds)}{cost}")
        if p.passes:
            lines.append(f"    embedding work: at most {sum(p.passes.values()):.2f} corpus passes ("
                         + ", ".join(f"{phase} {passes:.2f}" for phase, passes in p.passes.items())
                         + "), every trial cold; the run's summary counts what was embedded")
        if p.llm_context_usd is not None:
            lines.append(f"    {p.llm_context_share:.0%} of trials have an LLM write each chunk's context header: "
                         f"about {p.llm_context_tokens:,.0f} LLM tokens per cold trial, about ${p.llm_context_usd:.2f} "
                         f"at the reader's ${p.reader_usd_per_mtok:g} per million tokens (replies are cached)")
        if p.kinds and p.trials:
            by_kind = ", ".join(f"about {round(p.trials * share)} {kind}" for kind, share in p.kinds.items() if share)
            lines.append(f"    of which {by_kind}; the baselines run first (BM25 ones take seconds)")
    total = sum(p.wall_seconds for p in plans)
    if spec.timeout is not None and spec.trials is None and not spec.full_budget:
        lines += ["", f"half-way through each corpus's budget the run judges the search: where it does not beat the "
                      f"best baseline out of sample, the run stops there and says so ({option('full_budget', True)} "
                      "spends it all)"]
    lines += ["", f"at most {format_duration(total)} in all (every trial priced cold; chunks shared between trials "
                  "come from the embedding cache, so real runs are shorter)"]
    return "\n".join(lines)
