"""Reports: Pareto fronts, the best configuration against well-known defaults, and
bootstrap confidence intervals, per corpus of a run.

For each corpus study the report writes ``<corpus>-recall-context.png``/``.html``,
``<corpus>-recall-iou.png``/``.html`` and ``<corpus>-recall-cost.png``/``.html`` (every trial,
the Pareto front, the best weighted configuration and the well-known defaults where they were
evaluated), and a section of ``report.md``: the Pareto-optimal configurations on the study's
axes (recall against context tokens per query by default), the best configuration within each
context budget of :data:`BUDGETS` with its recall's confidence interval, the best configuration,
how it compares with the common token 800/400 default, 95% bootstrap confidence intervals
over questions for the top configurations (with the selection caveat: the winner was
chosen on those questions), the recommendation of the tie gate, the held-out check
(search against validation score) and a cross-validated estimate of the gain over the
default (:mod:`tuner.tuning.outcome.selection`).

Per-query scores come from the trials, which store them; only the baseline (and a trial
recorded before chunkwise stored them) is evaluated, with the study's own settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from .._io.files import atomic_writer, private_dir, write_atomically
from ..chunkers.config import ChunkerConfig
from ..data.repeats import OccurrenceTable
from ..embedding import EmbeddingCache
from ..errors import ChunkwiseError, StudyError
from ..evaluation.config import EvaluationConfig
from ..evaluation.evaluator import evaluate
from ..evaluation.registry import label as metric_label
from ..evaluation.registry import metric as declared_metric
from ..retrieval.config import RetrievalConfig
from ..tuning.core import TrialRecord, best_trial, evaluated
from ..tuning.outcome import Mark, PlotAxis, pareto, pareto_figure, recommend_for_study, summarize
from ..tuning.scoring import CONFIDENCE, sign_flip_test, trial_attributes
from ..tuning.study import StudySettings, existing_run_storage, load_study_inputs, run_studies, storage_errors

#: Common defaults marked on the plots: (chunker, size, overlap).
WELL_KNOWN = (("token", 800, 400), ("token", 400, 200), ("recursive", 200, 0))
#: The default the best configuration is compared with (the one Chroma's report found worst on IoU).
BASELINE = ("token", 800, 400)
BASELINE_K = 5
BASELINE_LABEL = f"default {BASELINE[0]} {BASELINE[1]}/{BASELINE[2]} k={BASELINE_K}"
#: The plotly.js bundle the HTML plots share (``plotly_js="directory"``): plotly's own name for it.
PLOTLY_JS = "plotly.min.js"


@dataclass(frozen=True)
class Axis(PlotAxis):
    """A metric plotted against recall, and the plot files' name for it."""

    slug: str = ""


AXES = (Axis("context tokens per query", False, lambda r: r.context_tokens, slug="context"),
        Axis("IoU", True, lambda r: r.iou, log=True, slug="iou"),
        Axis("cost, $ per 1,000 queries", False, lambda r: r.cost_usd_per_1k_queries, slug="cost"))
RECALL = PlotAxis.of_metric("recall")
#: The metrics the table of Pareto-optimal configurations always shows (with latency, cost and the score).
PARETO_COLUMNS = ("recall", "iou", "mrr", "ndcg", "doc_recall", "context_tokens")
#: The metrics the table of the top configurations against the default always shows.
COMPARED = ("recall", "iou")
#: The metrics the table of the best configuration against the default always shows.
BEST_ROWS = ("recall", "precision", "iou", "precision_omega", "hit_rate", "mrr", "ndcg", "doc_recall", "context_tokens")
#: The context budgets (cl100k tokens handed to the reader per question) of the equal-budget table.
BUDGETS = (500, 1000, 2000, 4000)


def bootstrap_mean_ci(values: np.ndarray, rng: np.random.Generator, samples: int) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``."""
    index = rng.integers(0, len(values), size=(samples, len(values)))
    means = values[index].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _well_known_trials(trials: list[TrialRecord]) -> dict[tuple, list[TrialRecord]]:
    found: dict[tuple, list[TrialRecord]] = {}
    for t in trials:
        key = (t.chunker, t.params.get("size"), t.params.get("overlap"))
        if key in WELL_KNOWN:
            found.setdefault(key, []).append(t)
    return found


def write_report(run: str, out_dir: str | Path, *, storage: str | None = None, top: int = 5, bootstrap: int = 2000,
                 seed: int = 0, cache: EmbeddingCache | None = None, plotly_js: str = "directory",
                 echo: Callable[[str], None] | None = None) -> Path:
    """Write the report of every corpus study of run ``run`` (or ``RUN/CORPUS``); returns the
    markdown file. ``storage`` defaults to ``sqlite:///studies/RUN.db``.

    ``plotly_js="directory"`` writes plotly.js once, as ``plotly.min.js`` beside the plots, which
    every HTML plot loads (works offline; keep the file with the plots); ``"inline"`` makes each
    HTML plot self-contained (about 4.8 MB each); ``"cdn"`` loads plotly.js from its CDN (small
    files, needs a network to view).
    """
    study_storage = existing_run_storage(run, storage)
    with storage_errors(study_storage.display_url):
        names = run_studies(study_storage, run, where=study_storage.display_url)
    out = Path(out_dir)
    try:
        private_dir(out)
    except OSError as exc:
        raise ChunkwiseError(f"cannot create the report folder {out}: {exc.strerror}") from None
    if plotly_js == "directory":  # one copy of plotly.js for every plot of the report
        from plotly.offline import get_plotlyjs

        write_atomically(out / PLOTLY_JS, get_plotlyjs())
    sections = [f"# chunkwise report: {run}", ""]
    for name in names:
        with storage_errors(study_storage.display_url):
            study = optuna.load_study(study_name=name, storage=study_storage)
        sections += _corpus_section(study, out, top=top, bootstrap=bootstrap, seed=seed, cache=cache,
                                    plotly_js=plotly_js, echo=echo or (lambda _: None))
    path = out / "report.md"
    write_atomically(path, "\n".join(sections) + "\n")
    return path


def _corpus_section(study: optuna.Study, out: Path, *, top: int, bootstrap: int, seed: int,
                    cache: EmbeddingCache | None, plotly_js: str, echo: Callable[[str], None]) -> list[str]:
    settings = StudySettings.of(study)
    corpus_name = settings.corpus
    trials = evaluated(study)
    lines = [f"## {corpus_name} (study `{study.study_name}`)", ""]
    if not trials:
        return [*lines, "No complete trial yet.", ""]
    best = best_trial(study)
    known = _well_known_trials(trials)
    stem = corpus_name.replace("/", "_")
    echo(f"{study.study_name}: re-evaluating the top {min(top, len(trials))} configurations and the token "
         f"{BASELINE[1]}/{BASELINE[2]} baseline for confidence intervals (embeddings come from the cache)...")
    comparison, baseline = _comparison(study, settings, trials, best, top, bootstrap, seed, cache)
    echo(f"{study.study_name}: drawing the Pareto plots...")
    verdict = recommend_for_study(study)  # marked on the plots: the trial export writes
    plot_files = _plots(trials, best, None if verdict is None else verdict.recommended, known, baseline, out, stem,
                        plotly_js)
    weights = ", ".join(f"{k} {v:g}" for k, v in settings.weights.used().items())
    constraints = settings.constraints
    axes = settings.pareto
    axis_labels = " against ".join(metric_label(a) for a in axes)
    shorts = [axis.label.split(",")[0] for axis in AXES]
    extra = _weighed_beyond(settings, PARETO_COLUMNS)  # every metric the weights name has a column
    lines += [
        f"{settings.queries} queries; {len(trials)} evaluated configurations; embedder "
        f"{settings.embedder.provider}:{settings.embedder.model}; unit {settings.unit}; "
        f"weights {weights}" + (f"; constraints {constraints.describe()}" if constraints.as_dict() else "") + ".",
        "",
        f"Trials: {summarize(study).describe()}.",
        "",
        " ".join(f"![recall against {short}]({png})" for short, png in zip(shorts, plot_files[: len(AXES)])),
        "",
        "Interactive: " + ", ".join(f"[recall-{short}]({page})" for short, page in zip(shorts, plot_files[len(AXES):]))
        + ".",
        "",
        f"**Best weighted configuration**: `{best.label()}` (trial {best.number}), score {best.score:.4f}"
        + (" (the best meeting the constraints)." if constraints.as_dict() else "."),
        "",
        f"### Pareto-optimal configurations ({axis_labels}, on the search questions)",
        "",
        "| trial | configuration | recall | IoU | MRR | nDCG | doc recall | context tokens | latency ms "
        "| cost $/1k queries | score |" + "".join(f" {metric_label(name)} |" for name in extra),
        "|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(extra),
    ]
    front = pareto([tuple(_metric(t, a) for a in axes) for t in trials],
                   tuple(declared_metric(a).higher_is_better for a in axes))
    for i in front:
        r = trials[i]
        mark = " **(best)**" if r.number == best.number else ""
        if not r.feasible(constraints):
            mark += " (breaks the constraints)"
        lines.append(f"| {r.number} | {r.label()}{mark} | {r.recall:.1%} | {r.iou:.2%} | {_share(r.mrr)} | "
                     f"{_share(r.ndcg)} | {_share(r.doc_recall)} | {r.context_tokens:.0f} | {r.latency_ms:.0f} | "
                     f"{r.cost_usd_per_1k_queries:.3f} | {r.score:.4f} |"
                     + "".join(f" {_shown(name, _metric(r, name))} |" for name in extra))
    lines += ["", *_budget_lines(trials, bootstrap, seed), ""]
    lines += [*comparison, ""]
    return lines


def _metric(record: TrialRecord, name: str) -> float:
    return record.context_tokens if name == "context_tokens" else record.metric(name)


def _weighed_beyond(settings: StudySettings, shown: tuple[str, ...]) -> list[str]:
    """The metrics the study's weights name that a table does not show already (its ``shown``): a
    table adds a column, or a row, for each."""
    return [name for name in settings.weights.metrics() if name not in shown]


def _shown(name: str, value: float) -> str:
    """A value of metric ``name`` as its declaration says: a count as a number, a fraction as a percentage."""
    if np.isnan(value):
        return "n/a"
    return f"{value:,.1f}" if declared_metric(name).count else f"{value:.1%}"


def _difference(name: str, diff: float) -> str:
    """A difference in metric ``name``: in its own units for a count, in points for a fraction."""
    return f"{diff:+,.1f}" if declared_metric(name).count else f"{diff * 100:+.1f} points"


def _share(value: float) -> str:
    """A fraction as a percentage; "n/a" for a trial recorded before the metric existed."""
    return "n/a" if np.isnan(value) else f"{value:.1%}"


def best_within(trials: list[TrialRecord], budget: float) -> TrialRecord | None:
    """The configuration with the highest recall among those handing the reader at most ``budget``
    context tokens per question (ties: the higher score, then fewer tokens, then the earlier trial)."""
    fitting = [t for t in trials if t.context_tokens <= budget]
    return max(fitting, key=lambda t: (t.recall, t.score, -t.context_tokens, -t.number), default=None)


def _budget_lines(trials: list[TrialRecord], bootstrap: int, seed: int) -> list[str]:
    """The equal-budget table: per context budget, the best recall within it and its interval."""
    rng = np.random.default_rng(seed)
    lines = ["### Best recall within a context budget", "",
             "What each budget of cl100k tokens handed to the reader per question buys: the configuration with "
             "the highest recall (on the search questions) among those within it; its recall over all the "
             f"questions with a {CONFIDENCE:.0%} bootstrap interval (optimistic: chosen on the same questions).", "",
             "| budget | configuration | recall | MRR | context tokens | score |", "|---|---|---|---|---|---|"]
    for budget in BUDGETS:
        chosen = best_within(trials, budget)
        if chosen is None:
            lines.append(f"| {budget:,} | no configuration fits | | | | |")
            continue
        per_query = chosen.per_query()
        recall = f"{chosen.recall:.1%} (search questions)"
        if per_query is not None:
            low, high = bootstrap_mean_ci(per_query["recall"], rng, bootstrap)
            recall = f"{per_query['recall'].mean():.1%} [{low:.1%}, {high:.1%}]"
        lines.append(f"| {budget:,} | trial {chosen.number}: {chosen.label()} | {recall} | "
                     f"{_share(chosen.mrr)} | {chosen.context_tokens:.0f} | {chosen.score:.4f} |")
    return lines


def _plots(trials: list[TrialRecord], best: TrialRecord, recommended: TrialRecord | None,
           known: dict[tuple, list[TrialRecord]],
           baseline: TrialRecord | None, out: Path, stem: str, plotly_js: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    html = []
    for axis in AXES:
        xs = [axis.value(t) for t in trials]
        ys = [t.recall for t in trials]
        front = pareto(list(zip(ys, xs)), (True, axis.maximize))
        front = sorted(front, key=lambda i: xs[i])
        short = axis.label.split(",")[0]
        fig, ax = plt.subplots(figsize=(9.6, 4.4), dpi=110)
        ax.scatter(xs, ys, s=16, c="#b0b0b0", label="trials")
        ax.plot([xs[i] for i in front], [ys[i] for i in front], "-o", c="#1f77b4", ms=4, label="Pareto front")
        ax.scatter([axis.value(best)], [best.recall], marker="*", s=220, c="#d62728", zorder=5,
                   label=f"best score: {best.label()}")
        if recommended is not None:
            ax.scatter([axis.value(recommended)], [recommended.recall], marker="o", s=180, facecolors="none",
                       edgecolors="#2ca02c", linewidths=2, zorder=6, label=f"recommended: {recommended.label()}")
        markers = iter("s^D")
        for (chunker, size, overlap), matches in known.items():
            top_match = max(matches, key=lambda t: t.score)
            ax.scatter([axis.value(top_match)], [top_match.recall], marker=next(markers), s=60, facecolors="none",
                       edgecolors="black", zorder=4, label=f"{chunker} {size}/{overlap} (best k={top_match.k})")
        if baseline is not None:
            ax.scatter([axis.value(baseline)], [baseline.recall], marker="x", s=70, c="black", zorder=4,
                       label=f"{BASELINE_LABEL} (evaluated for this report)")
        ax.set_xlabel(axis.label)
        ax.set_ylabel("recall")
        if axis.log:
            ax.set_xscale("log")
        if axis.slug == "context":
            for budget in BUDGETS:  # the equal-budget table's budgets, for reading the plot against it
                ax.axvline(budget, color="#d0d0d0", lw=0.8, ls=":", zorder=0)
        ax.set_title(f"{stem}: recall against {short}")
        ax.grid(alpha=0.3)
        # Outside the axes: inside, the legend hid Pareto points in the corner it sat on.
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
        fig.tight_layout()
        png = f"{stem}-recall-{axis.slug}.png"
        with atomic_writer(out / png, binary=True) as stream:  # a full disk leaves no truncated plot
            fig.savefig(stream, format="png")
        plt.close(fig)
        files.append(png)

        marks = [Mark(f"{chunker} {size}/{overlap}", tuple(matches), "square-open", size=11)
                 for (chunker, size, overlap), matches in known.items()]
        if baseline is not None:
            marks.append(Mark(f"{BASELINE_LABEL} (evaluated for this report)", (baseline,), "x", size=12))
        figure = pareto_figure(trials, axis, RECALL, title=f"{stem}: recall against {short}", best=best,
                               recommended=recommended, marks=marks)
        page = png.replace(".png", ".html")
        with atomic_writer(out / page) as stream:
            figure.write_html(stream, include_plotlyjs={"inline": True}.get(plotly_js, plotly_js), full_html=True)
        html.append(page)
    return files + html


def _comparison(study: optuna.Study, settings: StudySettings, trials: list[TrialRecord], best: TrialRecord, top: int,
                bootstrap: int, seed: int, cache: EmbeddingCache | None) -> tuple[list[str], TrialRecord | None]:
    """Top configurations against the baseline with per-query bootstrap intervals, the tie
    gate's recommendation, the held-out check and the cross-validated gain.

    Per-query scores come from the trials (stored when they ran); only the baseline, and a
    trial recorded before chunkwise stored them, are evaluated here. Returns the markdown
    lines and the baseline as a record (None when skipped).
    """
    try:
        corpus, evalset = load_study_inputs(settings, study.study_name)
    except StudyError:
        return ["The corpus or queries changed since the study ran: bootstrap intervals skipped."], None
    cache = cache if cache is not None else EmbeddingCache()
    ranked = sorted(trials, key=lambda t: -t.score)[:top]
    first = EvaluationConfig.from_dict(ranked[0].config)
    base_config = EvaluationConfig(ChunkerConfig(BASELINE[0], {"size": BASELINE[1], "overlap": BASELINE[2]}).resolved(),
                                   first.embedder, RetrievalConfig(k=BASELINE_K), first.unit, first.copies)
    embedder = first.embedder.build(cache)
    occurrences = OccurrenceTable.build(evalset, [corpus])

    def per_query_of(record: TrialRecord) -> dict[str, np.ndarray]:
        stored = record.per_query()
        if stored is not None:
            return stored
        config = EvaluationConfig.from_dict(record.config)
        return evaluate(corpus, evalset, config, embedder=embedder, occurrences=occurrences).scores.at(
            config.retrieval.k)

    per_query = [per_query_of(record) for record in ranked]
    result = evaluate(corpus, evalset, base_config, embedder=embedder, occurrences=occurrences)
    baseline = result.scores.at(BASELINE_K)
    search = settings.search_mask(len(evalset))
    base = TrialRecord.from_attrs(-1, trial_attributes(result, settings.rates_for(base_config.embedder),
                                                       settings.weights, settings.scales, search=search))
    rng = np.random.default_rng(seed)
    n = len(evalset)
    compared = [*COMPARED, *_weighed_beyond(settings, COMPARED)]
    lines = [
        f"### Top {len(ranked)} configurations against the token {BASELINE[1]}/{BASELINE[2]} default (k={BASELINE_K})",
        "",
        f"Means over all {n} questions with {CONFIDENCE:.0%} bootstrap confidence intervals ({bootstrap} resamples "
        "of the questions); the differences are paired per question. These configurations were *selected* "
        "for scoring well on the search questions, so their intervals are optimistic (the winner's curse): "
        "read them with the held-out check and the cross-validated gain below. ✓ / ✗: significantly above / below "
        f"the default by the paired sign-flip test at {CONFIDENCE:.0%} (in-sample too).",
        "",
        "| configuration | " + " | ".join(metric_label(m) for m in compared) + " | "
        + " | ".join(f"Δ {metric_label(m)} vs default" for m in compared) + " |",
        "|---|" + "---|" * 2 * len(compared),
    ]
    smaller = [metric_label(m) for m in compared if not declared_metric(m).higher_is_better]
    if smaller:  # the legend's "above" is "better" for the others
        lines[-4] += f" For {', '.join(smaller)} (better when smaller), ✓ / ✗ mark significantly below / above."
    for record, scores in zip(ranked, per_query):
        cells = [_interval(m, scores.get(m), rng, bootstrap) for m in compared]
        for metric in compared:
            if metric not in scores:  # recorded before the metric existed
                cells.append("n/a")
                continue
            diff = scores[metric] - baseline[metric]
            low, high = bootstrap_mean_ci(diff, rng, bootstrap)
            # The mark says "significant", so it comes from the sign-flip test, not the interval.
            test = sign_flip_test(diff, seed=seed)
            better = test.mean > 0 if declared_metric(metric).higher_is_better else test.mean < 0
            verdict = "" if not test.significant(CONFIDENCE) else " ✓" if better else " ✗"
            if declared_metric(metric).count:
                cells.append(f"{diff.mean():+,.1f} [{low:+,.1f}, {high:+,.1f}]{verdict}")
            else:
                cells.append(f"{diff.mean() * 100:+.1f} pts [{low * 100:+.1f}, {high * 100:+.1f}]{verdict}")
        lines.append(f"| trial {record.number}: {record.label()} | " + " | ".join(cells) + " |")
    base_cells = [_interval(m, baseline[m], rng, bootstrap) for m in compared]
    lines.append(f"| {BASELINE_LABEL} | " + " | ".join(base_cells) + " |" + " |" * len(compared))
    lines += ["", *_selection_lines(study, best)]
    b, d = best, base
    lines += [
        "",
        f"**Best against the token {BASELINE[1]}/{BASELINE[2]} default** (in-sample: the search "
        "questions chose it):",
        "",
        "| metric | best | default | difference |",
        "|---|---|---|---|",
        f"| recall | {b.recall:.1%} | {d.recall:.1%} | {(b.recall - d.recall) * 100:+.1f} points |",
        f"| precision | {b.precision:.2%} | {d.precision:.2%} | {_ratio(b.precision, d.precision)} |",
        f"| IoU | {b.iou:.2%} | {d.iou:.2%} | {_ratio(b.iou, d.iou)} |",
        f"| precision-Ω | {b.precision_omega:.1%} | {d.precision_omega:.1%} | "
        f"{_ratio(b.precision_omega, d.precision_omega)} |",
        f"| hit rate | {_share(b.hit_rate)} | {_share(d.hit_rate)} | {(b.hit_rate - d.hit_rate) * 100:+.1f} points |",
        f"| MRR | {_share(b.mrr)} | {_share(d.mrr)} | {(b.mrr - d.mrr) * 100:+.1f} points |",
        f"| nDCG | {_share(b.ndcg)} | {_share(d.ndcg)} | {(b.ndcg - d.ndcg) * 100:+.1f} points |",
        f"| document recall | {_share(b.doc_recall)} | {_share(d.doc_recall)} | "
        f"{(b.doc_recall - d.doc_recall) * 100:+.1f} points |",
        f"| context tokens per query | {b.context_tokens:.0f} | {d.context_tokens:.0f} | "
        f"{_ratio(b.context_tokens, d.context_tokens)} |",
        *([f"| first-stage recall@{b.metric('rerank_candidates'):.0f} (before the reranker) | "
           f"{b.metric('first_stage_recall'):.1%} | | reranked recall@{b.k}: {b.recall:.1%} |"]
          if "first_stage_recall" in b.metrics else []),
        f"| latency (modelled) | {b.latency_ms:.0f} ms | {d.latency_ms:.0f} ms | "
        f"{_ratio(b.latency_ms, d.latency_ms)} |",
        f"| cost per 1,000 queries | ${b.cost_usd_per_1k_queries:.3f} | ${d.cost_usd_per_1k_queries:.3f} | "
        f"{_ratio(b.cost_usd_per_1k_queries, d.cost_usd_per_1k_queries)} |",
        *[f"| {metric_label(name)} | {_shown(name, _metric(b, name))} | {_shown(name, _metric(d, name))} | "
          f"{_difference(name, _metric(b, name) - _metric(d, name))} |"
          for name in _weighed_beyond(settings, BEST_ROWS)],
        f"| weighted score | {b.score:.4f} | {d.score:.4f} | {(b.score - d.score):+.4f} |",
    ]
    return lines, base


def _interval(name: str, values: np.ndarray | None, rng: np.random.Generator, bootstrap: int) -> str:
    """The mean of metric ``name`` over the questions with its bootstrap interval ("n/a" when not recorded)."""
    if values is None:
        return "n/a"
    low, high = bootstrap_mean_ci(values, rng, bootstrap)
    if declared_metric(name).count:
        return f"{values.mean():,.1f} [{low:,.1f}, {high:,.1f}]"
    return f"{values.mean():.1%} [{low:.1%}, {high:.1%}]"


def _selection_lines(study: optuna.Study, best: TrialRecord) -> list[str]:
    """The recommendation, the reasoning behind it and what the search adds out of sample (the
    statement's cross-validated gain)."""
    lines = ["### Recommendation and what tuning really gains", ""]
    verdict = recommend_for_study(study)  # the summary's, the dashboard note's and export's choice
    if verdict is not None:
        chosen = verdict.recommended
        lines += [f"**Recommended**: `{chosen.label()}` (trial {chosen.number}).", "",
                  *[f"- {line}" for line in verdict.statement()[1:] + verdict.details()], ""]
    checked = [best] + ([verdict.recommended] if verdict is not None and verdict.recommended.number != best.number
                        else [])
    if best.validation_score is not None:
        lines += ["Scores on the search questions (which chose the winner) and on the held-out questions (never "
                  "seen by the search); the difference is the optimism of picking the best:", "",
                  "| trial | configuration | search score | held-out score | optimism gap | held-out recall |",
                  "|---|---|---|---|---|---|"]
        for record in checked:
            lines.append(f"| {record.number} | {record.label()} | {record.score:.4f} | {record.validation_score:.4f} | "
                         f"{record.score - record.validation_score:+.4f} | {record.validation_recall:.1%} |")
        lines.append("")
    return lines


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.1f}x" if reference > 0 else "n/a"
