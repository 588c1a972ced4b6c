"""``chunkwise export``."""

from __future__ import annotations

import argparse
import sys

from .._io.files import is_stdout


def add_parser(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export", help="write the best (or a chosen) trial's configuration to a file",
        description="Write a versioned configuration (chunker and parameters, embedder, k, the metrics it "
                    "scored, corpus and evaluation-set hashes, package versions). Load it in production "
                    "with tuner.load_chunker(PATH) or `chunkwise chunk --config PATH`.",
    )
    export.add_argument("--study", required=True, metavar="NAME", help="run name (or NAME/CORPUS)")
    export.add_argument("--corpus", metavar="ID", help="corpus of the run (optional when it has one)")
    export.add_argument("--trial", type=int, metavar="N",
                        help="trial number (default: the recommended one, the cheapest configuration statistically "
                             "tied with the best)")
    export.add_argument("--best", action="store_true", help="the highest-scoring trial instead of the recommended one")
    export.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///studies/NAME.db)")
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the JSON")
    export.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..deploy.export import export_run_trial

    exported = export_run_trial(args.study, args.output, corpus=args.corpus, trial=args.trial, best=args.best,
                                storage=args.storage)
    print(f"wrote {args.output}: trial {exported.record.number} of {exported.study} ({exported.why}), "
          f"{exported.record.describe()}, score {exported.record.score:.4f}",
          file=sys.stderr if is_stdout(args.output) else sys.stdout)
    return 0
