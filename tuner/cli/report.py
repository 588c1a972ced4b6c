"""``chunkwise report``."""

from __future__ import annotations

import argparse

from ._args import print_err


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report", help="write Pareto plots and a markdown summary of a run",
        description="For each corpus of a run: recall against context tokens, IoU and cost (PNG and "
                    "interactive HTML) with the best configuration and well-known defaults marked, and a "
                    "markdown summary with the Pareto-optimal configurations, the best against the token "
                    "800/400 default, and bootstrap confidence intervals over queries.",
    )
    report.add_argument("--study", required=True, metavar="NAME", help="run name (or NAME/CORPUS)")
    report.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///studies/NAME.db)")
    report.add_argument("-o", "--output", default="report", metavar="DIR", help="output folder (./report)")
    report.add_argument("--top", type=int, default=5, help="configurations with confidence intervals (5)")
    report.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (2000)")
    report.add_argument("--cache", metavar="FILE", help="embedding cache file")
    report.add_argument("--plotly", choices=("directory", "inline", "cdn"), default="directory",
                        help="how HTML plots get plotly.js: one plotly.min.js written beside them (directory, the "
                             "default: offline), embedded in each (inline: ~4.8 MB each) or from its CDN")
    report.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..embedding import EmbeddingCache
    from ..reporting.report import write_report

    cache = EmbeddingCache(args.cache) if args.cache else None
    path = write_report(args.study, args.output, storage=args.storage, top=args.top, bootstrap=args.bootstrap,
                        cache=cache, plotly_js=args.plotly, echo=print_err)
    print_err(f"wrote {path} and its plots")
    return 0
