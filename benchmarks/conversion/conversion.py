"""Document conversion: speed (MB/s of input file) and fidelity per format and converter.

The bundled handbook (written for this project) is repeated ``--copies`` times and rendered
as PDF (fpdf2), DOCX (python-docx), PPTX (python-pptx, one slide per section) and HTML (by
hand); each file is converted with chunkwise's converter (no cache) and, where installed,
with the alternatives considered. Fidelity: how many of the handbook's prose sentences are
found in the output in order (whitespace normalised), and how many of its headings come out
as markdown headings.

    python benchmarks/conversion/conversion.py [--copies 4] [--repeats 3]

Needs the test extras (fpdf2, python-docx); alternatives (pypdf, pdfminer.six, html2text)
are measured only when installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import ROOT
from benchmarks._render import parse_markdown, plain, sentences, write_docx, write_html, write_pdf


def write_pptx(blocks, path: Path) -> None:
    """One slide per heading: its title, and the section's paragraphs and list items as body."""
    from pptx import Presentation

    deck = Presentation()
    slide = body = None
    for block in blocks:
        if block[0] == "heading":
            slide = deck.slides.add_slide(deck.slide_layouts[1])
            slide.shapes.title.text = plain(block[2])
            body = slide.placeholders[1].text_frame
            body.text = ""
        elif body is not None and block[0] in ("paragraph", "list"):
            for text in [block[1]] if block[0] == "paragraph" else block[1]:
                body.add_paragraph().text = plain(text)
    deck.save(str(path))


def _comparable(text: str) -> str:
    """Whitespace collapsed, inline-code and emphasis marks removed (HTML keeps `code` as markdown)."""
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", ""))


def fidelity(text: str, expected: list[str], headings: int) -> str:
    normal = _comparable(text)
    position = found = 0
    for sentence in expected:
        at = normal.find(_comparable(sentence), position)
        if at >= 0:
            found, position = found + 1, at
    marked = sum(1 for line in text.splitlines() if re.match(r"#{1,6} ", line))
    return f"{found}/{len(expected)} | {marked}/{headings}"


def alternatives() -> dict[str, list[tuple[str, Callable[[Path], str]]]]:
    """The other converters considered, by format (only those installed)."""
    out: dict[str, list[tuple[str, Callable[[Path], str]]]] = {"pdf": [], "html": [], "docx": []}
    try:
        import pypdf

        out["pdf"].append(("pypdf", lambda p: "\n".join(pg.extract_text() for pg in pypdf.PdfReader(p).pages)))
    except ImportError:
        pass
    try:
        import pdfminer.high_level

        out["pdf"].append(("pdfminer.six", lambda p: pdfminer.high_level.extract_text(str(p))))
    except ImportError:
        pass
    try:
        from markitdown import MarkItDown

        markitdown = MarkItDown()
        if importlib.util.find_spec("pdfminer") and importlib.util.find_spec("pdfplumber"):  # markitdown[pdf]
            out["pdf"].append(("markitdown (pdfminer + pdfplumber)",
                               lambda p: markitdown.convert_local(str(p)).markdown))
        out["html"].append(("markitdown, default escaping", lambda p: markitdown.convert_local(str(p)).markdown))
        out["docx"].append(("markitdown, default escaping", lambda p: markitdown.convert_local(str(p)).markdown))
    except ImportError:
        pass
    try:
        import html2text

        out["html"].append(("html2text", lambda p: html2text.html2text(p.read_text(encoding="utf-8"))))
    except ImportError:
        pass
    return out


def timed(convert: Callable[[Path], str], path: Path, repeats: int) -> tuple[float, str]:
    convert(path)  # imports and first-use setup are not part of the rate
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        text = convert(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times), text


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=4, help="handbook copies per document (4)")
    parser.add_argument("--repeats", type=int, default=3, help="timed conversions per file; the median counts (3)")
    return parser


def main() -> int:
    args = parser().parse_args()
    warnings.simplefilter("ignore")
    from tuner.data.convert import convert_file

    handbook = ROOT / "examples" / "handbook"
    source = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(handbook.glob("*.md")))
    blocks = parse_markdown("\n\n".join([source] * args.copies))
    expected = sentences(blocks)
    headings = sum(1 for b in blocks if b[0] == "heading")
    others = alternatives()
    print(f"handbook x{args.copies}: {len(source) * args.copies / 1e3:.0f} k characters of markdown, "
          f"{len(expected)} prose sentences, {headings} headings; median of {args.repeats} conversions\n")
    print("| format | converter | file KB | MB/s (file) | k chars/s (text) | sentences in order | headings as `#` |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        files = {"pdf": Path(tmp) / "handbook.pdf", "docx": Path(tmp) / "handbook.docx",
                 "pptx": Path(tmp) / "handbook.pptx", "html": Path(tmp) / "handbook.html"}
        write_pdf(blocks, files["pdf"])
        write_docx(blocks, files["docx"])
        write_pptx(blocks, files["pptx"])
        write_html(blocks, files["html"], "Tidewater handbook")
        for kind, path in files.items():
            method = {"pdf": "pypdfium2 + layout", "html": "main content, markitdown, no escaping"}
            ours = f"**chunkwise** ({method.get(kind, 'markitdown, no escaping')})"
            rows = [(ours, lambda p: convert_file(p, cache_dir=False)[0]), *others.get(kind, [])]
            for name, convert in rows:
                seconds, text = timed(convert, path, args.repeats)
                size = path.stat().st_size
                # A deck holds titles and bullet text only: its fidelity is not comparable.
                quality = fidelity(text, expected, headings) if kind != "pptx" else "n/a | n/a"
                print(f"| {kind.upper()} | {name} | {size / 1e3:.0f} | {size / 1e6 / seconds:.2f} "
                      f"| {len(text) / 1e3 / seconds:.0f} | {quality} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
