"""``chunkwise review``."""

from __future__ import annotations

import argparse

from ..errors import ChunkwiseError, WorkerStopped
from ._args import add_filter_arguments, print_err


def add_parser(commands: argparse._SubParsersAction) -> None:
    review = commands.add_parser(
        "review", help="review, edit and write questions in a local page beside their documents",
        description="Serve a local page (127.0.0.1, a random port, a secret token in the printed address) that "
                    "shows each question beside its document with its excerpt highlighted and its provenance; "
                    "accept, reject or edit it, select text to set or add an excerpt, or write a new question "
                    "from a selection. Every action is saved to the questions file at once, atomically; rejected "
                    "questions stay in the file and are left out by tune, evaluate and validate.",
    )
    review.add_argument("--corpus", required=True, metavar="[NAME=]PATH",
                        help="the corpus the questions are about: a file, a folder or a quoted glob")
    add_filter_arguments(review)
    review.add_argument("--queries", required=True, metavar="FILE",
                        help="the questions (chunkwise JSONL); created by the first new question if missing")
    review.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (127.0.0.1: this machine only; requests must name it, or "
                             "localhost, as their Host)")
    review.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    review.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data.corpus import load_corpus, parse_corpus_spec
    from ..review import ReviewServer, ReviewStore, serve_review
    from ..tuning.run import stop_handlers

    if not 0 <= args.port <= 65535:
        raise ChunkwiseError(f"--port {args.port}: a port is a number from 0 (a free one) to 65535")
    if not args.queries.strip():  # `--queries "$FILE"` with FILE unset: the path would be the current folder
        raise ChunkwiseError("--queries is empty: give the path of the questions file to review")
    if not args.host.strip():  # `--host "$HOST"` with HOST unset: the socket library would bind every interface
        raise ChunkwiseError("--host is empty: give the address to listen on (127.0.0.1, this machine only; "
                             "0.0.0.0 for every interface)")
    name, path = parse_corpus_spec(args.corpus)
    corpus = load_corpus(path, name, include=args.include or (), exclude=args.exclude or (),
                         keep_links=args.keep_links)
    store = ReviewStore(args.queries, corpus)
    opened = store.open()
    try:
        server = ReviewServer(store, args.host, args.port)
    except OSError as exc:
        raise ChunkwiseError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}") from None
    print_err(f"{args.queries}: {opened.describe()}")
    print(f"review {args.queries} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        with stop_handlers():
            serve_review(server)
    except (KeyboardInterrupt, WorkerStopped):
        pass
    print_err(f"review stopped; every action is saved in {args.queries}")
    return 0
