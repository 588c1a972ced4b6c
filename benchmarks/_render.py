"""Render the bundled handbook (markdown written for this project) as HTML, DOCX and PDF.

The benchmarks of document conversion need real files of each format whose text is known:
this module turns a small markdown subset (headings, paragraphs, lists, tables, code fences,
``inline code``) into blocks and writes each block with the format's own library (python-docx,
fpdf2) or, for HTML, by hand. It is benchmark code, not part of the package.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

Block = tuple  # ("heading", level, text) | ("paragraph", text) | ("list", items) | ("table", rows) | ("code", text)


def parse_markdown(text: str) -> list[Block]:
    """Blocks of a markdown subset, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(("paragraph", " ".join(paragraph)))
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            blocks.append(("code", "\n".join(lines[i + 1 : j])))
            i = j + 1
            continue
        heading = re.match(r"(#{1,6}) (.*)", line)
        if heading:
            flush()
            blocks.append(("heading", len(heading.group(1)), heading.group(2)))
        elif line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.fullmatch(r"[|\s:-]+", lines[i]):
                    rows.append([cell.strip() for cell in lines[i].strip("|").split("|")])
                i += 1
            blocks.append(("table", rows))
            continue
        elif re.match(r"(- |\d+\. )", line):
            flush()
            items = []
            while i < len(lines) and re.match(r"(- |\d+\. )", lines[i]):
                items.append(re.sub(r"^(- |\d+\. )", "", lines[i]))
                i += 1
            blocks.append(("list", items))
            continue
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.strip())
        i += 1
    flush()
    return blocks


def plain(text: str) -> str:
    """Inline markdown removed (``code`` and **bold** markers)."""
    return text.replace("`", "").replace("**", "")


def write_html(blocks: list[Block], path: Path, title: str) -> None:
    def inline(text: str) -> str:
        return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text.replace("**", "")))

    body = []
    for block in blocks:
        if block[0] == "heading":
            body.append(f"<h{block[1]}>{inline(block[2])}</h{block[1]}>")
        elif block[0] == "paragraph":
            body.append(f"<p>{inline(block[1])}</p>")
        elif block[0] == "list":
            body.append("<ul>" + "".join(f"<li>{inline(item)}</li>" for item in block[1]) + "</ul>")
        elif block[0] == "table":
            header, *rows = block[1]
            cells = "".join(f"<th>{inline(c)}</th>" for c in header)
            body.append(f"<table><thead><tr>{cells}</tr></thead><tbody>"
                        + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in rows)
                        + "</tbody></table>")
        else:
            body.append(f"<pre><code>{html.escape(block[1])}</code></pre>")
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>\n"
            "<body><nav><a href=\"/\">Home</a></nav>\n<main>\n" + "\n".join(body) + "\n</main></body></html>\n")
    path.write_text(page, encoding="utf-8")


def write_docx(blocks: list[Block], path: Path) -> None:
    import docx

    document = docx.Document()
    for block in blocks:
        if block[0] == "heading":
            document.add_heading(plain(block[2]), level=block[1])
        elif block[0] == "paragraph":
            document.add_paragraph(plain(block[1]))
        elif block[0] == "list":
            for item in block[1]:
                document.add_paragraph(plain(item), style="List Bullet")
        elif block[0] == "table":
            rows = block[1]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row[: len(rows[0])]):
                    table.cell(r, c).text = plain(cell)
        else:
            document.add_paragraph(block[1], style="No Spacing")
    document.save(str(path))


def write_pdf(blocks: list[Block], path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(True, margin=15)
    pdf.add_page()
    sizes = {1: 20, 2: 16, 3: 13}
    for block in blocks:
        if block[0] == "heading":
            pdf.set_font("Helvetica", "B", sizes.get(block[1], 12))
            pdf.multi_cell(0, sizes.get(block[1], 12) * 0.6, plain(block[2]), new_x="LMARGIN", new_y="NEXT")
        elif block[0] == "paragraph":
            pdf.set_font("Helvetica", "", 10)
            pdf.multi_cell(0, 5, plain(block[1]), new_x="LMARGIN", new_y="NEXT")
        elif block[0] == "list":
            pdf.set_font("Helvetica", "", 10)
            for item in block[1]:
                pdf.multi_cell(0, 5, "- " + plain(item), new_x="LMARGIN", new_y="NEXT")
        elif block[0] == "table":
            pdf.set_font("Helvetica", "", 9)
            for row in block[1]:
                pdf.multi_cell(0, 5, "  |  ".join(plain(c) for c in row), new_x="LMARGIN", new_y="NEXT")
        else:
            pdf.set_font("Courier", "", 9)
            pdf.multi_cell(0, 4.5, block[1], new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    pdf.output(str(path))


def sentences(blocks: list[Block]) -> list[str]:
    """The prose sentences of the blocks, in order (for checking extracted text)."""
    out = []
    for block in blocks:
        if block[0] == "paragraph":
            out += [s for s in re.split(r"(?<=[.!?])\s+", plain(block[1])) if len(s) > 20]
    return out
