"""What optuna-dashboard shows of a chunkwise study beyond Optuna's own records: chunkwise's Pareto
plot with the recommended trial marked, and the dashboard's server (its objectives are named when
the study is opened: :mod:`..study.naming`).

optuna-dashboard's own Pareto plot has no axis titles and cannot mark a trial, so each run adds
chunkwise's plot to the study as a user-defined plot, where it writes the study's note
(:func:`save_pareto_plot`).

**The Pareto plot** (:func:`pareto_figure`): every evaluated trial on two metrics, coloured by its
weighted score, the front on those two metrics, and the configurations a reader looks for marked
and named (the recommended one, the best score, the defaults and baselines). One figure, two
readers: the report's HTML plots (:mod:`tuner.reporting.report`) and the dashboard. It has axis
titles, keeps its colour bar below plotly's toolbar and its legend under the axes.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage

from ..._faults import fault_point, hold_point
from ...errors import ChunkwiseError, option
from ...evaluation.registry import label as metric_label
from ...evaluation.registry import metric
from ..core.records import PARETO_PLOT_ATTR, TrialRecord, best_trial, evaluated
from ..study.settings import StudySettings

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    import plotly.graph_objects as go

    from .selection import StudyRecommendation
    from .summary import CorpusOutcome

#: Optuna's tables that hold a study and its system attributes (its RDB schema, kept by its
#: migrations since Optuna 1): the plot is written to them in one transaction.
_STUDIES = sa.table("studies", sa.column("study_id"))
_STUDY_SYSTEM_ATTRS = sa.table("study_system_attributes", sa.column("study_id"), sa.column("key"),
                               sa.column("value_json"))


#: Where the colour bar ends, as a share of the plot's height from its bottom: plotly draws its
#: toolbar at the top right, where a full-height colour bar's title and top labels sat under it.
COLOUR_BAR_TOP = 0.78
#: Room above the axes for the title and the toolbar (pixels).
TOP_MARGIN = 64
RECOMMENDED_COLOUR = "#2ca02c"
BEST_COLOUR = "#d62728"


@dataclass(frozen=True)
class PlotAxis:
    """A metric on one axis: its title, which way is better, and how to read it off a trial."""

    label: str
    maximize: bool
    value: Callable[[TrialRecord], float]
    log: bool = False

    @classmethod
    def of_metric(cls, name: str) -> PlotAxis:
        """Metric ``name`` as the metric registry declares it (label, direction)."""
        declared = metric(name)
        if name == "context_tokens":  # older trials recorded it under another name (TrialRecord knows)
            return cls(declared.label, declared.higher_is_better, lambda record: record.context_tokens)
        return cls(declared.label, declared.higher_is_better, lambda record: record.metric(name))

    def title(self) -> str:
        """The axis title: the metric and which way is better."""
        return f"{self.label} ({'higher' if self.maximize else 'lower'} is better)"


@dataclass(frozen=True)
class Mark:
    """Trials drawn with a symbol and a legend entry of their own (a default, a baseline)."""

    name: str
    trials: tuple[TrialRecord, ...]
    symbol: str
    colour: str = "black"
    size: int = 12


def pareto(points: list[tuple[float, float]], maximize: tuple[bool, bool]) -> list[int]:
    """Indices of the non-dominated points, sorted by the first coordinate."""
    signs = np.array([1 if m else -1 for m in maximize], dtype=float)
    values = np.asarray(points, dtype=float) * signs
    front = [i for i, p in enumerate(values)
             if not any(np.all(q >= p) and np.any(q > p) for q in values)]
    return sorted(front, key=lambda i: points[i][0])


def pareto_figure(trials: Sequence[TrialRecord], x: PlotAxis, y: PlotAxis, *, title: str,
                  best: TrialRecord | None = None, recommended: TrialRecord | None = None,
                  marks: Sequence[Mark] = ()) -> go.Figure:
    """``trials`` on ``x`` and ``y``, coloured by weighted score, their front on these two metrics,
    ``recommended`` ringed and named on the plot, ``best`` starred, and each of ``marks``."""
    import plotly.graph_objects as go

    def hover(record: TrialRecord) -> str:
        baseline = f" (baseline {record.baseline})" if record.baseline else ""
        return f"trial {record.number}: {record.label()}{baseline}<br>score {record.score:.4f}"

    def point(record: TrialRecord) -> tuple[float, float]:
        return x.value(record), y.value(record)

    xs = [x.value(t) for t in trials]
    ys = [y.value(t) for t in trials]
    front = sorted(pareto(list(zip(ys, xs)), (y.maximize, x.maximize)), key=lambda i: xs[i])
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers", name="trials", showlegend=False,  # the colour bar says what they are
        hovertext=[hover(t) for t in trials], hoverinfo="text+x+y",
        marker={"color": [t.score for t in trials], "colorscale": "Blues", "size": 8, "showscale": True,
                "line": {"width": 0.5, "color": "#707070"},
                "colorbar": {"title": {"text": "score"}, "len": COLOUR_BAR_TOP, "y": 0, "yanchor": "bottom",
                             "thickness": 14}}))
    figure.add_trace(go.Scatter(x=[xs[i] for i in front], y=[ys[i] for i in front], mode="lines",
                                name="Pareto front", hoverinfo="skip", line={"color": "#1f77b4"}))
    if best is not None:
        figure.add_trace(go.Scatter(x=[point(best)[0]], y=[point(best)[1]], mode="markers",
                                    name=f"best score: trial {best.number}", hovertext=[hover(best)],
                                    hoverinfo="text+x+y",
                                    marker={"symbol": "star", "size": 16, "color": BEST_COLOUR}))
    for mark in marks:
        figure.add_trace(go.Scatter(
            x=[point(t)[0] for t in mark.trials], y=[point(t)[1] for t in mark.trials], mode="markers",
            name=mark.name, hovertext=[f"{mark.name}<br>{hover(t)}" for t in mark.trials], hoverinfo="text+x+y",
            marker={"symbol": mark.symbol, "size": mark.size, "color": mark.colour, "line": {"width": 2}}))
    if recommended is not None:
        figure.add_trace(go.Scatter(
            x=[point(recommended)[0]], y=[point(recommended)[1]], mode="markers",
            name=f"recommended: trial {recommended.number}", hovertext=[hover(recommended)], hoverinfo="text+x+y",
            marker={"symbol": "circle-open", "size": 20, "color": RECOMMENDED_COLOUR, "line": {"width": 3}}))
        figure.add_annotation(_named(recommended, f"recommended: trial {recommended.number}", x, y, xs, ys))
    figure.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left"},
        xaxis={"title": {"text": x.title()}, "type": "log" if x.log else "linear"},
        yaxis={"title": {"text": y.title()}, "type": "log" if y.log else "linear"},
        # Under the axes, across: at the right it took the plot's width in a dashboard card.
        legend={"orientation": "h", "x": 0.0, "y": -0.18, "xanchor": "left", "yanchor": "top"},
        margin={"t": TOP_MARGIN})
    return figure


def _named(record: TrialRecord, text: str, x: PlotAxis, y: PlotAxis, xs: Sequence[float],
           ys: Sequence[float]) -> dict:
    """An arrow naming ``record``'s point, its text towards the middle of the plot (a point near
    an edge keeps its name inside the axes)."""
    def position(axis: PlotAxis, values: Sequence[float]) -> tuple[float, float]:
        """The point's coordinate as plotly places it (log axes: in decades) and its share of the range."""
        scaled = [math.log10(v) if axis.log else v for v in values if math.isfinite(v) and (v > 0 or not axis.log)]
        value = axis.value(record)
        at = math.log10(value) if axis.log else value
        low, high = min(scaled, default=at), max(scaled, default=at)
        return at, 0.5 if high == low else (at - low) / (high - low)

    (px, share_x), (py, share_y) = position(x, xs), position(y, ys)
    return {"x": px, "y": py, "text": text, "showarrow": True, "arrowhead": 2, "arrowcolor": RECOMMENDED_COLOUR,
            "font": {"color": RECOMMENDED_COLOUR}, "bgcolor": "rgba(255,255,255,0.8)",
            "ax": -60 if share_x > 0.5 else 60, "ay": 40 if share_y > 0.5 else -40}


def save_pareto_plot(storage: RDBStorage, study: optuna.Study, recommendation: StudyRecommendation | None,
                     settings: StudySettings | None = None) -> None:
    """Write chunkwise's Pareto plot of ``study`` to its optuna-dashboard plots, replacing the one
    an earlier run wrote: the study's first two Pareto axes (recall against context tokens by
    default), the recommended trial ringed and named, the best score starred, the token 800/400
    default and the best baseline marked.

    optuna-dashboard stores a plot as many study attributes (a slice of its JSON each), and
    Optuna's storage writes one attribute per transaction: a dashboard reading in between, or a
    run killed in between, would show a broken plot. So the attributes optuna-dashboard's own
    ``save_plotly_graph_object`` makes are written here in one transaction, with the earlier
    plot's removed.
    """
    trials = evaluated(study)
    if not trials:
        return
    settings = settings if settings is not None else StudySettings.of(study)
    y, x = (PlotAxis.of_metric(axis) for axis in settings.pareto[:2])
    marks = []
    if recommendation is not None:
        default = recommendation.default_trial
        baseline = recommendation.best_baseline
        if default is not None:
            also = ", best baseline" if baseline == default else ""
            marks.append(Mark(f"token 800/400 default{also}: trial {default}", (recommendation.records[default],),
                              "x-thin-open", size=14))
        if baseline is not None and baseline != default:
            marks.append(Mark(f"best baseline: trial {baseline}", (recommendation.records[baseline],),
                              "diamond-open"))
    figure = pareto_figure(trials, x, y, title=f"chunkwise: {y.label} against {x.label}", best=best_trial(study),
                           recommended=None if recommendation is None else recommendation.recommended, marks=marks)
    _replace_plot(storage, storage.get_study_id_from_name(study.study_name), _plot_attrs(figure))


def _plot_attrs(figure: go.Figure) -> dict[str, Any]:
    """The study attributes optuna-dashboard stores ``figure`` as (by its own function, into a
    study in memory), under :data:`PARETO_PLOT_ATTR`."""
    import optuna_dashboard

    memory = optuna.storages.InMemoryStorage()
    said = logging.getLogger(type(memory).__module__)  # "A new study created in memory": not the user's study
    level = said.level
    said.setLevel(logging.WARNING)
    try:
        study_id = memory.create_new_study([optuna.study.StudyDirection.MINIMIZE])
    finally:
        said.setLevel(level)
    scratch = optuna.load_study(study_name=memory.get_study_name_from_id(study_id), storage=memory)
    optuna_dashboard.save_plotly_graph_object(scratch, figure, graph_object_id=PARETO_PLOT_ATTR)
    return memory.get_study_system_attrs(study_id)


def _replace_plot(storage: RDBStorage, study_id: int, attrs: dict[str, Any]) -> None:
    """Replace the plot's attributes of study ``study_id`` by ``attrs``, in one transaction (the
    study's row locked first, so two runs ending together write one after the other)."""
    prefix = _common_prefix(attrs)
    table = _STUDY_SYSTEM_ATTRS
    with storage.engine.begin() as connection:
        connection.execute(sa.select(_STUDIES.c.study_id).where(_STUDIES.c.study_id == study_id).with_for_update())
        connection.execute(sa.delete(table).where(table.c.study_id == study_id,
                                                  table.c.key.startswith(prefix, autoescape=True)))
        connection.execute(sa.insert(table), [{"study_id": study_id, "key": key, "value_json": json.dumps(value)}
                                              for key, value in attrs.items()])
        fault_point("mid_plot")


def _common_prefix(attrs: dict[str, Any]) -> str:
    """What every key of a plot's attributes starts with (``...:chunkwise-pareto:``, each key then
    ends with its slice's number), checked: the old plot's keys are found by it."""
    prefixes = {key.rsplit(":", 1)[0] + ":" for key in attrs}
    if len(prefixes) != 1 or PARETO_PLOT_ATTR not in next(iter(prefixes)):
        raise ChunkwiseError(f"this optuna-dashboard stores a plot under keys chunkwise does not know "
                             f"({', '.join(sorted(attrs)[:2])}, ...): the study's Pareto plot was not written")
    return prefixes.pop()


def dashboard_server(storage: RDBStorage, host: str, port: int) -> WSGIServer:
    """optuna-dashboard on ``storage``, listening on ``host:port`` (``port`` 0: a free port the
    system picks; ``server.server_port`` says which) but not answering yet (:func:`serve_dashboard`);
    a port that cannot be had is a :class:`ChunkwiseError` naming it.

    Binding here, once, is the check that the port is free: the socket is the server's own, with its
    ``SO_REUSEADDR``, so the port a dashboard just left (its connections in TIME_WAIT) serves again
    at once, and no other process can take it between a check and the server's bind.
    """
    import socket
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    import optuna_dashboard

    class Handler(WSGIRequestHandler):
        def address_string(self) -> str:  # no reverse DNS lookup per request
            return str(self.client_address[0])

    class Server(WSGIServer):  # an IPv6 address (``::1``) needs an IPv6 socket
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    app = optuna_dashboard.wsgi(storage)

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        hold_point("answering")
        return app(environ, start_response)

    try:
        return make_server(host, port, answer, server_class=Server, handler_class=Handler)
    except OSError as exc:  # busy, not this machine's address, an unknown host name
        raise ChunkwiseError(f"cannot serve on {host}:{port}: {exc.strerror or exc} "
                             f"(pick another {option('port')} or {option('host')})") from None


def serve_dashboard(server: WSGIServer) -> None:
    """Answer requests on ``server`` (:func:`dashboard_server`) until Ctrl-C or SIGTERM.

    The server answers in a thread of its own while the main thread waits: wsgiref answers an
    exception raised while it handles a request (a signal arriving mid-answer raises there when the
    main thread serves) by printing it and serving on, so a stop could be lost. Here it always
    reaches the waiting main thread, and the server shuts down before the exception goes on.
    """
    import threading

    serving = threading.Thread(target=server.serve_forever, name="optuna-dashboard", daemon=True)
    serving.start()
    try:
        while serving.is_alive():
            serving.join(0.5)
    finally:
        server.shutdown()
        server.server_close()


def write_note(study: optuna.Study, result: CorpusOutcome, settings: StudySettings | None = None) -> None:
    """The study's markdown note in optuna-dashboard: corpus, queries, weights, best configuration."""
    import optuna_dashboard

    settings = settings if settings is not None else StudySettings.of(study)
    weights = ", ".join(f"{k} {v:g}" for k, v in settings.weights.used().items())
    axes = " against ".join(metric_label(axis) for axis in settings.pareto)
    limits = settings.constraints.describe()
    summary = result.summary
    lines = [
        f"## chunkwise study `{study.study_name}`",
        "",
        f"- **corpus**: `{settings.corpus}` ({settings.corpus_path})",
        f"- **queries**: {settings.queries} ({settings.queries_path})",
        f"- **embedder**: {settings.embedder.provider}:{settings.embedder.model}; unit: {settings.unit}",
        f"- **weights**: {weights}",
        f"- **trials**: {summary.describe()}, {summary.duplicates} repeated proposals pruned",
        "",
        f"Objectives: {axes} (the Pareto front). Best = highest weighted `score` user attribute"
        + (f" among the trials meeting the constraints ({limits})." if limits else "."),
        "",
    ]
    if result.recommendation is not None:
        statement = result.recommendation.statement() + result.recommendation.details()
        chosen = result.recommended
        lines += [f"### Recommended: trial {chosen.number}", "", f"`{chosen.describe()}`", "",
                  *[f"- {line}" for line in statement[1:]], ""]
    best = best_trial(study)
    if best is not None:
        lines += [
            f"### Highest score: trial {best.number}",
            "",
            f"`{best.describe()}`",
            "",
            "| score | recall | IoU | precision-Ω | latency | cost / 1k queries |",
            "|---|---|---|---|---|---|",
            f"| {best.score:.4f} | {best.recall:.1%} | {best.iou:.2%} | {best.precision_omega:.1%} "
            f"| {best.latency_ms:.0f} ms | ${best.cost_usd_per_1k_queries:.3f} |",
            "",
        ]
        if held_out := best.validation_line():
            lines += [held_out, ""]
    optuna_dashboard.save_note(study, "\n".join(lines))
