"""``chunkwise export``."""

from __future__ import annotations

import argparse
import sys

from .._io.files import is_stdout
from ..schema import invalid


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
                        help="trial number (default: the recommended one: the highest score, or the best baseline "
                             "when that is not significantly better on the held-out questions)")
    export.add_argument("--best", action="store_true", help="the highest-scoring trial instead of the recommended one")
    export.add_argument("--point", metavar="SETTING=VALUE,...",
                        help="the trial at another point of its inner loop (search spaces with inner_loop: true, "
                             "and a proxy's confirmations, which score every k), e.g. k=3 or "
                             "k=3,fusion=weighted,alpha=0.7; settings left out are the trial's own")
    export.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///studies/NAME.db)")
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the JSON")
    export.set_defaults(handler=run)


def parse_point(text: str) -> dict[str, str]:
    """``k=3,alpha=0.7`` as ``{"k": "3", "alpha": "0.7"}`` (the library reads the values)."""
    pairs = [item.partition("=") for item in text.split(",") if item.strip()]
    if not pairs or any(not sep or not name.strip() for name, sep, _ in pairs):
        raise invalid("--point", text, "SETTING=VALUE pairs separated by commas, e.g. k=3 or "
                      "k=3,fusion=weighted,alpha=0.7")
    point: dict[str, str] = {}
    for name, _, value in pairs:
        name = name.strip()
        if name in point:
            raise invalid(f"--point {name}", value.strip(), f"one value of each setting ({name}={point[name]} is "
                          "given too)")
        point[name] = value.strip()
    return point


def run(args: argparse.Namespace) -> int:
    from ..deploy.export import export_run_trial

    exported = export_run_trial(args.study, args.output, corpus=args.corpus, trial=args.trial, best=args.best,
                                storage=args.storage, point=None if args.point is None else parse_point(args.point))
    print(f"wrote {args.output}: trial {exported.record.number} of {exported.study} ({exported.why}), "
          f"{exported.record.describe()}, score {exported.record.score:.4f}",
          file=sys.stderr if is_stdout(args.output) else sys.stdout)
    return 0
