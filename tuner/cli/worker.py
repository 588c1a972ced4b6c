"""``chunkwise worker``."""

from __future__ import annotations

import argparse

from ..errors import WorkerStopped
from ..tuning.study import defaults
from ._args import add_timeout_argument, print_err, quiet_optuna, report_stop


def add_parser(commands: argparse._SubParsersAction) -> None:
    worker = commands.add_parser(
        "worker", help="join a running study from this machine",
        description="Run trials for an existing study (created by `chunkwise tune`) until it reaches its "
                    "target, e.g. on another machine sharing a PostgreSQL storage. The space, weights and "
                    "data paths come from the study; the data's hashes must match.",
    )
    worker.add_argument("--storage", required=True, metavar="URL", help="the study's SQLAlchemy URL")
    worker.add_argument("--study", required=True, metavar="NAME",
                        help="study name: NAME/CORPUS, or NAME for every corpus of that run")
    worker.add_argument("--corpus", metavar="PATH",
                        help="corpus path on this machine (default: the study's); its files are chosen with the "
                             "study's --include/--exclude patterns")
    worker.add_argument("--queries", metavar="FILE", help="evaluation set on this machine (default: the study's)")
    worker.add_argument("--n-trials", type=int, metavar="N",
                        help="raise the study's target by N trials (default: work toward the current target)")
    worker.add_argument("--jobs", type=int, default=defaults.JOBS, metavar="N",
                        help=f"worker processes on this machine ({defaults.JOBS})")
    worker.add_argument("--seed", type=int, default=None, help="sampler seed (default: random)")
    worker.add_argument("--cache", metavar="FILE", help="embedding cache file")
    add_timeout_argument(worker)
    worker.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..tuning import join_run
    from ..tuning.study import absolute_url, parse_duration

    quiet_optuna()
    from ..tuning.run import stop_handlers

    timeout = parse_duration(args.timeout, "--timeout") if args.timeout is not None else None
    try:
        with stop_handlers():
            join_run(absolute_url(args.storage), args.study, n_trials=args.n_trials, jobs=args.jobs, seed=args.seed,
                     cache=args.cache, corpus_path=args.corpus, queries_path=args.queries, timeout=timeout,
                     echo=print_err)
    except (KeyboardInterrupt, WorkerStopped) as stop:
        return report_stop(stop, "the study")
    return 0
