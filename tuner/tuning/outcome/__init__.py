"""What a user reads of a study, above the study and below the run: THE recommendation
(:mod:`.selection`), what the search adds and whether the rest of a budget is worth it
(:mod:`.futility`), what a stronger embedder buys (:mod:`.embedders`), the summary a run prints
(:mod:`.summary`) and the dashboard's Pareto plot and server (:mod:`.dashboard`)."""


# The names used from outside tuning/ (tests/test_structure.py: they import through here).
from .dashboard import Mark, PlotAxis, dashboard_server, pareto, pareto_figure, serve_dashboard
from .selection import StudyRecommendation, recommend_for_study
from .summary import CorpusOutcome, format_outcomes, summarize

__all__ = [
    "CorpusOutcome", "Mark", "PlotAxis", "StudyRecommendation", "dashboard_server", "format_outcomes", "pareto",
    "pareto_figure", "recommend_for_study", "serve_dashboard", "summarize",
]
