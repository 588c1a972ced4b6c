"""Reports of a run: Pareto plots, confidence intervals and the recommendation (:mod:`.report`)."""

from .report import write_report

__all__ = ["write_report"]
