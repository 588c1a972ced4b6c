"""A corpus nobody tuned chunkwise on: Valgrind's manual, with 26 hand-written questions (issue 42).

Eleven pages of the HTML manual that Debian's ``valgrind`` package installs under
``/usr/share/doc/valgrind/html`` (:data:`PAGES`: the core manual, its advanced topics, the FAQ,
the quick start, and the manuals of Memcheck, Cachegrind, Callgrind, Helgrind, DRD, Massif and
DHAT), about 560,000 characters as chunkwise converts them. The questions
(``benchmarks/data/valgrind/questions.yaml``) were written for this benchmark by reading those pages,
in a user's words rather than the manual's; each names its page and one or two verbatim excerpts.
No chunkwise default or search space was chosen by looking at it: it is the fifth corpus of
``benchmarks/scale/proxy_agreement.py --valgrind ROOT``.

    python benchmarks/corpora/valgrind.py build [--root DIR] [--source /usr/share/doc/valgrind/html]

``build`` copies the pages into ``ROOT/raw`` (default ``~/.cache/chunkwise-bench/valgrind``),
prints each one's sha256 beside the one the questions were written against (a different Debian
version may move an excerpt; the build then says which), loads them as chunkwise does (corpus
``valgrind``), locates every excerpt exactly once (any whitespace between its words, a backtick
optional: ``_corpus.locate``) and writes ``ROOT/questions.jsonl``; it ends with ``chunkwise
validate``. A question any of whose excerpts is not found is left out and reported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA
from benchmarks._corpus import BenchError, build_located, copy_pinned

CORPUS = "valgrind"
QUESTIONS = DATA / "valgrind" / "questions.yaml"
DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / CORPUS
DEFAULT_SOURCE = Path("/usr/share/doc/valgrind/html")
#: The pages, with the sha256 of Debian's valgrind 1:3.19.0-1 copies the questions were written on.
PAGES = {
    "cg-manual.html": "b5ae35e64c23dbbfa416e050198a43b964f73d91efc65bd61f1e4508709a7ac6",
    "cl-manual.html": "07376736097b18f507c4679209e427ba39f946509994ff1b3e75d5b3e7faa794",
    "dh-manual.html": "0c8a58299169e856e92b11a7e10904bf1dd58f8a50bd5d3dfecf7d57d9191e4c",
    "drd-manual.html": "e12c2f5692b4bb6d319d9d193a1a41d57f828d380c0cc8325aa500c63fded71c",
    "faq.html": "c91ad7b15297bb1c746c1fec325c31ea093b1db542dcc4e9ee44be617620cba7",
    "hg-manual.html": "495f152c6303b8191f115d9073228984311877f538fed84e420a24cc17a4d9d2",
    "manual-core-adv.html": "8d3dbb5558ce5c70e17b2dd46e8efd73d837b42efcc98d8e7103b76123c374b6",
    "manual-core.html": "c66d6de5436219059c0880459bfbc9505cfcc1f9abf422906b92174e0aa56f88",
    "mc-manual.html": "b3798d930e99064295600ee98156bf8f76d1bba711c9ac60702bf3134f623950",
    "ms-manual.html": "16d9269ef80f9b57794408b6ff332291ae2155b771de41f24e2431111c2e65b7",
    "quick-start.html": "2647941ea76d5b40feb2971d687da7c622a5babcfe694f2dbd702de78a8c1b66",
}


def build(root: Path, source: Path) -> int:
    copy_pinned(PAGES, source, root / "raw", lambda page: f"{source / page} not found: install Debian's valgrind "
                "package (apt-get install valgrind) or give --source")
    return build_located(root, root / "raw", CORPUS, QUESTIONS)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="copy the pages, locate the excerpts, write questions.jsonl")
    build_parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"where to build ({DEFAULT_ROOT})")
    build_parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                              help=f"the installed HTML manual ({DEFAULT_SOURCE})")
    return parser


def main() -> int:
    args = parser().parse_args()
    try:
        return build(args.root.expanduser().resolve(), args.source)
    except BenchError as exc:
        print(f"valgrind: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
