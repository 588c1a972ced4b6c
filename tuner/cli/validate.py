"""``chunkwise validate``."""

from __future__ import annotations

import argparse
import sys

from .._io.files import is_stdout
from ._args import add_data_arguments, load_data


def add_parser(commands: argparse._SubParsersAction) -> None:
    validate = commands.add_parser(
        "validate", help="check an evaluation set against its corpora; convert it to JSONL",
        description="Load an evaluation set (chunkwise JSONL or Chroma CSV), check that every "
                    "reference equals the document text at its offsets (a reference given as "
                    "{document, content} alone is located in its document: exactly once, tolerant of "
                    "whitespace and markdown markup), and optionally write it as chunkwise JSONL with "
                    "every offset.",
    )
    add_data_arguments(validate)
    validate.add_argument("-o", "--output", metavar="FILE", help="write the validated set as JSONL")
    validate.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data.lexical import LexicalOverlap
    from ..data.repeats import OccurrenceTable

    corpora, evalset = load_data(args)
    references = sum(len(q.references) for q in evalset)
    # With -o - the JSONL goes to stdout, so the summary goes to stderr.
    to_stdout = bool(args.output) and is_stdout(args.output)
    located = (f" ({evalset.located} located from their excerpt)" if evalset.located else "")
    print(f"{len(evalset)} queries, {references} references{located}: all match their documents",
          file=sys.stderr if to_stdout else sys.stdout)
    if repeated := OccurrenceTable.build(evalset, corpora).summary().describe():
        print(repeated, file=sys.stderr if to_stdout else sys.stdout)
    if lexical := LexicalOverlap.of(evalset):
        print(lexical.describe(), file=sys.stderr if to_stdout else sys.stdout)
    if args.output:
        evalset.write_jsonl(args.output)
        if not to_stdout:
            print(f"wrote {args.output}")
    elif evalset.repaired:
        print("nothing was written: the repairs are in memory only; add -o FILE to save the repaired "
              "evaluation set (e.g. -o fixed.jsonl)", file=sys.stderr)
    elif evalset.located:
        print("the offsets are found on every load; add -o FILE to write them out (e.g. -o queries.jsonl)",
              file=sys.stderr)
    return 0
