"""``chunkwise dashboard``."""

from __future__ import annotations

import argparse
import contextlib

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
    dashboard.add_argument("--port", type=int, default=8080,
                           help="port (8080; 0: a free port, which the printed address names)")
    dashboard.set_defaults(handler=run)


#: The ports a server may listen on; 0 asks the system for a free one.
MAX_PORT = 65535


def run(args: argparse.Namespace) -> int:
    from ..tuning.outcome import dashboard_server, serve_dashboard
    from ..tuning.study import existing_storage, label_objectives, only_local_storage

    if not 0 <= args.port <= MAX_PORT:
        raise ChunkwiseError(f"--port {args.port} is not a port: give 1 to {MAX_PORT} (or 0 for a free one)")
    # A dashboard reads studies: a storage that does not exist is refused, never created empty.
    storage = existing_storage(args.storage or only_local_storage())
    server = dashboard_server(storage, args.host, args.port)
    try:
        if said := label_objectives(storage, storage.display_url):
            print_err(said)
        host = f"[{args.host}]" if ":" in args.host else args.host
        print_err(f"optuna-dashboard on {storage.display_url}: http://{host}:{server.server_port}/ (Ctrl-C to stop)")
    except BaseException:
        server.server_close()
        raise
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a dashboard is stopped
        serve_dashboard(server)
    return 0
