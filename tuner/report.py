"""Reports: Pareto fronts, the best configuration against well-known defaults, and
bootstrap confidence intervals, per corpus of a run.

For each corpus study the report writes ``<corpus>-recall-iou.png``/``.html`` and
``<corpus>-recall-cost.png``/``.html`` (every trial, the Pareto front, the best
weighted configuration and the well-known defaults where they were evaluated), and a
section of ``report.md``: the Pareto-optimal configurations, the best configuration,
how it compares with the common token 800/400 default, and 95% bootstrap confidence
intervals over queries for the top configurations, so a real win can be told from noise.

Per-query scores are not stored in trials; the report re-evaluates the top
configurations and the baseline with the study's own settings (fast: every vector is
in the embedding cache after tuning).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from .config import EvaluationConfig, RetrievalConfig
from .embedding import EmbeddingCache
from .errors import ChunkwiseError
from .evaluation import evaluate
from .tuning.objective import ResolvedRates, Scales, Weights, trial_attributes
from .tuning.runner import best_trial, embedder_key
from .tuning.samplers import DUPLICATE_ATTR, SCORE_ATTR
from .tuning.study import StudyError, load_study_inputs

#: Common defaults marked on the plots: (chunker, size, overlap).
WELL_KNOWN = (("token", 800, 400), ("token", 400, 200), ("recursive", 200, 0))
#: The default the best configuration is compared with (the one Chroma's report found worst on IoU).
BASELINE = ("token", 800, 400)
BASELINE_K = 5
BASELINE_LABEL = f"default {BASELINE[0]} {BASELINE[1]}/{BASELINE[2]} k={BASELINE_K}"
CONFIDENCE = 0.95


@dataclass
class Row:
    """One configuration in the report."""

    label: str
    number: int | None
    attrs: dict[str, Any]


def label_of(attrs: dict[str, Any]) -> str:
    params = attrs.get("params", {})
    shown = "/".join(str(params[p]) for p in ("size", "overlap") if p in params)
    return f"{attrs.get('chunker')} {shown} k={attrs.get('k')}"


def _evaluated(study: optuna.Study) -> list[FrozenTrial]:
    """Complete trials, one per distinct configuration (the first that evaluated it)."""
    distinct: dict[str, FrozenTrial] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if SCORE_ATTR in t.user_attrs and DUPLICATE_ATTR not in t.user_attrs:
            distinct.setdefault(t.user_attrs.get("config", str(t.number)), t)
    return list(distinct.values())


def pareto(points: list[tuple[float, float]], maximize: tuple[bool, bool]) -> list[int]:
    """Indices of the non-dominated points, sorted by the first coordinate."""
    signs = np.array([1 if m else -1 for m in maximize], dtype=float)
    values = np.asarray(points, dtype=float) * signs
    front = [i for i, p in enumerate(values)
             if not any(np.all(q >= p) and np.any(q > p) for q in values)]
    return sorted(front, key=lambda i: points[i][0])


def bootstrap_mean_ci(values: np.ndarray, rng: np.random.Generator, samples: int) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``."""
    index = rng.integers(0, len(values), size=(samples, len(values)))
    means = values[index].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _well_known_trials(trials: list[FrozenTrial]) -> dict[tuple, list[FrozenTrial]]:
    found: dict[tuple, list[FrozenTrial]] = {}
    for t in trials:
        params = t.user_attrs.get("params", {})
        key = (t.user_attrs.get("chunker"), params.get("size"), params.get("overlap"))
        if key in WELL_KNOWN:
            found.setdefault(key, []).append(t)
    return found


def write_report(storage: optuna.storages.BaseStorage, run: str, out_dir: str | Path, *, top: int = 5,
                 bootstrap: int = 2000, seed: int = 0, cache: EmbeddingCache | None = None,
                 plotly_js: str = "inline") -> Path:
    """Write the report of every corpus study of run ``run``; returns the markdown file.

    ``plotly_js="inline"`` makes each HTML plot self-contained (about 4 MB, works offline);
    ``"cdn"`` loads plotly.js from its CDN instead (small files, needs a network to view).
    """
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)
                   if s.study_name == run or s.study_name.startswith(run + "/"))
    if not names:
        raise ChunkwiseError(f"no study named {run!r} (or {run}/CORPUS) in this storage")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = [f"# chunkwise report: {run}", ""]
    for name in names:
        study = optuna.load_study(study_name=name, storage=storage)
        sections += _corpus_section(study, out, top=top, bootstrap=bootstrap, seed=seed, cache=cache,
                                    plotly_js=plotly_js)
    path = out / "report.md"
    path.write_text("\n".join(sections) + "\n", encoding="utf-8")
    return path


def _corpus_section(study: optuna.Study, out: Path, *, top: int, bootstrap: int, seed: int,
                    cache: EmbeddingCache | None, plotly_js: str) -> list[str]:
    settings = study.user_attrs.get("settings")
    if settings is None:
        raise ChunkwiseError(f"study {study.study_name!r} was not created by chunkwise (no settings)")
    corpus_name = settings["corpus"]
    trials = _evaluated(study)
    lines = [f"## {corpus_name} (study `{study.study_name}`)", ""]
    if not trials:
        return [*lines, "No complete trial yet.", ""]
    best = best_trial(study)
    known = _well_known_trials(trials)
    stem = corpus_name.replace("/", "_")
    comparison, baseline = _comparison(study, settings, trials, best, top, bootstrap, seed, cache)
    plot_files = _plots(trials, best, known, baseline, out, stem, plotly_js)
    weights = ", ".join(f"{k} {v:g}" for k, v in settings["weights"].items())
    lines += [
        f"{settings['queries']} queries; {len(trials)} evaluated configurations; embedder "
        f"{settings['embedder']['provider']}:{settings['embedder']['model']}; unit {settings['unit']}; "
        f"weights {weights}.",
        "",
        f"![recall against IoU]({plot_files[0]}) ![recall against cost]({plot_files[1]})",
        "",
        f"Interactive: [recall-IoU]({plot_files[2]}), [recall-cost]({plot_files[3]}).",
        "",
        f"**Best weighted configuration**: `{label_of(best.user_attrs)}` (trial {best.number}), score "
        f"{best.user_attrs['score']:.4f}.",
        "",
        "### Pareto-optimal configurations (recall against IoU)",
        "",
        "| trial | configuration | recall | IoU | precision-Ω | latency ms | cost $/1k queries | score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    front = pareto([(t.user_attrs["recall"], t.user_attrs["iou"]) for t in trials], (True, True))
    for i in front:
        a = trials[i].user_attrs
        mark = " **(best)**" if trials[i].number == best.number else ""
        lines.append(f"| {trials[i].number} | {label_of(a)}{mark} | {a['recall']:.1%} | {a['iou']:.2%} | "
                     f"{a['precision_omega']:.1%} | {a['latency_ms']:.0f} | {a['cost_usd_per_1k_queries']:.3f} | "
                     f"{a['score']:.4f} |")
    lines += ["", *comparison, ""]
    return lines


def _plots(trials, best, known, baseline: dict[str, Any] | None, out: Path, stem: str,
           plotly_js: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plotly.graph_objects as go

    files = []
    html = []
    axes = (("iou", "IoU", True), ("cost_usd_per_1k_queries", "cost, $ per 1,000 queries", False))
    for metric, label, maximize in axes:
        xs = [t.user_attrs[metric] for t in trials]
        ys = [t.user_attrs["recall"] for t in trials]
        front = pareto(list(zip(ys, xs)), (True, maximize))
        front = sorted(front, key=lambda i: xs[i])
        fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
        ax.scatter(xs, ys, s=16, c="#b0b0b0", label="trials")
        ax.plot([xs[i] for i in front], [ys[i] for i in front], "-o", c="#1f77b4", ms=4, label="Pareto front")
        ax.scatter([best.user_attrs[metric]], [best.user_attrs["recall"]], marker="*", s=220, c="#d62728",
                   zorder=5, label=f"best score: {label_of(best.user_attrs)}")
        markers = iter("s^D")
        for (chunker, size, overlap), matches in known.items():
            top_match = max(matches, key=lambda t: t.user_attrs["score"])
            ax.scatter([top_match.user_attrs[metric]], [top_match.user_attrs["recall"]], marker=next(markers),
                       s=60, facecolors="none", edgecolors="black", zorder=4,
                       label=f"{chunker} {size}/{overlap} (best k={top_match.user_attrs['k']})")
        if baseline is not None:
            ax.scatter([baseline[metric]], [baseline["recall"]], marker="x", s=70, c="black", zorder=4,
                       label=f"{BASELINE_LABEL} (evaluated for this report)")
        ax.set_xlabel(label)
        ax.set_ylabel("recall")
        if metric == "iou":
            ax.set_xscale("log")
        ax.set_title(f"{stem}: recall against {label.split(',')[0]}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        png = f"{stem}-recall-{'iou' if metric == 'iou' else 'cost'}.png"
        fig.savefig(out / png)
        plt.close(fig)
        files.append(png)

        hover = [f"trial {t.number}: {label_of(t.user_attrs)}<br>score {t.user_attrs['score']:.4f}" for t in trials]
        figure = go.Figure()
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="trials", text=hover, hoverinfo="text+x+y",
                                    marker={"color": "#b0b0b0"}))
        figure.add_trace(go.Scatter(x=[xs[i] for i in front], y=[ys[i] for i in front], mode="lines+markers",
                                    name="Pareto front", text=[hover[i] for i in front], hoverinfo="text+x+y"))
        figure.add_trace(go.Scatter(x=[best.user_attrs[metric]], y=[best.user_attrs["recall"]], mode="markers",
                                    name="best score", marker={"symbol": "star", "size": 16, "color": "#d62728"},
                                    text=[label_of(best.user_attrs)], hoverinfo="text+x+y"))
        for (chunker, size, overlap), matches in known.items():
            figure.add_trace(go.Scatter(x=[t.user_attrs[metric] for t in matches],
                                        y=[t.user_attrs["recall"] for t in matches], mode="markers",
                                        name=f"{chunker} {size}/{overlap}",
                                        marker={"symbol": "square-open", "size": 11},
                                        text=[label_of(t.user_attrs) for t in matches], hoverinfo="text+x+y"))
        if baseline is not None:
            figure.add_trace(go.Scatter(x=[baseline[metric]], y=[baseline["recall"]], mode="markers",
                                        name=f"{BASELINE_LABEL} (evaluated for this report)",
                                        marker={"symbol": "x", "size": 12, "color": "black"}))
        figure.update_layout(title=f"{stem}: recall against {label.split(',')[0]}", xaxis_title=label,
                             yaxis_title="recall", xaxis_type="log" if metric == "iou" else "linear")
        page = png.replace(".png", ".html")
        figure.write_html(out / page, include_plotlyjs=True if plotly_js == "inline" else "cdn", full_html=True)
        html.append(page)
    return files + html


def _comparison(study, settings, trials, best, top, bootstrap, seed, cache) -> tuple[list[str], dict | None]:
    """Top configurations and the baseline, re-evaluated for per-query bootstrap intervals.

    Returns the markdown lines and the baseline's attributes (None when skipped).
    """
    try:
        corpus, evalset = load_study_inputs(settings, study.study_name)
    except StudyError:
        return ["The corpus or queries changed since the study ran: bootstrap intervals skipped."], None
    cache = cache if cache is not None else EmbeddingCache()
    ranked = sorted(trials, key=lambda t: -t.user_attrs["score"])[:top]
    rows = [Row(f"trial {t.number}: {label_of(t.user_attrs)}", t.number, t.user_attrs) for t in ranked]
    configs = [EvaluationConfig.from_dict(json.loads(t.user_attrs["config"])) for t in ranked]
    base_config = EvaluationConfig.from_dict({
        **configs[0].to_dict(),
        "chunker": {"name": BASELINE[0], "params": {"size": BASELINE[1], "overlap": BASELINE[2]}},
        "retrieval": RetrievalConfig(k=BASELINE_K).to_dict(),
    })
    per_query = []
    embedder = configs[0].embedder.build(cache)
    for config in [*configs, base_config]:
        result = evaluate(corpus, evalset, config, embedder=embedder)
        per_query.append(result.scores.at(config.retrieval.k))
    baseline = per_query[-1]
    rates = ResolvedRates(**settings["resolved_rates"][embedder_key(base_config.embedder)])
    base_attrs = trial_attributes(result, rates, Weights(**settings["weights"]), Scales(**settings["scales"]))
    rng = np.random.default_rng(seed)
    n = len(evalset)
    lines = [
        f"### Top {len(ranked)} configurations against the token {BASELINE[1]}/{BASELINE[2]} default (k={BASELINE_K})",
        "",
        f"Means over the {n} queries with {CONFIDENCE:.0%} bootstrap confidence intervals ({bootstrap} resamples "
        "of the queries); the differences are paired per query, so an interval that excludes 0 is a real "
        "difference, not noise.",
        "",
        "| configuration | recall | IoU | Δ recall vs default | Δ IoU vs default |",
        "|---|---|---|---|---|",
    ]
    for row, scores in zip(rows, per_query):
        cells = []
        for metric in ("recall", "iou"):
            low, high = bootstrap_mean_ci(scores[metric], rng, bootstrap)
            cells.append(f"{scores[metric].mean():.1%} [{low:.1%}, {high:.1%}]")
        for metric in ("recall", "iou"):
            diff = scores[metric] - baseline[metric]
            low, high = bootstrap_mean_ci(diff, rng, bootstrap)
            verdict = "" if low <= 0 <= high else " ✓" if low > 0 else " ✗"
            cells.append(f"{diff.mean() * 100:+.1f} pts [{low * 100:+.1f}, {high * 100:+.1f}]{verdict}")
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    base_cells = []
    for metric in ("recall", "iou"):
        low, high = bootstrap_mean_ci(baseline[metric], rng, bootstrap)
        base_cells.append(f"{baseline[metric].mean():.1%} [{low:.1%}, {high:.1%}]")
    lines.append(f"| {BASELINE_LABEL} | " + " | ".join(base_cells) + " | | |")
    b, d = best.user_attrs, base_attrs
    lines += [
        "",
        f"**Best against the token {BASELINE[1]}/{BASELINE[2]} default** (✓: the interval lies above 0, "
        "✗: below):",
        "",
        "| metric | best | default | difference |",
        "|---|---|---|---|",
        f"| recall | {b['recall']:.1%} | {d['recall']:.1%} | {(b['recall'] - d['recall']) * 100:+.1f} points |",
        f"| precision | {b['precision']:.2%} | {d['precision']:.2%} | {_ratio(b['precision'], d['precision'])} |",
        f"| IoU | {b['iou']:.2%} | {d['iou']:.2%} | {_ratio(b['iou'], d['iou'])} |",
        f"| precision-Ω | {b['precision_omega']:.1%} | {d['precision_omega']:.1%} | "
        f"{_ratio(b['precision_omega'], d['precision_omega'])} |",
        f"| latency (modelled) | {b['latency_ms']:.0f} ms | {d['latency_ms']:.0f} ms | "
        f"{_ratio(b['latency_ms'], d['latency_ms'])} |",
        f"| cost per 1,000 queries | ${b['cost_usd_per_1k_queries']:.3f} | ${d['cost_usd_per_1k_queries']:.3f} | "
        f"{_ratio(b['cost_usd_per_1k_queries'], d['cost_usd_per_1k_queries'])} |",
        f"| weighted score | {b['score']:.4f} | {d['score']:.4f} | {(b['score'] - d['score']):+.4f} |",
    ]
    return lines, base_attrs


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.1f}x" if reference > 0 else "n/a"
