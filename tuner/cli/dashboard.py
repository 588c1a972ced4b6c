"""``chunkwise dashboard``."""

from __future__ import annotations

import argparse

from ..errors import ChunkwiseError
from ._args import print_err


def add_parser(commands: argparse._SubParsersAction) -> None:
    dashboard = commands.add_parser(
        "dashboard", help="serve optuna-dashboard on a run's storage",
        description="Serve optuna-dashboard on the studies' storage: trials with their metrics as user "
                    "attributes, each corpus's Pareto front (recall against context tokens, unless the study "
                    "chose other axes) with chunkwise's own plot of it marking the recommended trial, and "
                    "a note per study. Objectives a study made by an older chunkwise left unnamed are "
                    "named first.",
    )
    dashboard.add_argument("--storage", metavar="URL",
                           help="SQLAlchemy URL (default: the only studies/*.db in this folder)")
    dashboard.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    dashboard.add_argument("--port", type=int, default=8080, help="port (8080)")
    dashboard.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..tuning.study.dashboard import label_objectives, serve_dashboard
    from ..tuning.study.storage import absolute_url, check_port_free, make_storage, only_local_storage

    url = absolute_url(args.storage) if args.storage else only_local_storage()
    check_port_free(args.host, args.port)
    storage = make_storage(url)
    if said := label_objectives(storage, storage.display_url):
        print_err(said)
    print_err(f"optuna-dashboard on {storage.display_url}: http://{args.host}:{args.port}/ (Ctrl-C to stop)")
    try:
        serve_dashboard(storage, args.host, args.port)
    except OSError as exc:
        raise ChunkwiseError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        pass
    return 0
