"""Body text kept by HTML conversion, per documentation generator, on real pages.

For each generator of ``benchmarks/data/conversion_coverage.yaml`` (DocBook, Sphinx, MkDocs,
Javadoc, rustdoc, mdBook, Doxygen, pandoc), pages that a Debian package installed under
``/usr/share/doc`` are converted with chunkwise (uncached) and compared with a reference made
without chunkwise's rules: the page's visible body text (no ``head``, script, style, hidden
elements) with the hand-listed furniture of that generator left out (navigation, header,
footer, table of contents, search, permalink signs). Words are ``\\w+`` runs, lower-cased,
counted as a multiset, so order and markdown syntax do not matter:

* **body kept** = reference words found in the converted text / reference words;
* **furniture left** = words of the left-out furniture that the converted text holds beyond
  the reference's / furniture words.

Prints one row per generator (word-weighted), the pages under 90% kept, and the pages with
the least kept. A generator whose package is not installed is skipped (named on stderr);
install them with::

    apt-get install postgresql-doc-15 python3.11-doc mkdocs-doc libcommons-lang3-java-doc \\
        rust-doc libjson-c-doc doxygen-doc bup-doc

    python benchmarks/conversion/conversion_coverage.py [--pages-shown 8] [--count N] [--only TEXT]

With ``PYTHONPATH`` pointing at another checkout, the same pages measure that version of
chunkwise (the "before" column of BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

import yaml

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA

GENERATORS = DATA / "conversion_coverage.yaml"
#: Pages whose reference holds fewer words are left out (redirects, empty index stubs).
MIN_WORDS = 50
WORD = re.compile(r"\w+")
HIDDEN = re.compile(r"display\s*:\s*none", re.IGNORECASE)


def words(text: str) -> Counter:
    return Counter(w.lower() for w in WORD.findall(text))


def reference(path: Path, furniture: list[str]) -> tuple[Counter, Counter]:
    """The words a reader reads as the page's document, and the words of its furniture."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_bytes(), "lxml")
    for tag in soup(["head", "script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    for tag in soup.find_all(True):
        if not tag.decomposed and (tag.has_attr("hidden") or HIDDEN.search(tag.get("style") or "")):
            tag.decompose()
    left_out: Counter = Counter()
    for selector in furniture:
        for tag in soup.select(selector):
            if not tag.decomposed:
                left_out += words(tag.get_text(" "))
                tag.decompose()
    return words(soup.get_text(" ")), left_out


def pages(entry: dict) -> list[Path]:
    root = Path(entry["root"])
    found = sorted(p for p in root.glob(entry["pages"]) if p.is_file())
    step = max(1, len(found) // entry["count"])
    chosen = found[::step][: entry["count"]]
    for name in entry.get("named", ()):
        if (root / name).is_file() and root / name not in chosen:
            chosen.append(root / name)
    return chosen


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages-shown", type=int, default=8, help="pages with the least body kept to list (8)")
    parser.add_argument("--count", type=int, help="pages per generator (default: each entry's count)")
    parser.add_argument("--only", help="only the generators whose name holds this text")
    return parser


def main() -> int:
    args = parser().parse_args()
    warnings.simplefilter("ignore")
    from tuner.data.convert import convert_file

    rows, low, everything = [], [], []
    totals = Counter()
    for entry in yaml.safe_load(GENERATORS.read_text(encoding="utf-8"))["generators"]:
        if args.only and args.only not in entry["generator"]:
            continue
        chosen = pages({**entry, "count": args.count or entry["count"]})
        if not chosen:
            print(f"skipped {entry['generator']}: {entry['root']} is absent (apt-get install {entry['package']})",
                  file=sys.stderr)
            continue
        counted = Counter()
        for path in chosen:
            body, furniture = reference(path, entry["furniture"])
            if sum(body.values()) < MIN_WORDS:
                continue
            text, conversion = convert_file(path, cache_dir=False)
            out = words(text)
            kept = sum((body & out).values())
            extra = out - body
            left = sum((extra & furniture).values())
            share = kept / sum(body.values())
            counted.update(pages=1, body=sum(body.values()), kept=kept, furniture=sum(furniture.values()), left=left)
            name = f"{entry['package']}: {path.relative_to(entry['root'])}"
            everything.append((share, name, getattr(conversion, "kept_share", None)))
            if share < 0.9:
                low.append((share, name))
        totals.update(counted)
        rows.append((entry["generator"], counted))
        print(f"done {entry['generator']}", file=sys.stderr, flush=True)
    print("| generator (Debian package) | pages | body words | body kept | furniture words | furniture left |")
    print("|---|---|---|---|---|---|")
    for name, c in [*rows, ("**all**", totals)]:
        print(f"| {name} | {c['pages']} | {c['body']:,} | {c['kept'] / max(1, c['body']):.1%} "
              f"| {c['furniture']:,} | {c['left'] / max(1, c['furniture']):.1%} |")
    print(f"\npages under 90% body kept: {len(low)} of {len(everything)}")
    for share, name in sorted(low):
        print(f"  {share:.1%}  {name}")
    print(f"\nthe {args.pages_shown} pages with the least body kept (chunkwise's own measure beside it):")
    for share, name, own in sorted(everything)[: args.pages_shown]:
        own_share = f"{own:.1%}" if own is not None else "not measured"
        print(f"  {share:.1%}  {name}  (chunkwise's own measure: {own_share} of the visible words outside links)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
