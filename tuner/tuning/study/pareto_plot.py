"""The interactive Pareto plot of a study: every evaluated trial on two metrics, coloured by its
weighted score, the front on those two metrics, and the configurations a reader looks for marked
and named (the recommended one, the best score, the defaults and baselines).

One figure, two readers: the report's HTML plots (:mod:`tuner.reporting.report`) and the plot
chunkwise adds to each study in optuna-dashboard (:mod:`.dashboard`). optuna-dashboard's own Pareto
plot has no axis titles, lets its toolbar cover its colour bars' labels and cannot mark a trial;
this one has axis titles, keeps its colour bar below the toolbar and its legend under the axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...evaluation.registry import metric
from .records import TrialRecord

if TYPE_CHECKING:
    import plotly.graph_objects as go

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
