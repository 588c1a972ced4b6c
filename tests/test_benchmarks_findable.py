"""Every figure BENCHMARKS.md ever held is still findable.

Issue 52 turned BENCHMARKS.md from a lab notebook into an index of current results, and moved the
measurements into the docs site's results pages (``docs/results/``; superseded figures into its
appendix, ``docs/results/history.md``). ``tests/benchmarks_figures.txt`` froze what the notebook
held before the move (``git show 3697131:BENCHMARKS.md``), so this test needs no git history:

- ``row``: every table row (whitespace collapsed), verbatim;
- ``code``: every line of every command block, verbatim;
- ``heading``: every section title (code and the guide cite sections by title), as a heading;
- ``figures``: for every prose sentence holding numbers, those numbers in order, as one sentence
  of the new text states them (a sentence may be rewrapped or moved, not lose a figure).

Each must be found in BENCHMARKS.md or a page of ``docs/results/``. A figure that a later
measurement replaces moves to the appendix; it is never deleted. The list's paths to benchmark scripts
and their data follow the layout by question they moved to in issue 64 (``benchmarks/FOLDER/``).

    python tests/test_benchmarks_findable.py --freeze REV   # rewrite the list from REV's BENCHMARKS.md
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FROZEN = Path(__file__).with_name("benchmarks_figures.txt")
RESULTS = ROOT / "docs" / "results"
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: Section titles changed on purpose when the notebook became an index: old -> new.
RENAMED = {"One pass per embedder: proxies for a dense trial (issue 28, in progress)":
           "One pass per embedder: proxies for a dense trial (issue 28)"}


def _collapse(line: str) -> str:
    return " ".join(line.split())


def units(markdown: str) -> list[tuple[str, str]]:
    """(kind, text) for each row, command line, heading and figure-holding sentence of a page."""
    found: list[tuple[str, str]] = []
    block: list[str] = []

    def sentences() -> None:
        text = _collapse(" ".join(block))
        block.clear()
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            numbers = NUMBER.findall(sentence)
            if numbers:
                found.append(("figures", " ".join(numbers) + "\t" + sentence[:80]))

    fence = False
    for raw in markdown.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            sentences()
            fence = not fence
        elif fence:
            if line:
                found.append(("code", _collapse(line)))
        elif line.startswith("|"):
            sentences()
            if not re.fullmatch(r"[|\s:-]+", line):
                found.append(("row", _collapse(line)))
        elif m := re.match(r"#{1,6} (.*)", line):
            sentences()
            found.append(("heading", _collapse(m.group(1))))
        elif not line or re.match(r"([-*]|\d+\.) ", line):
            sentences()
            if line:
                block.append(line)
        else:
            block.append(line)
    sentences()
    return found


def frozen() -> list[tuple[str, str]]:
    rows = []
    for line in FROZEN.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            kind, _, text = line.partition("\t")
            rows.append((kind, text))
    return rows


def missing() -> list[str]:
    pages = [ROOT / "BENCHMARKS.md", *sorted(RESULTS.glob("*.md"))]
    now = [u for page in pages for u in units(page.read_text(encoding="utf-8"))]
    lines = {text for kind, text in now if kind in ("row", "code")}
    headings = {text for kind, text in now if kind == "heading"}
    numbers = "\n".join(f" {text.partition(chr(9))[0]} " for kind, text in now if kind == "figures")
    lost = []
    for kind, text in frozen():
        if kind in ("row", "code"):
            ok = text in lines
        elif kind == "heading":
            ok = RENAMED.get(text, text) in headings
        else:
            ok = f" {text.partition(chr(9))[0]} " in numbers
        if not ok:
            lost.append(f"{kind}: {text}")
    return lost


def test_every_figure_that_was_in_benchmarks_is_still_findable():
    assert len(frozen()) > 1000  # the list is the notebook's, not an empty file
    lost = missing()
    assert not lost, f"{len(lost)} not found in BENCHMARKS.md or docs/results/:\n" + "\n".join(lost[:40])


def test_benchmarks_links_every_results_page_and_the_site_lists_them():
    index = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in RESULTS.glob("*.md"))
    assert len(pages) >= 8
    for name in pages:
        assert f"](docs/results/{name}" in index, name
        assert f"results/{name}" in nav, name


def test_the_index_links_name_files_and_headings_that_exist():
    """BENCHMARKS.md's links (tests/test_docs.py checks the pages under docs/ the same way)."""
    text = re.sub(r"^```.*?^```", "", (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = ROOT / file if file else ROOT / "BENCHMARKS.md"
        assert linked.exists(), target
        if anchor:
            slugs = {re.sub(r"[^\w\- ]", "", re.sub(r"[`*_]", "", title).strip().lower()).replace(" ", "-")
                     for kind, title in units(linked.read_text(encoding="utf-8")) if kind == "heading"}
            assert anchor in slugs, target


def test_the_check_finds_a_figure_that_goes_missing():
    page = "Recall was **91.5%** against 75.3%.\n\n| a | 1.5 |\n|---|---|\n"
    assert ("figures", "91.5 75.3\tRecall was **91.5%** against 75.3%.") in units(page)
    assert ("row", "| a | 1.5 |") in units(page)
    assert not any(text.startswith("91.5 75.4") for _, text in units(page))


def freeze(rev: str) -> None:
    text = subprocess.run(["git", "show", f"{rev}:BENCHMARKS.md"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    seen, out = set(), [f"# Figures of BENCHMARKS.md at {rev}, one per line (kind TAB text); "
                        "tests/test_benchmarks_findable.py reads it."]
    for kind, unit in units(text):
        if (kind, unit) not in seen:
            seen.add((kind, unit))
            out.append(f"{kind}\t{unit}")
    FROZEN.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(out) - 1} units written to {FROZEN}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--freeze":
        freeze(sys.argv[2])
    else:
        sys.exit(__doc__)
