"""``chunkwise chunk``."""

from __future__ import annotations

import argparse
import sys

from .._io.files import is_stdout
from ._args import add_filter_arguments


def add_parser(commands: argparse._SubParsersAction) -> None:
    chunk = commands.add_parser(
        "chunk", help="chunk documents with an exported configuration",
        description="Chunk new documents with an exported configuration and write JSONL (text, document, "
                    "start and end offsets, token count); optionally build a persistent chromadb collection "
                    "with the configured embedder (and the BM25 index a bm25 or hybrid configuration needs), "
                    "ready to query as the configuration was scored.",
    )
    chunk.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or quoted globs")
    chunk.add_argument("--config", required=True, metavar="FILE", help="exported configuration (best.json)")
    add_filter_arguments(chunk)
    chunk.add_argument("-o", "--output", metavar="FILE", help="write chunks as JSONL here (default: stdout)")
    chunk.add_argument("--chroma", metavar="DIR", help="also build a persistent chromadb collection in DIR")
    chunk.add_argument("--collection", metavar="NAME", help="collection name (with --chroma)")
    chunk.add_argument("--replace", action="store_true", help="rebuild the collection if it exists")
    chunk.add_argument("--cache", metavar="FILE", help="embedding cache file (with --chroma)")
    chunk.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..deploy.production import chunk_documents
    from ..embedding import EmbeddingCache

    done = chunk_documents(args.config, args.paths, output=args.output, chroma=args.chroma,
                           collection=args.collection, replace=args.replace,
                           cache=EmbeddingCache(args.cache) if args.cache else None,
                           include=args.include or (), exclude=args.exclude or (), keep_links=args.keep_links)
    if done.collection is not None:
        print(f"collection {args.collection!r} in {args.chroma}: {done.collection.collection.count()} chunks, "
              f"query with {done.collection.retrieval.describe()}, k={done.collection.k}", file=sys.stderr)
    if args.output and not is_stdout(args.output):
        print(f"wrote {done.chunks} chunks to {args.output}", file=sys.stderr)
    return 0
