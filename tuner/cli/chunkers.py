"""``chunkwise chunkers``."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    chunkers = commands.add_parser("chunkers", help="list chunkers and their parameters")
    chunkers.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..chunkers import chunker_class, chunker_names

    for name in chunker_names():
        cls = chunker_class(name)
        summary = (cls.__doc__ or "").strip().split("\n\n")[0].replace("``", "")
        marker = " (semantic: embeds units with the configured embedder)" if cls.needs_embedder else ""
        print(f"{name}{marker}\n  {' '.join(summary.split())}")
        rows = []
        for param_name, spec in cls.param_specs().items():
            field = cls.__dataclass_fields__[param_name]
            value = field.default_factory() if callable(field.default_factory) else field.default
            rows.append((param_name, spec.describe(), repr(list(value) if isinstance(value, tuple) else value),
                         spec.help))
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for row in rows:
            print("    " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
        print()
    return 0
