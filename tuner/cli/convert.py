"""``chunkwise convert``."""

from __future__ import annotations

import argparse

from ._args import add_filter_arguments


def add_parser(commands: argparse._SubParsersAction) -> None:
    convert = commands.add_parser(
        "convert", help="convert documents (PDF, HTML, DOCX, ...) to the text chunkwise reads",
        description="Convert a file, folder or glob of documents to text exactly as every other command reads them, "
                    "and write each document's text to DIR/<its path>.md (text files are copied as they are): "
                    "the text to read, and to write evaluation-set references against. References keep the "
                    "original path as their document id (report.pdf, not report.pdf.md).",
    )
    convert.add_argument("source", metavar="SRC", help="a file, a folder or a quoted glob")
    convert.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write the texts into")
    add_filter_arguments(convert)
    convert.add_argument("--stats", action="store_true",
                         help="print per converted file the share of its text removed as furniture")
    convert.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data.convert import furniture_report, write_text_corpus
    from ..data.corpus import load_corpus

    corpus = load_corpus(args.source, include=args.include or (), exclude=args.exclude or (),
                         keep_links=args.keep_links)
    written = write_text_corpus(corpus, args.output)
    converted = sum(d.conversion is not None for d in corpus)
    print(f"wrote {len(written)} document text(s) to {args.output} ({converted} converted, "
          f"{len(written) - converted} text file(s) copied); references use the original paths as document ids")
    if args.stats:
        print(furniture_report(corpus))
    return 0
