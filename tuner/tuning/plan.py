"""Know the cost before paying it: what a tuning run will embed, and about how long it takes.

``chunkwise tune --dry-run`` loads the corpora and questions, samples configurations from the
search space (chunking is cheap: nothing is embedded), and prints per corpus the documents,
cl100k tokens, trials, the embedding work of a cold trial, the estimated wall time of the run
from the embedder's calibrated throughput and ``--jobs``, and the API cost for an OpenAI
embedder. The estimate is an upper bound: every trial is priced cold, while trials that share
chunks reuse the embedding cache. With fidelity rungs, a trial is priced at the expected share
of the distractors successive halving lets it embed (:meth:`Fidelity.expected_share`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optuna

from ..chunkers import chunker_class
from ..embedding import EmbeddingCache
from ..embedding.config import shared_embedder
from ..text.tokens import count_tokens_batch
from .objective import resolve_rates
from .progress import format_duration
from .settings import resolve_fidelity
from .space import SearchSpace
from .study import StudySpec, load_study_data

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


def embedding_factor(space: SearchSpace, samples: int = SAMPLED_CONFIGURATIONS, seed: int = 0) -> float:
    """Mean tokens embedded per corpus token over configurations sampled from ``space``:
    overlap re-embeds text (``1 / (1 - overlap / size)``) and semantic chunkers embed their
    units first."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    factors = []
    for _ in range(samples):
        trial = study.ask()
        chunker, _, _ = space.sample(trial)
        params = chunker.params
        size, overlap = params.get("size"), params.get("overlap", 0) or 0
        factor = 1.0 / (1.0 - overlap / size) if size else 1.0
        if chunker_class(chunker.name).needs_embedder:
            factor += SEMANTIC_UNIT_FACTOR
        factors.append(factor)
        study.tell(trial, 0.0)
    return float(np.mean(factors))


def plan_run(spec: StudySpec) -> list[CorpusPlan]:
    """The cost preview of ``spec`` (see the module docstring)."""
    data = load_study_data(spec)
    factor = embedding_factor(data.space, seed=spec.seed)
    cache = EmbeddingCache(spec.cache) if spec.cache else EmbeddingCache()
    rates = resolve_rates(spec.rates, shared_embedder(spec.embedder, cache), spec.embedder.provider)
    plans = []
    for corpus in data.corpora:
        tokens = int(sum(count_tokens_batch([d.text for d in corpus])))
        fidelity = resolve_fidelity(spec.fidelity, corpus)
        share = fidelity.expected_share()
        per_trial = tokens * factor
        seconds = per_trial / rates.embed_tokens_per_s
        api = (spec.trials * per_trial * share * rates.embed_usd_per_mtok / 1e6
               if spec.embedder.provider == "openai" else None)
        plans.append(CorpusPlan(corpus.name, len(corpus), tokens, len(data.evaluation_sets[corpus.name]), spec.trials,
                                per_trial, seconds, spec.trials * seconds * share / spec.jobs, api, fidelity.rungs,
                                share))
    return plans


def format_plan(spec: StudySpec, plans: list[CorpusPlan]) -> str:
    resolved = spec.embedder.resolved_precision
    if spec.embedder.precision == "auto":
        precision = f" (precision auto: {resolved} on this machine)" if spec.embedder.local else ""
    else:
        precision = f" ({resolved})" if resolved != "fp32" else ""
    lines = [f"dry run of {spec.name}: {spec.trials} trial(s) per corpus, {spec.jobs} worker(s), embedder "
             f"{spec.embedder.provider}:{spec.embedder.model}{precision}; nothing is embedded or stored", ""]
    for p in plans:
        cost = f", about ${p.api_usd:.2f} of API embedding" if p.api_usd is not None else ""
        lines += [f"  {p.corpus}: {p.documents} document(s), {p.tokens:,} tokens, {p.queries} questions",
                  f"    a cold trial embeds about {p.tokens_per_cold_trial:,.0f} tokens at full fidelity: "
                  f"{format_duration(p.seconds_per_cold_trial)}"]
        if len(p.rungs) > 1:
            lines.append(f"    fidelity rungs {', '.join(f'{r:g}' for r in p.rungs)}: a trial embeds about "
                         f"{p.fidelity_share:.0%} of that on average, plus the chunks holding references")
        lines.append(f"    {p.trials} trials: at most {format_duration(p.wall_seconds)}{cost}")
    total = sum(p.wall_seconds for p in plans)
    lines += ["", f"at most {format_duration(total)} in all (every trial priced cold; chunks shared between trials "
                  "come from the embedding cache, so real runs are shorter)"]
    return "\n".join(lines)
