"""Plain-text formatting of results."""

from __future__ import annotations

import shlex

from ..evaluation.registry import metrics as declared_metrics
from ..tuning.outcome import CorpusOutcome, format_outcomes
from ..tuning.study import portable_url


def format_result(result) -> str:
    """A plain-text table of an :class:`~tuner.evaluation.EvaluationResult`."""
    config = result.config
    params = ", ".join(f"{k}={v!r}" for k, v in config.chunker.params.items())
    lines = [
        f"chunker    {config.chunker.name}({params})",
        f"embedder   {config.embedder.provider}:{config.embedder.model}",
        f"retrieval  {config.retrieval.describe()}, k={config.retrieval.k}, {config.retrieval.scope}, "
        f"{config.retrieval.index}; "
        f"unit={config.unit}, copies={config.copies}",
        "",
    ]
    shown = [m for m in declared_metrics() if m.name in result.metrics["overall"]]
    header = f"{'corpus':<24}{'queries':>8}" + "".join(f"{m.label:>16}" for m in shown)
    lines += [header, "-" * len(header)]
    rows = dict(result.metrics.get("per_corpus", {}))
    counts = {name: result.query_corpora.count(name) for name in rows}
    if len(rows) > 1 or not rows:
        rows["all"] = result.metrics["overall"]
        counts["all"] = len(result.query_corpora)
    for name, metrics in rows.items():
        cells = "".join(
            f"{metrics[m.name]['mean']:>9.1f} ± {metrics[m.name]['std']:<4.0f}" if m.count else
            f"{metrics[m.name]['mean'] * 100:>9.2f} ± {metrics[m.name]['std'] * 100:<4.1f}"
            for m in shown)
        lines.append(f"{name:<24}{counts[name]:>8}{cells}")
    if result.first_stage is not None:
        first = result.first_stage
        lines.append(f"{'first stage':<24}{len(result.query_corpora):>8}   recall@{first['candidates']} "
                     f"{float(first['recall'].mean()) * 100:.2f} (the candidates the reranker read)")
    stats = result.chunk_stats
    emb = result.embedding
    lines += [
        "",
        f"chunks     {stats['chunks']} (mean {stats['mean_chunk_tokens']:.1f} tokens, "
        f"max {stats['max_chunk_tokens']})",
        f"embedding  {emb['texts']} texts, {emb['tokens']} tokens; cache hit rate "
        f"{emb['cache_hit_rate'] * 100:.1f}%",
        "time       " + ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items()),
        "(metrics in percent, context in tokens: mean ± standard deviation over queries)",
    ]
    if result.repeats is not None and (repeated := result.repeats.describe()):
        lines.append(repeated)
    return "\n".join(lines)



def format_summary(run: str, storage_url: str, outcomes: list[CorpusOutcome], *, details: bool = False) -> str:
    """The end-of-run summary: per corpus, what the study holds and its recommended configuration
    (with ``details``, the reasoning behind it), then the commands to run next (shell-quoted; a
    storage password is never printed)."""
    lines = [format_outcomes(outcomes, details)]
    url = portable_url(storage_url)
    quoted = shlex.quote(url)
    lines += ["", "next:", f"  chunkwise dashboard --storage {quoted}"]
    for item in outcomes:
        lines.append(f"  chunkwise export --storage {quoted} --study {shlex.quote(run)} "
                     f"--corpus {shlex.quote(item.corpus)} -o {shlex.quote(item.corpus + '-best.json')}")
    if url != storage_url:
        lines.append("  (the storage password is not shown: set CHUNKWISE_STORAGE_PASSWORD or PGPASSWORD)")
    return "\n".join(lines)
