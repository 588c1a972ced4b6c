"""The document, not the page furniture: HTML main content, links as text, PDF running heads.

Each HTML page below is written by hand in the shape a documentation generator gives it
(Sphinx, MkDocs Material, Docusaurus, Javadoc old and new, a GitHub-rendered README, a page
with no landmark at all), with its navigation, sidebars, breadcrumbs, previous/next links,
footers, permalink anchors and a cookie banner; each PDF is written by fpdf2 with running
headers, page numbers, a table of contents, a word hyphenated across lines and a paragraph
across a page break. The expected texts are written by hand from the content put in,
following markdown's conventions (``#`` headings, blank lines between blocks, fenced code,
backticks for inline code, ``*`` bullets).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tuner
import tuner.data.convert as convert
from tuner.cli import main
from tuner.data.convert import convert_file, converter_identity, furniture_share, raw_text
from tuner.data.corpus import load_corpus

fpdf = pytest.importorskip("fpdf", reason="fpdf2 is a test dependency: pip install -e '.[test]'")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test its own (empty) conversion cache."""
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))


def html(tmp_path: Path, body: str, name: str = "page.html") -> str:
    path = tmp_path / name
    path.write_text(f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>T</title></head>\n<body>{body}"
                    "</body></html>\n", encoding="utf-8")
    return convert_file(path, cache_dir=False)[0]


# --- HTML: each generator's shape ----------------------------------------------------------------

SPHINX = """
<div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3>
  <ul><li><a href="../genindex.html">index</a></li><li><a href="mailbox.html">next</a> |</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
  <section id="module-json">
  <h1><a class="reference internal" href="#module-json" title="json: Encode and decode JSON."><code class="xref py
  py-mod docutils literal notranslate"><span class="pre">json</span></code></a> — JSON encoder and decoder<a
  class="headerlink" href="#module-json" title="Permalink to this heading">¶</a></h1>
  <p>Use <a class="reference internal" href="#json.dump" title="json.dump"><code class="xref py py-func docutils
  literal notranslate"><span class="pre">dump()</span></code></a> to write a
  <a class="reference external" href="https://json.org">JSON document</a> to a file.</p>
  <div class="highlight-python3 notranslate"><div class="highlight"><pre><span></span><span
  class="kn">import</span> json
json.dump([1, 2], fp)
</pre></div></div>
  <section id="basic-usage"><h2>Basic Usage<a class="headerlink" href="#basic-usage"
   title="Permalink to this heading">¶</a></h2>
  <p>Keys are always strings.</p></section></section>
</div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebarwrapper">
  <h3><a href="../contents.html">Table of Contents</a></h3><ul><li><a href="#basic-usage">Basic Usage</a></li></ul>
  <h4>Previous topic</h4><p><a href="email.html" title="previous chapter">email</a></p>
  <h3>This Page</h3><ul><li><a href="../bugs.html">Report a Bug</a></li></ul></div></div>
<div class="clearer"></div></div>
<div class="footer">© <a href="../copyright.html">Copyright</a> 2001-2026, Python Software Foundation.</div>
"""
SPHINX_TEXT = ("# json — JSON encoder and decoder\n\n"
               "Use `dump()` to write a\nJSON document to a file.\n\n"
               "```\nimport json\njson.dump([1, 2], fp)\n```\n\n"
               "## Basic Usage\n\n"
               "Keys are always strings.\n")


def test_sphinx_page_keeps_its_body_only_links_as_text_headings_as_words(tmp_path):
    assert html(tmp_path, SPHINX) == SPHINX_TEXT


MATERIAL = """
<div data-md-component="announce"></div>
<header class="md-header"><nav class="md-header__inner md-grid" aria-label="Header">
  <a href="." class="md-header__button md-logo">Logo</a><div class="md-header__title">mkdocs-literate-nav</div>
  <div class="md-search"><form class="md-search__form"><input type="text" placeholder="Search"></form></div></nav>
</header>
<div class="md-container"><main class="md-main"><div class="md-main__inner md-grid">
  <div class="md-sidebar md-sidebar--primary"><nav class="md-nav"><label>Navigation</label>
    <ul><li><a href="index.html">Overview</a></li><li><a href="reference.html">Reference</a></li></ul></nav></div>
  <div class="md-sidebar md-sidebar--secondary"><nav class="md-nav md-nav--secondary"><label>Table of contents</label>
    <ul><li><a href="#wildcards">Wildcards</a></li></ul></nav></div>
  <div class="md-content" data-md-component="content">
  <article class="md-content__inner md-typeset">
    <a href="https://github.com/o/r/edit/master/docs/reference.md" title="Edit this page"
       class="md-content__button md-icon"><svg viewBox="0 0 24 24"><path d="M20"></path></svg></a>
    <h1 id="reference">Reference</h1>
    <h2 id="wildcards">Wildcards<a class="headerlink" href="#wildcards" title="Permanent link">#</a></h2>
    <p>Bare paths that contain an <em>asterisk</em> are recognized as
    <a href="#wildcards">wildcards</a>.</p>
    <div class="highlight"><pre><span></span><code>nav:
  - '*.md'
</code></pre></div>
    <aside class="md-source-file"><span class="md-source-file__fact">Last update: 2023-01-01</span></aside>
  </article></div></div></main>
<footer class="md-footer"><nav class="md-footer__inner" aria-label="Footer">
  <a href="index.html" class="md-footer__link md-footer__link--prev">Previous Overview</a></nav>
  <div class="md-copyright">Made with Material for MkDocs</div></footer></div>
"""
MATERIAL_TEXT = ("# Reference\n\n"
                 "## Wildcards\n\n"
                 "Bare paths that contain an *asterisk* are recognized as\nwildcards.\n\n"
                 "```\nnav:\n  - '*.md'\n```\n")


def test_mkdocs_material_page_is_its_article(tmp_path):
    assert html(tmp_path, MATERIAL) == MATERIAL_TEXT


DOCUSAURUS = """
<div id="__docusaurus"><div role="region" aria-label="Skip to main content">
  <a class="skipToContent_fXgn" href="#__docusaurus_skipToContent_fallback">Skip to main content</a></div>
<nav aria-label="Main" class="navbar navbar--fixed-top"><a class="navbar__brand" href="/">Tides</a></nav>
<div class="main-wrapper"><div class="docsWrapper"><div class="docRoot">
  <aside class="theme-doc-sidebar-container"><nav aria-label="Docs sidebar"><ul>
    <li><a href="/docs/intro">Introduction</a></li><li><a href="/docs/tables">Tide tables</a></li></ul></nav></aside>
  <main class="docMainContainer"><div class="container"><div class="row"><div class="col docItemCol">
    <div class="docItemContainer"><article>
      <nav class="theme-doc-breadcrumbs" aria-label="Breadcrumbs"><ul class="breadcrumbs">
        <li class="breadcrumbs__item"><a class="breadcrumbs__link" href="/">Home</a></li>
        <li class="breadcrumbs__item"><span class="breadcrumbs__link">Tide tables</span></li></ul></nav>
      <div class="tocCollapsible theme-doc-toc-mobile"><button type="button">On this page</button></div>
      <div class="theme-doc-markdown markdown">
        <header><h1>Tide tables</h1></header>
        <p>A tide table lists the <strong>high</strong> and low waters of each day.</p>
        <h2 class="anchor" id="reading">Reading a table<a href="#reading" class="hash-link"
          aria-label="Direct link to Reading a table" title="Direct link to Reading a table">\u200b</a></h2>
        <ul><li>Times are local.</li><li>Heights are in metres.</li></ul>
      </div>
      <footer class="theme-doc-footer docusaurus-mt-lg"><div class="row">
        <a href="https://github.com/o/r/edit/main/docs/tables.md" class="theme-edit-this-page">Edit this page</a>
        </div></footer>
    </article>
    <nav class="pagination-nav docusaurus-mt-lg" aria-label="Docs pages"><a class="pagination-nav__link"
      href="/docs/intro"><div class="pagination-nav__sublabel">Previous</div>
      <div class="pagination-nav__label">Introduction</div></a></nav></div></div>
    <div class="col col--3"><div class="tableOfContents theme-doc-toc-desktop"><ul class="table-of-contents">
      <li><a href="#reading" class="table-of-contents__link">Reading a table</a></li></ul></div></div>
  </div></div></main></div></div></div>
<footer class="footer footer--dark"><div class="footer__copyright">Copyright © 2026 Tides.</div></footer>
<div class="cookie-banner" role="dialog"><p>We use cookies to improve this site.</p>
  <button>Accept all cookies</button></div></div>
"""
DOCUSAURUS_TEXT = ("# Tide tables\n\n"
                   "A tide table lists the **high** and low waters of each day.\n\n"
                   "## Reading a table\n\n"
                   "* Times are local.\n* Heights are in metres.\n")


def test_docusaurus_page_is_its_markdown_not_breadcrumbs_toc_or_pagination(tmp_path):
    assert html(tmp_path, DOCUSAURUS) == DOCUSAURUS_TEXT


JAVADOC_17 = """
<div class="flex-box"><header role="banner" class="flex-header"><nav role="navigation">
  <div class="top-nav" id="navbar-top"><div class="skip-nav"><a href="#skip-navbar-top">Skip navigation links</a></div>
  <ul class="nav-list"><li><a href="../../../index.html">Overview</a></li><li class="nav-bar-cell1-rev">Class</li></ul>
  </div><div class="sub-nav"><ul class="sub-nav-list"><li>Summary:&nbsp;</li><li>Nested&nbsp;|&nbsp;</li></ul>
  <div class="nav-list-search"><label for="search-input">SEARCH:</label><input type="text" id="search-input"></div>
  </div></nav></header>
<div class="flex-content"><main role="main">
  <div class="header"><div class="sub-title"><span class="package-label-in-type">Package</span>&nbsp;<a
    href="package-summary.html">org.tides</a></div><h1 title="Class Tide" class="title">Class Tide</h1></div>
  <section class="class-description" id="class-description"><hr>
    <div class="block">Computes the <code>height</code> of the tide at a given time.</div></section>
  <section class="summary"><ul class="summary-list"><li><section class="method-summary" id="method-summary">
    <h2>Method Summary</h2>
    <div class="caption"><span>All Methods</span></div>
    <div class="block">Returns the height in metres.</div></section></li></ul></section>
</main>
<footer role="contentinfo"><hr><p class="legal-copy"><small>Copyright © 2026 Tides. All rights reserved.</small></p>
</footer></div></div>
"""
JAVADOC_17_TEXT = ("Package\xa0org.tides\n\n"  # &nbsp; in the page
                   "# Class Tide\n\n"
                   "---\n\n"
                   "Computes the `height` of the tide at a given time.\n\n"
                   "## Method Summary\n\n"
                   "All Methods\n\n"
                   "Returns the height in metres.\n")

JAVADOC_8 = """
<div class="topNav"><a name="navbar.top"></a><ul class="navList" title="Navigation">
  <li><a href="../../overview-summary.html">Overview</a></li><li class="navBarCell1Rev">Class</li></ul></div>
<div class="subNav"><ul class="navList"><li><a href="Ebb.html" title="class in org.tides">Prev Class</a></li></ul></div>
<div class="header"><div class="subTitle">org.tides</div><h2 title="Class Tide" class="title">Class Tide</h2></div>
<div class="contentContainer"><div class="description"><ul class="blockList"><li class="blockList">
  <div class="block">Computes the height of the tide.</div></li></ul></div></div>
<div class="bottomNav"><ul class="navList"><li><a href="../../overview-summary.html">Overview</a></li></ul></div>
<p class="legalCopy"><small>Copyright © 2016. All rights reserved.</small></p>
"""
JAVADOC_8_TEXT = "org.tides\n\n## Class Tide\n\nComputes the height of the tide.\n"


@pytest.mark.parametrize(("page", "expected"), [(JAVADOC_17, JAVADOC_17_TEXT), (JAVADOC_8, JAVADOC_8_TEXT)],
                         ids=["javadoc-17", "javadoc-8"])
def test_javadoc_pages_keep_the_class_title_and_its_sections(tmp_path, page, expected):
    assert html(tmp_path, page) == expected


GITHUB = """
<header class="AppHeader"><a href="/" aria-label="Homepage">GitHub</a><nav aria-label="Global">Product</nav></header>
<div class="Layout-sidebar"><h2>About</h2><p>Tide prediction tools.</p></div>
<div id="readme"><article class="markdown-body entry-content container-lg" itemprop="text">
  <div class="markdown-heading"><h1 class="heading-element">tides</h1><a id="user-content-tides"
    class="anchor" aria-label="Permalink: tides" href="#tides"><svg class="octicon octicon-link"></svg></a></div>
  <p>Install it with <a href="https://pypi.org/project/tides/">pip</a>:</p>
  <div class="highlight highlight-source-shell"><pre>pip install tides</pre><div class="zeroclipboard-container">
    <clipboard-copy aria-label="Copy" value="pip install tides">Copy</clipboard-copy></div></div>
  <p><a href="docs/img.png"><img src="docs/img.png" alt="A tide curve"></a></p>
</article></div>
<footer class="footer"><p>© 2026 GitHub, Inc.</p><a href="/site/terms">Terms</a></footer>
"""
GITHUB_TEXT = "# tides\n\nInstall it with pip:\n\n```\npip install tides\n```\n\nA tide curve\n"


def test_github_readme_is_its_article_images_as_their_alt_text(tmp_path):
    assert html(tmp_path, GITHUB) == GITHUB_TEXT


def test_a_cookie_banner_goes_but_a_section_about_cookies_stays(tmp_path):
    page = """<main><h1>Sessions</h1><section id="cookies"><h2>Cookies</h2><p>The session id is kept in a
    cookie.</p></section><div id="cookie-consent"><p>This site uses cookies.</p><a href="#ok">OK</a></div>
    </main>"""
    assert html(tmp_path, page) == "# Sessions\n\n## Cookies\n\nThe session id is kept in a\ncookie.\n"


PLAIN = """
<div id="menu"><a href="index.html">Home</a> | <a href="tables.html">Tables</a> | <a href="about.html">About</a></div>
<div id="page">
<h1>Reading tide tables</h1>
<p>A tide table gives the times and heights of high and low water for every day of the year, and the
harbour it was computed for.</p>
<p>Heights are measured from chart datum, the lowest level the tide is expected to reach.</p>
<ul><li>Spring tides</li><li>Neap tides</li></ul>
<p>Always check the date and the time zone before planning a walk on the flats.</p>
</div>
<div id="footer">Copyright 2026 The Harbour Office. <a href="contact.html">Contact</a></div>
"""
PLAIN_TEXT = ("# Reading tide tables\n\n"
              "A tide table gives the times and heights of high and low water for every day of the year, and the\n"
              "harbour it was computed for.\n\n"
              "Heights are measured from chart datum, the lowest level the tide is expected to reach.\n\n"
              "* Spring tides\n* Neap tides\n\n"
              "Always check the date and the time zone before planning a walk on the flats.\n")


def test_a_page_without_landmarks_goes_to_readability_whose_region_is_kept_whole(tmp_path):
    # readability-lxml finds the div#page; its own clean-up would drop the two-item list
    # ("too short"), but the region it found is kept whole.
    assert html(tmp_path, PLAIN) == PLAIN_TEXT
    from readability import Document

    assert "Spring tides" not in Document(PLAIN).summary(html_partial=True)  # why the region is kept whole


def test_keep_links_keeps_body_links_but_headings_are_still_words_and_permalinks_go(tmp_path):
    path = tmp_path / "json.html"
    path.write_text(f"<html><body>{SPHINX}</body></html>", encoding="utf-8")
    text, conversion = convert_file(path, cache_dir=False, keep_links=True)
    assert text == SPHINX_TEXT.replace("Use `dump()` to write a\nJSON document to a file.",
                                       "Use [`dump()`](#json.dump \"json.dump\") to write a\n"
                                       "[JSON document](https://json.org) to a file.")
    assert ", links kept, markitdown " in conversion.converter
    assert conversion.converter == converter_identity(".html", True) != converter_identity(".html")
    assert converter_identity(".pdf", True) == converter_identity(".pdf")  # a PDF has no links to keep


def test_the_raw_conversion_keeps_everything_and_the_furniture_share_counts_what_went(tmp_path):
    path = tmp_path / "tides.html"
    path.write_text('<html><body><nav><a href="/">Home</a></nav><main><p>Tide tables.</p></main></body></html>',
                    encoding="utf-8")
    assert raw_text(path) == "[Home](/)\n\nTide tables.\n"  # 24 characters
    text, _ = convert_file(path, cache_dir=False)
    assert text == "Tide tables.\n"  # 13 characters
    assert furniture_share(raw_text(path), text) == pytest.approx(11 / 24)


# --- PDF: running heads, page numbers, hyphens, page breaks, contents ------------------------------

#: A table of contents page, then three pages of a chapter, each with the running head
#: "Chapter 3: Utilities N" (9 pt) at the top and its page number N alone at the foot. Body
#: text is 10 pt in lines 5 mm apart, 4 mm more between paragraphs; headings 16 pt bold; the
#: contents lines 12 pt, with dot leaders.
PAGES = [
    (None, [("h", "Contents"), ("toc", "1 Introduction . . . . . . . . 2"), ("toc", "2 Sorting . . . . . . . . . . 3")],
     None),
    ("Chapter 3: Utilities 7", [("h", "Utilities"),
                                ("p", "The tools in this chapter read text", "and write text to standard output."),
                                ("p", "The sorting utility reads every line of its",
                                 "input files and writes them in order after a manip-")], "7"),
    ("Chapter 3: Utilities 8", [("p", "ulation of the keys given on the command line.",
                                 "Numeric keys compare as numbers, not text."),
                                ("p", "Careful choice of the field separa-", "tor avoids most surprises.")], "8"),
    ("Chapter 3: Utilities 9", [("h", "Sorting"),
                                ("p", "Stable sorting keeps equal lines", "in the order they had in the input.")], "9"),
]
#: Running heads and page numbers gone; the contents lines are not headings; the paragraph
#: that runs from page 7 to page 8 is one paragraph, its word hyphenated across the page break
#: joined ("manip-" + "ulation"), like the word hyphenated across two lines on page 8.
PAGES_TEXT = ("# Contents\n\n"
              "1 Introduction . . . . . . . . 2\n"
              "2 Sorting . . . . . . . . . . 3\n\n"
              "# Utilities\n\n"
              "The tools in this chapter read text\n"
              "and write text to standard output.\n\n"
              "The sorting utility reads every line of its\n"
              "input files and writes them in order after a manipulation of the keys given on the command line.\n"
              "Numeric keys compare as numbers, not text.\n\n"
              "Careful choice of the field separator avoids most surprises.\n\n"
              "# Sorting\n\n"
              "Stable sorting keeps equal lines\n"
              "in the order they had in the input.\n")


def write_pages(path: Path, pages=PAGES) -> Path:
    pdf = fpdf.FPDF(format="A4")
    pdf.set_auto_page_break(False)
    for header, blocks, footer in pages:
        pdf.add_page()
        if header:
            pdf.set_font("Helvetica", "I", 9)
            pdf.cell(0, 5, header, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(6)
        for block in blocks:
            if block[0] == "h":
                pdf.set_font("Helvetica", "B", 16)
                pdf.cell(0, 8, block[1], new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
            elif block[0] == "toc":
                pdf.set_font("Helvetica", "", 12)
                pdf.cell(0, 6, block[1], new_x="LMARGIN", new_y="NEXT")
            else:
                pdf.set_font("Helvetica", "", 10)
                for line in block[1:]:
                    pdf.cell(0, 5, line, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(4)
        if footer:
            pdf.set_y(-20)
            pdf.set_font("Helvetica", "", 9)
            pdf.cell(0, 5, footer, align="C")
    pdf.output(str(path))
    return path


def test_pdf_without_running_heads_page_numbers_and_breaks(tmp_path):
    path = write_pages(tmp_path / "utilities.pdf")
    text, _ = convert_file(path, cache_dir=False)
    assert text == PAGES_TEXT
    # What chunkwise-convert 1 gave (the clean-up off): every piece of furniture the issue lists.
    raw = raw_text(path)
    assert "Chapter 3: Utilities 8\n" in raw and "\n\n8\n\n" in raw
    assert "## 1 Introduction . . . . . . . . 2 2 Sorting" in raw  # the contents as a heading
    assert "manip\ufffe" in raw and "separa\ufffetor" in raw  # PDFium's hyphen mark, mid-word
    assert "writes them in order after a manip\ufffe7\n\n" in raw  # ... even joined to the page number


def test_a_lone_number_that_does_not_run_with_the_pages_is_body_text(tmp_path):
    # Page numbers 7 and 9 run with the pages; "42" at the foot of the page between does not.
    # It ends no sentence, so the paragraph it ends goes on over the page break.
    lines = {7: ("High water comes at dawn.", "Low water comes at noon."),
             8: ("Spring tides this week.", "Take care on the flats."),
             9: ("Neap tides return on Monday.", "The ferry runs every hour.")}
    pages = [(f"Tide Almanac {n}", [("p", *lines[n])], "42" if n == 8 else str(n)) for n in (7, 8, 9)]
    text, _ = convert_file(write_pages(tmp_path / "almanac.pdf", pages), cache_dir=False)
    assert text == ("High water comes at dawn.\nLow water comes at noon.\n\n"
                    "Spring tides this week.\nTake care on the flats.\n\n42\n"
                    "Neap tides return on Monday.\nThe ferry runs every hour.\n")


def test_two_pages_with_the_same_head_lose_it(tmp_path):
    pages = [("Harbour Guide", [("p", "Boats moor at the east quay.", "Fees are paid at the office.")], "1"),
             ("Harbour Guide", [("p", "The slipway closes at dusk.", "Keys are at the office.")], "2")]
    text, _ = convert_file(write_pages(tmp_path / "guide.pdf", pages), cache_dir=False)
    assert text == ("Boats moor at the east quay.\nFees are paid at the office.\n\n"
                    "The slipway closes at dusk.\nKeys are at the office.\n")


def test_the_running_head_of_a_two_page_chapter_goes_but_a_repeated_heading_stays(tmp_path):
    # "Chapter 2: Waves N" heads only two pages: one repeat is enough for a line set apart at
    # the top in the body's size. "Notes on Version 1" and "... 2" are headings (16 pt) at the
    # top of two pages: they stay.
    body = {1: ("Tides rise twice a day.", "The moon pulls the water."),
            2: ("Tides fall twice a day.", "The sun helps a little."),
            3: ("Spring tides are the largest.", "Neap tides are the smallest."),
            4: ("Waves are raised by wind.", "Swell travels far."),
            5: ("Breakers form on shallow shores.", "Surf follows.")}
    pages = [(f"Chapter {1 if n <= 3 else 2}: {'Tides' if n <= 3 else 'Waves'} {n}",
              ([("h", f"Notes on Version {n - 3}")] if n >= 4 else []) + [("p", *body[n])], str(n))
             for n in range(1, 6)]
    text, _ = convert_file(write_pages(tmp_path / "sea.pdf", pages), cache_dir=False)
    assert text == ("Tides rise twice a day.\nThe moon pulls the water.\n\n"
                    "Tides fall twice a day.\nThe sun helps a little.\n\n"
                    "Spring tides are the largest.\nNeap tides are the smallest.\n\n"
                    "# Notes on Version 1\n\nWaves are raised by wind.\nSwell travels far.\n\n"
                    "# Notes on Version 2\n\nBreakers form on shallow shores.\nSurf follows.\n")


@pytest.mark.parametrize(("line", "expected"), [
    ("7", 7), ("- 12 -", 12), ("Page 3", 3), ("page 3 of 20", 3), ("xiv", 14), ("iv", 4), ("MCM", 1900),
    ("iiii", None), ("vx", None),
])
def test_page_number_forms(line, expected):
    match = convert.pdf._PAGE_NUMBER.match(line.lower())
    assert (convert.pdf._number(match.group(1)) if match else None) == expected


# --- offsets, identity and studies -----------------------------------------------------------------


def test_chunks_and_references_point_into_the_cleaned_text(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pages(docs / "utilities.pdf")
    (docs / "json.html").write_text(f"<html><body>{SPHINX}</body></html>", encoding="utf-8")
    across = "after a manipulation of the keys"  # joined over a page break and a hyphen
    body = "Use `dump()` to write a\nJSON document"  # a link, now its text
    rows = [{"question": "How are lines sorted?", "references": [
                {"document": "utilities.pdf", "start_index": PAGES_TEXT.index(across),
                 "end_index": PAGES_TEXT.index(across) + len(across), "content": across}]},
            {"question": "How is JSON written?", "references": [
                {"document": "json.html", "start_index": SPHINX_TEXT.index(body),
                 "end_index": SPHINX_TEXT.index(body) + len(body), "content": body}]}]
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["validate", "--corpus", str(docs), "--queries", str(queries)]) == 0
    assert "2 queries, 2 references: all match their documents" in capsys.readouterr().out
    corpus = tuner.load_corpus(docs)
    for document in corpus:
        for chunk in tuner.make_chunker("markdown", size=20, levels=2).split(document):
            assert document.text[chunk.start_index:chunk.end_index] == chunk.text
    chunker = tuner.make_chunker("markdown", size=200, levels=2)
    headings = [c.headings for c in chunker.split(corpus.document("json.html"))]
    assert headings == [("json — JSON encoder and decoder",), ("json — JSON encoder and decoder", "Basic Usage")]


def test_convert_stats_prints_the_share_removed_per_file(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tides.html").write_text('<html><body><nav><a href="/">Home</a></nav><main><p>Tide tables.</p></main>'
                                     "</body></html>", encoding="utf-8")
    (docs / "notes.md").write_text("# Notes\n", encoding="utf-8")
    assert main(["convert", str(docs), "-o", str(tmp_path / "out"), "--stats"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "per converted file, least of its page kept first: characters before -> after clean-up, share removed as "
        "furniture, share of the words the page shows a reader (outside links and furniture) kept:",
        "  tides.html               24 ->         13   45.8%  100.0%",
        "  all 1 converted          24 ->         13   45.8%  100.0%"]
    assert main(["convert", str(docs), "-o", str(tmp_path / "out2"), "--keep-links"]) == 0
    assert (tmp_path / "out2" / "tides.html.md").read_text(encoding="utf-8") == "Tide tables.\n"


def test_keep_links_is_part_of_the_corpus_and_a_study_refuses_to_mix_them(tmp_path):
    import optuna

    from tuner.tuning import StudyError
    from tuner.tuning.study.opening import open_study

    from fakes import study_settings

    (tmp_path / "json.html").write_text(f"<html><body>{SPHINX}</body></html>", encoding="utf-8")
    plain, linked = load_corpus(tmp_path / "json.html"), load_corpus(tmp_path / "json.html", keep_links=True)
    assert plain.sha256 != linked.sha256
    assert plain.conversion["converters"][".html"].startswith("html: chunkwise-convert 3, markitdown ")
    assert linked.conversion["converters"][".html"].startswith("html: chunkwise-convert 3, links kept, markitdown ")

    def settings(corpus):
        return study_settings(conversion=corpus.conversion, corpus_sha256=corpus.sha256)

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/s.db")
    open_study(storage, "docs/json", settings(plain))
    with pytest.raises(StudyError) as error:
        open_study(storage, "docs/json", settings(linked))
    assert 'conversion.converters..html: "html: chunkwise-convert 3, markitdown' in str(error.value)
    assert '-> "html: chunkwise-convert 3, links kept, markitdown' in str(error.value)



def test_a_study_file_takes_keep_links(tmp_path):
    from tuner.tuning import StudyError
    from tuner.tuning.study.spec import load_study_file

    study = tmp_path / "s.yaml"
    study.write_text("name: s\ncorpora: {docs: docs}\nqueries: q.jsonl\nspace: quick\nkeep_links: true\n",
                     encoding="utf-8")
    assert load_study_file(study).keep_links is True
    study.write_text("name: s\ncorpora: {docs: docs}\nqueries: q.jsonl\nspace: quick\nkeep_links: 'yes'\n",
                     encoding="utf-8")
    with pytest.raises(StudyError, match=r"s.yaml: keep_links must be true or false, got 'yes'"):
        load_study_file(study)


def test_docx_links_are_their_text_unless_kept(tmp_path):
    docx = pytest.importorskip("docx", reason="python-docx is a test dependency: pip install -e '.[test]'")
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    paragraph = document.add_paragraph("Tide tables are on ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to("https://tides.example/tables", RELATIONSHIP_TYPE.HYPERLINK,
                                                  is_external=True))
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "the harbour site"
    run.append(text)
    link.append(run)
    paragraph._p.append(link)
    paragraph.add_run(".")
    path = tmp_path / "links.docx"
    document.save(str(path))
    assert convert_file(path, cache_dir=False)[0] == "Tide tables are on the harbour site.\n"
    assert convert_file(path, cache_dir=False, keep_links=True)[0] == \
        "Tide tables are on [the harbour site](https://tides.example/tables).\n"
