"""Conversion of real documentation pages and PDF manuals: furniture removed, body kept, headings.

The pages and PDFs come from Debian packages (``apt-get download`` then ``dpkg-deb -x``, into
``--cache``, default ``~/.cache/chunkwise-bench``; nothing is committed but the hand-made
lists). ``benchmarks/data/conversion_real.yaml`` names each document and lists, written by reading
it: body sentences in reading order, the headings of its content (HTML), and strings or
lines that are page furniture. For each document and converter this prints:

* furniture removed: ``(len(raw) - len(text)) / len(raw)``, where ``raw`` is the conversion
  with chunkwise's clean-up off (chunkwise-convert 1: the whole page, links kept, PDF lines as
  PDFium gives them) -- the definition ``chunkwise convert --stats`` uses;
* furniture left: occurrences of the hand-listed furniture strings (HTML) or lines (PDF);
* sentences kept in order: hand-listed sentences found in order in the text, whitespace
  collapsed, markdown emphasis and link syntax reduced to the words (so that a link inside a
  sentence does not count as a loss: this measures what main-content selection keeps);
* headings: hand-listed headings present as markdown heading lines carrying their words
  only (``## Basic Usage``, not ``## Basic Usage[¶](#basic-usage "Permalink")``), and heading
  lines that are none of them (HTML: navigation such as ``### Table of Contents``; PDF: table
  of contents entries such as ``### I Gnuplot 21``);
* milliseconds per conversion (median of ``--repeats``).

With ``--variants``, HTML main-content strategies are compared: chunkwise's landmarks and
generator containers first, then a library on pages they do not fit (readability-lxml's
region, as chunkwise does; readability-lxml's or trafilatura's own extract), against each
library alone on every page (after the same furniture rules).

    python benchmarks/conversion/conversion_real.py [--cache DIR] [--repeats 3] [--variants]

Needs ``apt-get`` (Debian) to fetch the packages the first time; ``--variants`` also needs
trafilatura (``pip install trafilatura``; not a chunkwise dependency).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import yaml

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA

DOCUMENTS = DATA / "conversion_real.yaml"


def fetch(package: str, cache: Path) -> Path:
    """The unpacked files of a Debian package (downloaded and unpacked once)."""
    target = cache / "unpacked" / package
    if target.is_dir():
        return target
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob(f"{package}_*.deb")):
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True, capture_output=True)
    (deb,) = debs.glob(f"{package}_*.deb")
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], check=True)
    partial.rename(target)
    return target


def words(text: str) -> str:
    """Text compared with the hand-made lists: links reduced to their text, emphasis and code
    marks dropped, whitespace collapsed."""
    text = re.sub(r"!?\[([^\]]*)\]\((?:[^()]|\([^)]*\))*\)", r"\1", text)
    return " ".join(text.replace("`", "").replace("*", "").split())


def in_order(text: str, sentences: list[str]) -> int:
    plain, position, found = words(text), 0, 0
    for sentence in sentences:
        at = plain.find(words(sentence), position)
        if at >= 0:
            found, position = found + 1, at + len(words(sentence))
    return found


def heading_lines(text: str) -> list[str]:
    """Markdown heading lines outside code blocks, as their text after the ``#`` marks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            lines.append(" ".join(line.lstrip("#").split()))
    return lines


def furniture_left(text: str, item: dict) -> int:
    count = sum(text.count(marker) for marker in item.get("furniture", ()))
    for pattern in item.get("furniture_lines", ()):
        count += sum(1 for line in text.splitlines() if re.search(pattern, line.strip()))
    return count


def timed(convert: Callable[[], str], repeats: int) -> tuple[float, str]:
    convert()
    times, text = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        text = convert()
        times.append(time.perf_counter() - start)
    return statistics.median(times), text


def html_variants() -> dict[str, Callable[[Path], str]]:
    """The HTML converters compared; each returns the document's text. "extract" is the
    library's own output (its clean-up included); "region" is chunkwise's use of it: the
    element of the page holding 90% of the extracted text, kept whole."""
    import trafilatura
    from bs4 import BeautifulSoup

    import tuner.data.convert as convert

    def variant(fallback: Callable[[str], str] | None, landmarks: bool, region: bool) -> Callable[[Path], str]:
        def run(path: Path) -> str:
            saved = convert.html._fallback_content, convert.html._CONTENT_MATCHERS, convert.html._content_region
            convert.html._fallback_content = fallback or saved[0]
            if not landmarks:
                convert.html._CONTENT_MATCHERS = []
            if not region:
                convert.html._content_region = lambda page, extracted: BeautifulSoup(extracted, "lxml")
            try:
                return convert.convert_file(path, cache_dir=False)[0]
            finally:
                convert.html._fallback_content, convert.html._CONTENT_MATCHERS, convert.html._content_region = saved
        return run

    def trafilatura_html(markup: str) -> str:
        return trafilatura.extract(markup, output_format="html", include_formatting=True, include_tables=True,
                                   include_links=True, favor_recall=True) or ""

    return {
        "landmarks, then readability-lxml's region (chunkwise)": variant(None, True, True),
        "landmarks, then readability-lxml's extract": variant(None, True, False),
        "landmarks, then trafilatura's extract": variant(trafilatura_html, True, False),
        "readability-lxml's region only": variant(None, False, True),
        "readability-lxml's extract only": variant(None, False, False),
        "trafilatura's extract only": variant(trafilatura_html, False, False),
    }


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "chunkwise-bench",
                        help="folder for the downloaded packages (~/.cache/chunkwise-bench)")
    parser.add_argument("--repeats", type=int, default=3, help="timed conversions per file; the median counts (3)")
    parser.add_argument("--variants", action="store_true",
                        help="also compare other HTML main-content strategies (landmarks vs libraries)")
    return parser


def main() -> int:
    args = parser().parse_args()
    warnings.simplefilter("ignore")
    from tuner.data.convert import CONVERSION_VERSION, convert_file, furniture_share, raw_text

    after = f"after (chunkwise-convert {CONVERSION_VERSION})"

    data = yaml.safe_load(DOCUMENTS.read_text(encoding="utf-8"))
    converters: dict[str, Callable[[Path], str]] = {
        "before (chunkwise-convert 1)": raw_text,
        after: lambda p: convert_file(p, cache_dir=False)[0],
    }
    if args.variants:
        converters = {"before (chunkwise-convert 1)": raw_text, **html_variants()}
    totals: dict[tuple[str, str], list[int]] = {}
    print("| kind | document (generator) | converter | furniture removed | furniture left | sentences in order "
          "| headings found | other heading lines | ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, items in (("HTML", data["pages"]), ("PDF", data["pdfs"])):
        for item in items:
            path = fetch(item["package"], args.cache) / item["path"]
            raw = raw_text(path)
            for name, convert in converters.items():
                if kind == "PDF" and name not in ("before (chunkwise-convert 1)", after):
                    continue
                seconds, text = timed(lambda convert=convert, path=path: convert(path), args.repeats)
                lines = heading_lines(text)
                expected = {" ".join(h.split()) for h in item.get("headings", ())}
                found = sum(1 for h in expected if h in lines)
                if kind == "HTML":
                    other = sum(1 for line in lines if line not in expected)
                else:  # table-of-contents entries set as headings
                    entries = {" ".join(e.split()) for e in item.get("contents_entries", ())}
                    other = sum(1 for line in lines if line in entries or re.search(r"(\. ?){4,}", line))
                kept = in_order(text, item["sentences"])
                left = furniture_left(text, item)
                row = [len(raw) - len(text), len(raw), left, kept, len(item["sentences"]), found, len(expected), other]
                total = totals.setdefault((kind, name), [0] * len(row))
                totals[(kind, name)] = [a + b for a, b in zip(total, row)]
                print(f"| {kind} | {item['name']} ({item['generator']}) | {name} | {furniture_share(raw, text):.1%} "
                      f"| {left} | {kept}/{len(item['sentences'])} | {found}/{len(expected)} | {other} "
                      f"| {seconds * 1000:.0f} |", flush=True)
    print("\n| kind | converter | furniture removed | furniture left | sentences in order | headings found "
          "| other heading lines |")
    print("|---|---|---|---|---|---|---|")
    for (kind, name), (removed, raw, left, kept, sentences, found, headings, other) in totals.items():
        print(f"| {kind} | {name} | {removed / raw:.1%} | {left} | {kept}/{sentences} ({kept / sentences:.0%}) "
              f"| {found}/{headings} | {other} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
