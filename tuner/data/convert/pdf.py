"""PDF to markdown with pypdfium2: headings by font size, paragraphs by vertical gaps, and the page
furniture removed (running headers, footers and page numbers: :func:`_running_lines`), paragraphs
and hyphenated words joined over line and page breaks, table-of-contents lines never headings."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from ...errors import option
from .conversion import ConversionError


@dataclass
class _Line:
    text: str
    size: float  # font size of its first visible character, in points
    bottom: float  # lower edge of that character, in points from the page's bottom
    page: int


#: A line is a heading when its font is at least this much larger than the body's (points and ratio).
_HEADING_MIN_POINTS = 1.0
_HEADING_MIN_RATIO = 1.15
#: ... and it is no longer than this (longer lines in a large font are body text, a pull quote).
_HEADING_MAX_CHARS = 150
#: A vertical step this much larger than the usual line spacing starts a new paragraph.
_PARAGRAPH_GAP = 1.3
#: Lines looked at for running headers and footers: this many at each end of every page ...
_EDGE_LINES = 2
#: ... compared with the ends of the pages this far before and after (running heads that
#: alternate between left and right pages repeat every second page).
_RUNNING_WINDOW = 4
#: A page's outermost line this many line spacings from every other line is set apart (a
#: running head or foot, not the first line of the text).
_RUNNING_GAP = 2.0
#: PDFium's mark for a word hyphenated at a line end (it joins the two halves around it), and
#: the soft hyphen some producers put in the text itself.
_SOFT_HYPHENS = "\ufffe\u00ad"
#: A page number alone on a line: ``7``, ``- 7 -``, ``Page 7``, ``7 of 30``, ``vii``.
_PAGE_NUMBER = re.compile(r"^\W*(?:page\s+)?(\d{1,5}|[ivxlcdm]{1,8})(?:\s*(?:of|/)\s*\d{1,5})?\W*$", re.IGNORECASE)
#: Dot leaders of a table-of-contents line (``Introduction . . . . 1``, ``Usage ........ 12``).
_DOT_LEADERS = re.compile(r"\.(?: ?\.){3,}")
_ENDS_WITH_NUMBER = re.compile(r"\s(\d{1,5}|[ivxlcdm]{1,8})$", re.IGNORECASE)
#: A line that ends a sentence (its paragraph is not continued on the next page).
_ENDS_SENTENCE = re.compile(r"[.!?:][\"'”’)\]]*$")


def convert_pdf(path: Path, data: bytes, *, clean: bool = True, keep_links: bool = False) -> str:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise ConversionError(f"{path} is an encrypted PDF that needs a password to open; chunkwise cannot read "
                                  "it: save a copy without the password (or leave it out with "
                                  f"{option('exclude')})") from None
        raise ConversionError(f"{path} is not a readable PDF ({_pdfium_reason(exc)}); the file may be damaged or "
                              "not a PDF at all") from None
    try:
        lines, images = _pdf_lines(document, split_hyphenated=clean)
    except pdfium.PdfiumError as exc:
        raise ConversionError(f"{path}: a page of this PDF cannot be read ({_pdfium_reason(exc)}); the file may be "
                              "damaged") from None
    finally:
        document.close()
    if not any(line.text.strip() for line in lines):
        if images:
            raise ConversionError(
                f"{path} has no extractable text: it looks like a scanned, image-only PDF ({images} image(s)). "
                "chunkwise does not do OCR; add a text layer with an OCR tool (for instance ocrmypdf) first, "
                f"or leave the file out with {option('exclude')}")
        raise ConversionError(f"{path} has no extractable text (its pages hold no text); leave it out with "
                              f"{option('exclude')}")
    return _pdf_markdown(lines, clean=clean)


def _pdfium_reason(exc: Exception) -> str:
    match = re.search(r"PDFium: ([^)]*)", str(exc))
    return match.group(1) if match else str(exc)


def _pdf_lines(document, split_hyphenated: bool = False) -> tuple[list[_Line], int]:
    """Every text line of the document with its font size and position; and the number of
    image objects (to tell a scanned PDF from an empty one).

    PDFium joins a word hyphenated at a line end with the next line, marking the break with
    U+FFFE, and at the foot of a page that next line can be the page number (``manip\ufffe7``).
    With ``split_hyphenated`` such a line is split back where the text moves to another line,
    the mark ending the first part, so that the page number is seen as the page's last line
    and the word is joined with the line that really continues it."""
    import pypdfium2.raw as raw

    lines: list[_Line] = []
    images = 0
    for number in range(len(document)):
        page = document[number]
        textpage = page.get_textpage()
        try:
            count = textpage.count_chars()
            text = textpage.get_text_range(0, count) if count else ""
            if not text.strip():
                images += sum(1 for obj in page.get_objects(max_depth=2) if obj.type == raw.FPDF_PAGEOBJ_IMAGE)
                continue
            aligned = len(text) == count  # one character per index: sizes and positions can be read
            position = 0
            for line in re.split(r"\r\n|\n|\r", text):
                visible = len(line) - len(line.lstrip())
                size = bottom = 0.0
                if aligned and line.strip():
                    index = position + visible
                    size = raw.FPDFText_GetFontSize(textpage.raw, index)
                    bottom = textpage.get_charbox(index)[1]
                pieces = [(0, len(line))]
                if split_hyphenated and aligned and "\ufffe" in line:
                    pieces = _split_at_marks(textpage, line, position)
                for start, end in pieces:
                    if start:
                        index = position + start + len(line[start:end]) - len(line[start:end].lstrip())
                        size = raw.FPDFText_GetFontSize(textpage.raw, index)
                        bottom = textpage.get_charbox(index)[1]
                    lines.append(_Line(line[start:end], size, bottom, number))
                position += len(line) + (2 if text.startswith("\r\n", position + len(line)) else 1)
        finally:
            textpage.close()
            page.close()
    return lines, images


def _split_at_marks(textpage, line: str, position: int) -> list[tuple[int, int]]:
    """``(start, end)`` of the visual lines PDFium joined at its hyphen marks: a mark is a
    split when the character after it sits more than a point lower or higher."""
    pieces, start = [], 0
    for at in [i for i, char in enumerate(line) if char == "\ufffe"]:
        if at + 1 < len(line) and line[at + 1:].strip():
            before = textpage.get_charbox(position + max(at - 1, 0))[1]
            after = textpage.get_charbox(position + at + 1)[1]
            if abs(before - after) > 1.0:
                pieces.append((start, at + 1))
                start = at + 1
    return [*pieces, (start, len(line))]


def _pdf_markdown(lines: list[_Line], *, clean: bool = True) -> str:
    """Lines as markdown: headings by font size, paragraphs by vertical gaps, pages apart.

    With ``clean`` (the default; off only to measure what cleaning removes), the page furniture
    goes first: running headers, footers and page numbers (:func:`_running_lines`); a
    paragraph that runs over a page break stays one paragraph; a word hyphenated at a line end
    is joined and PDFium's hyphen mark dropped; and table-of-contents lines (dot leaders, or
    ending in a page number on a page of such lines) are never headings.
    """
    visible = [line for line in lines if line.text.strip()]
    contents_pages: set[int] = set()
    if clean:
        running = _running_lines(visible)
        visible = [line for i, line in enumerate(visible) if i not in running]
        contents_pages = _contents_pages(visible)

    def may_be_heading(line: _Line) -> bool:
        text = line.text.strip()
        if len(text) > _HEADING_MAX_CHARS:
            return False
        return not (clean and (_DOT_LEADERS.search(text) or
                               (line.page in contents_pages and _ENDS_WITH_NUMBER.search(text[-12:]))))

    weight: dict[float, int] = {}
    for line in visible:
        weight[round(line.size * 2) / 2] = weight.get(round(line.size * 2) / 2, 0) + len(line.text)
    body = max(weight, key=lambda s: (weight[s], -s)) if weight else 0.0
    larger = sorted({round(line.size * 2) / 2 for line in visible
                     if _is_heading_size(line.size, body) and may_be_heading(line)}, reverse=True)
    level = {size: min(i + 1, 6) for i, size in enumerate(larger)}
    steps = [a.bottom - b.bottom for a, b in pairwise(visible)
             if a.page == b.page and a.size and b.size and not _is_heading_size(a.size, body)
             and not _is_heading_size(b.size, body) and a.bottom > b.bottom]
    # The usual line spacing: the most common step between body lines (the smaller on a tie).
    rounded = Counter(round(step * 2) / 2 for step in steps)
    spacing = max(rounded, key=lambda step: (rounded[step], -step)) if rounded else 0.0

    blocks: list[str] = []
    current: list[str] = []
    previous: _Line | None = None
    previous_heading = 0

    def close() -> None:
        if current:
            blocks.append("\n".join(current))
            current.clear()

    for line in visible:
        text = line.text.strip()
        heading = level.get(round(line.size * 2) / 2, 0)
        heading = heading if heading and may_be_heading(line) else 0
        if heading:
            if previous_heading == heading and previous is not None and previous.page == line.page and not current:
                # A heading wrapped over two lines (a word hyphenated at the wrap joined).
                hyphenated = clean and blocks[-1].endswith(tuple(_SOFT_HYPHENS))
                blocks[-1] = blocks[-1][:-1] + text if hyphenated else blocks[-1] + " " + text
            else:
                close()
                blocks.append("#" * heading + " " + text)
        else:
            new_page = previous is not None and previous.page != line.page
            gap = previous is not None and not previous_heading and spacing > 0 and \
                (previous.bottom - line.bottom > _PARAGRAPH_GAP * spacing or line.bottom > previous.bottom)
            if clean and current and not previous_heading and current[-1].endswith(tuple(_SOFT_HYPHENS)):
                new_page = gap = False  # a word hyphenated at the line end goes on, whatever the gap
            elif clean and current and new_page and not previous_heading:
                # A paragraph that runs over the page break goes on.
                new_page = gap = bool(_ENDS_SENTENCE.search(current[-1]))
            if new_page or gap or previous_heading:
                close()
            if clean and current and current[-1].endswith(tuple(_SOFT_HYPHENS)):
                current[-1] = current[-1][:-1] + line.text.strip()  # "manip-" + "ulation" -> "manipulation"
            else:
                current.append(line.text.rstrip())
        previous, previous_heading = line, heading
    close()
    text = "\n\n".join(blocks)
    if clean:
        for mark in _SOFT_HYPHENS:
            text = text.replace(mark, "")
    return text


def _is_heading_size(size: float, body: float) -> bool:
    return size >= body + _HEADING_MIN_POINTS and size >= body * _HEADING_MIN_RATIO


def _running_lines(visible: list[_Line]) -> set[int]:
    """Indexes (into ``visible``) of the running headers, footers and page numbers.

    Candidates are the first and last :data:`_EDGE_LINES` lines of a page, the inner ones
    only under an outer one that is furniture itself (a page number under a running title).
    A candidate with letters is furniture when the same line, its numbers aside
    (``Chapter 3: Utilities 7`` and ``... 9`` are the same line), is at an edge of two other
    pages at most :data:`_RUNNING_WINDOW` pages away (of the only one, in a two-page file): a
    running head repeats on the pages around it, body text does not. One such page is enough
    for a page's outermost line set apart from the text by :data:`_RUNNING_GAP` line spacings
    and not set in a heading's font (the running head of a two-page chapter). A page number alone on a
    line (``8``, ``- 8 -``, ``Page 8 of 20``, ``viii``) is furniture when a page that far
    away carries the number it would have (``10`` two pages on), alone or in its running head.
    """
    edges: dict[int, list[list[int]]] = {}  # page -> its top lines (outermost first), its bottom lines
    for i, line in enumerate(visible):
        edges.setdefault(line.page, []).append(i)  # type: ignore[arg-type]
    for page, indexes in edges.items():
        flat: list[int] = indexes  # type: ignore[assignment]
        top = flat[:_EDGE_LINES]
        bottom = [i for i in reversed(flat[-_EDGE_LINES:]) if i not in top]
        edges[page] = [top, bottom]
    keys: dict[int, set[str]] = {}  # page -> the edge lines' texts with every number as "#"
    numbers: dict[int, set[int]] = {}  # page -> every number in its edge lines
    for page, ends in edges.items():
        texts = [" ".join(visible[i].text.split()).lower() for end in ends for i in end]
        keys[page] = {re.sub(r"\d+", "#", text) for text in texts}
        numbers[page] = {n for text in texts for n in _numbers(text)}
    sizes: Counter[float] = Counter()
    for line in visible:
        sizes[round(line.size * 2) / 2] += len(line.text)
    body = max(sizes, key=lambda size: (sizes[size], -size)) if sizes else 0.0
    steps = Counter(round((a.bottom - b.bottom) * 2) / 2 for a, b in pairwise(visible)
                    if a.page == b.page and a.size and b.size and a.bottom > b.bottom)
    spacing = max(steps, key=lambda step: (steps[step], -step)) if steps else 0.0
    bottoms: dict[int, list[tuple[int, float]]] = {}
    for j, line in enumerate(visible):
        bottoms.setdefault(line.page, []).append((j, line.bottom))
    running = set()
    for page, ends in edges.items():
        near = [other for other in range(page - _RUNNING_WINDOW, page + _RUNNING_WINDOW + 1)
                if other != page and other in edges]
        for end in ends:
            for slot, i in enumerate(end):  # outermost first; stop at the first line that is not furniture
                text = " ".join(visible[i].text.split()).lower()
                alone = _PAGE_NUMBER.match(text)
                if alone:
                    value = _number(alone.group(1))
                    furniture = value is not None and any(value + other - page in numbers[other] for other in near)
                else:
                    # The outermost line, set apart from the text by a wide gap and not in a
                    # heading's font, is a running head when one nearby page repeats it (a
                    # chapter of two pages); any other line needs two.
                    line = visible[i]
                    gaps = [abs(line.bottom - bottom) for j, bottom in bottoms[page] if j != i]
                    apart = slot == 0 and line.size > 0 and spacing > 0 and not _is_heading_size(line.size, body) \
                        and all(gap > _RUNNING_GAP * spacing for gap in gaps)
                    repeats = sum(re.sub(r"\d+", "#", text) in keys[other] for other in near)
                    furniture = bool(re.search(r"[^\W\d_]", text)) and repeats >= min(1 if apart else 2, len(near)) > 0
                if not furniture:
                    break
                running.add(i)
    return running


def _numbers(text: str) -> list[int]:
    """The arabic numbers in a line, and the line itself read as a roman numeral if it is one."""
    found = [int(n) for n in re.findall(r"\d{1,5}", text)]
    for word in re.findall(r"\b[ivxlcdm]{1,8}\b", text):
        value = _number(word)
        if value is not None:
            found.append(value)
    return found


def _number(text: str) -> int | None:
    """``"12"`` -> 12, ``"xiv"`` -> 14; None for what is not a well-formed number."""
    if text.isdigit():
        return int(text)
    values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
    digits = [values[c] for c in text.lower()]
    total = sum(-v if i + 1 < len(digits) and v < digits[i + 1] else v for i, v in enumerate(digits))
    return total if total and _roman(total) == text.lower() else None


def _roman(value: int) -> str:
    out = ""
    for amount, letters in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"),
                            (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while value >= amount:
            out, value = out + letters, value - amount
    return out


def _contents_pages(visible: list[_Line]) -> set[int]:
    """Pages that are a table of contents: at least five lines, half or more of them ending
    in a page number or dot leaders (their lines are not headings, whatever their font)."""
    pages: dict[int, list[str]] = {}
    for line in visible:
        pages.setdefault(line.page, []).append(line.text.strip())
    return {page for page, texts in pages.items() if len(texts) >= 5 and
            sum(_is_contents_line(text) for text in texts) * 2 >= len(texts)}


def _is_contents_line(text: str) -> bool:
    """A line ending in a page number, or with dot leaders (cheap tests first: most lines are neither)."""
    return bool((text[-1:].isalnum() and _ENDS_WITH_NUMBER.search(text)) or ("." in text and _DOT_LEADERS.search(text)))
