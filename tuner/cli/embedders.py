"""``chunkwise embedders``: every embedding model chunkwise offers by name, and whether it is installed."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    embedders = commands.add_parser("embedders", help="list embedding models: languages, window, dimension, installed")
    embedders.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..embedding.registry import list_embedders

    for row in list_embedders():
        print(f"{row.name}\n  languages: {row.languages}\n  input window: {row.window}\n"
              f"  dimension: {row.dimension}\n  {row.status}")
    print("\n(give a name to --embedder, or PROVIDER:MODEL for another model of a provider: "
          "sentence-transformers:/path/to/model, openai:MODEL)")
    return 0
