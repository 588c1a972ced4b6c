"""No body text lost without saying so: generators' containers, the safety net under
readability's choice, the warning naming a page that lost more than a third, ``convert --stats``.

The pages are written here by hand in the shape their generator gives them (DocBook XSL's
chunked HTML as in PostgreSQL's manual: ``div.navheader``, one top-level ``div.sect1`` with
``div.sect2`` subsections, ``div.navfooter``; no landmark). Expected words and shares are
counted by hand from what the page shows a reader.
"""

from __future__ import annotations

import re

import pytest

import tuner.data.convert as convert
from tuner.cli import main
from tuner.data.convert import convert_file


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))


NAVHEADER = """<div class="navheader"><table width="100%" summary="Navigation header"><tr><th colspan="5"
align="center">20.7. Query Planning</th></tr><tr><td><a accesskey="p" href="replication.html">Prev</a></td>
<td><a accesskey="u" href="config.html">Up</a></td><th>Chapter 20. Server Configuration</th>
<td><a accesskey="h" href="index.html">Home</a></td><td><a accesskey="n" href="logging.html">Next</a></td></tr>
</table><hr /></div>"""
NAVFOOTER = """<div class="navfooter"><hr /><table width="100%" summary="Navigation footer"><tr><td>
<a accesskey="p" href="replication.html">Prev</a></td><td><a accesskey="u" href="config.html">Up</a></td>
<td><a accesskey="n" href="logging.html">Next</a></td></tr><tr><td>20.6. Replication</td><td>
<a accesskey="h" href="index.html">Home</a></td><td>20.8. Error Reporting and Logging</td></tr></table></div>"""


def parameter(name: str, kind: str, text: str) -> str:
    return (f'<dt id="GUC-{name.upper()}"><span class="term"><code class="varname">{name}</code> '
            f'(<code class="type">{kind}</code>) <a id="id-{name}" class="indexterm"></a></span> '
            f'<a href="#GUC-{name.upper()}" class="id_link">#</a></dt><dd><p>{text}</p></dd>')


#: The GEQO subsection is long prose; the other two are lists of short parameter entries.
GEQO_PROSE = [
    "The genetic query optimizer (GEQO) is an algorithm that does query planning using heuristic searching.",
    "This reduces planning time for complex queries (those joining many relations), at the cost of producing "
    "plans that are sometimes inferior to those found by the normal exhaustive-search algorithm.",
    "Each candidate join order is encoded as a string of integers, and a population of such strings is evolved "
    "over many generations, the fittest surviving to the next, until the planner settles on the best it has seen.",
    "Because the search is randomised, two runs of the same query may produce different plans unless the seed is "
    "fixed, which matters when comparing plans across sessions or investigating a regression in production.",
    "The cost of each candidate is estimated with the same cost model as the exhaustive search, so the quality of "
    "the statistics gathered by ANALYZE still decides how good the final plan can be on real data.",
]
PARAMETERS = [
    ("enable_seqscan", "boolean", "Enables or disables the query planner's use of sequential scan plan types."),
    ("enable_indexscan", "boolean", "Enables or disables the query planner's use of index-scan plan types."),
    ("enable_sort", "boolean", "Enables or disables the query planner's use of explicit sort steps."),
    ("geqo_threshold", "integer", "Use genetic query optimization to plan queries with at least this many items."),
    ("default_statistics_target", "integer", "Sets the default statistics target for table columns."),
]


def section(kind: str, ident: str, title: str, level: int, body: str) -> str:
    return (f'<div class="{kind}" id="{ident}"><div class="titlepage"><div><div><h{level} class="title">{title}'
            f"</h{level}></div></div></div>{body}</div>")


def docbook_page(sect1: str = "sect1", sect2: str = "sect2") -> str:
    planner = section(sect2, "PLANNER-METHOD", "20.7.1. Planner Method Configuration", 3,
                      "<p>These parameters influence the plans chosen.</p><div class=\"variablelist\">"
                      '<dl class="variablelist">' + "".join(parameter(*p) for p in PARAMETERS[:3]) + "</dl></div>")
    geqo = section(sect2, "GEQO", "20.7.3. Genetic Query Optimizer", 3,
                   "".join(f"<p>{sentence}</p>" for sentence in GEQO_PROSE) + '<div class="variablelist">'
                   '<dl class="variablelist">' + parameter(*PARAMETERS[3]) + "</dl></div>")
    other = section(sect2, "OTHER", "20.7.4. Other Planner Options", 3,
                    '<div class="variablelist"><dl class="variablelist">' + parameter(*PARAMETERS[4]) + "</dl></div>")
    body = section(sect1, "RUNTIME-CONFIG-QUERY", "20.7. Query Planning", 2, planner + geqo + other)
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
            'Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><html xmlns="http://www.w3.'
            'org/1999/xhtml"><head><title>20.7. Query Planning</title><meta name="generator" content="DocBook XSL '
            f'Stylesheets Vsnapshot" /></head><body id="docContent" class="container-fluid col-10">{NAVHEADER}{body}'
            f"{NAVFOOTER}</body></html>")


#: What a reader reads as the page's document, in order (the navigation header and footer aside).
SECTION_TEXT = (["20.7. Query Planning", "20.7.1. Planner Method Configuration",
                 "These parameters influence the plans chosen."]
                + [part for name, kind, text in PARAMETERS[:3] for part in (name, f"({kind})", text)]
                + ["20.7.3. Genetic Query Optimizer", *GEQO_PROSE, *PARAMETERS[3]]
                + ["20.7.4. Other Planner Options", *PARAMETERS[4]])
NAVIGATION = ["Prev", "Up", "Home", "Next", "Chapter 20. Server Configuration", "20.6. Replication",
              "20.8. Error Reporting and Logging"]


def words_in_order(text: str, parts: list[str]) -> list[str]:
    """The parts not found in ``text`` in this order (whitespace and ``*``/`` ` `` marks aside)."""
    plain = " ".join(text.replace("`", "").replace("*", "").split())
    missing, at = [], 0
    for part in parts:
        found = plain.find(" ".join(part.split()), at)
        if found < 0:
            missing.append(part)
        else:
            at = found + len(part)
    return missing


def test_a_docbook_page_keeps_every_section_and_drops_its_navigation(tmp_path):
    path = tmp_path / "runtime-config-query.html"
    path.write_text(docbook_page(), encoding="utf-8")
    text, conversion = convert_file(path, cache_dir=False)
    assert words_in_order(text, SECTION_TEXT) == []
    assert [n for n in NAVIGATION if n in text] == []
    assert "#" not in re.sub(r"(?m)^#+ ", "", text)  # the parameters' permalink signs went
    assert conversion.kept_share == 1.0
    # What the readability library alone picks on this page: the prose subsection only.
    assert "enable_seqscan" not in convert.html._fallback_content(docbook_page())
    assert "Genetic Query Optimizer" in convert.html._fallback_content(docbook_page())


def test_readabilitys_small_subsection_is_widened_to_the_whole_content(tmp_path):
    # The same page with class names no generator rule knows: readability picks the GEQO
    # subsection (70% of the visible words outside links), which the safety net widens to all of them.
    page = docbook_page(sect1="level-one", sect2="level-two")
    assert "enable_seqscan" not in convert.html._fallback_content(page)
    path = tmp_path / "query.html"
    path.write_text(page, encoding="utf-8")
    text, conversion = convert_file(path, cache_dir=False)
    assert words_in_order(text, SECTION_TEXT) == []
    assert conversion.kept_share >= 0.9


#: A page whose main landmark holds 5 of the 20 words it shows outside links: the rest is a
#: sibling block no rule knows as furniture. Kept: 5 / 20 = 25%.
LOSSY = ("<html><body><main><p>Tide tables list high water.</p></main><div class=\"notes\"><p>Heights are "
         "measured from chart datum, the lowest level the tide reaches, at every harbour.</p></div></body></html>")
WHOLE = "<html><body><nav><a href=\"/\">Home</a></nav><main><p>Tide tables.</p></main></body></html>"


def test_a_page_that_lost_more_than_a_third_is_named(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lossy.html").write_text(LOSSY, encoding="utf-8")
    (docs / "whole.html").write_text(WHOLE, encoding="utf-8")
    assert main(["convert", str(docs), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert ("chunkwise: corpus 'docs': 1 page(s) lost more than a third of the text they show a reader in "
            "conversion (taken for page furniture around the content their generator marks): lossy.html (25% kept); "
            "check their converted text\n") in err
    assert "whole.html (" not in err
    text, conversion = convert_file(docs / "lossy.html", cache_dir=False)
    assert (conversion.visible_words, conversion.kept_words) == (20, 5)
    assert text == "Tide tables list high water.\n"


def test_convert_stats_lists_the_pages_that_kept_least_first(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "whole.html").write_text(WHOLE, encoding="utf-8")
    (docs / "lossy.html").write_text(LOSSY, encoding="utf-8")
    (docs / "notes.md").write_text("# Notes\n", encoding="utf-8")
    assert main(["convert", str(docs), "-o", str(tmp_path / "out"), "--stats"]) == 0
    out = capsys.readouterr().out.splitlines()
    # whole.html: "[Home](/)\n\nTide tables.\n" (24 characters) -> "Tide tables.\n" (13); its 2
    # visible words ("Home" is a link in the navigation) kept. lossy.html: 28 + 2 + 91 + 1 = 122
    # characters before (two paragraphs), its main's 28 + 1 after; 5 of its 20 words kept.
    assert out[1:] == [
        "per converted file, least of its page kept first: characters before -> after clean-up, share removed as "
        "furniture, share of the words the page shows a reader (outside links and furniture) kept:",
        "  lossy.html              122 ->         29   76.2%   25.0%",
        "  whole.html               24 ->         13   45.8%  100.0%",
        "  all 2 converted         146 ->         42   71.2%   31.8%",
        "1 page(s) lost more than a third of the text they show a reader in conversion (taken for page furniture "
        "around the content their generator marks): lossy.html (25% kept); check their converted text"]


def test_container_knowledge_is_declared_once_as_data():
    generators = {c.generator for c in convert.CONTENT_CONTAINERS}
    assert {"DocBook XSL", "Doxygen", "rustdoc", "Docusaurus", "MkDocs Material", "Javadoc 8 and older"} <= generators
    docbook = next(c for c in convert.CONTENT_CONTAINERS if c.generator == "DocBook XSL")
    assert docbook.outermost and {"div.sect1", "div.chapter", "div.refentry", "div.book"} <= set(docbook.selectors)


def test_pandoc_and_doxygen_pages_keep_their_title_and_drop_their_contents(tmp_path):
    pandoc = tmp_path / "bup-save.1.html"
    pandoc.write_text('<html><body><header id="title-block-header"><h1 class="title">bup-save(1)</h1></header>'
                      '<nav id="TOC" role="doc-toc"><ul><li><a href="#name">NAME</a></li></ul></nav>'
                      '<h1 id="name">NAME</h1><p>bup-save - create a new bup backup set</p></body></html>',
                      encoding="utf-8")
    assert convert_file(pandoc, cache_dir=False)[0] == ("# bup-save(1)\n\n# NAME\n\n"
                                                        "bup-save - create a new bup backup set\n")
    doxygen = tmp_path / "json__object_8h.html"
    doxygen.write_text('<html><body><div id="top"><div id="projectname">json-c</div></div><div class="header">'
                       '<div class="summary"><a href="#func-members">Functions</a></div><div class="headertitle">'
                       '<div class="title">json_object.h File Reference</div></div></div><div class="contents">'
                       '<p>Core json-c API.</p></div><hr class="footer"/><address class="footer"><small>Generated by'
                       ' doxygen</small></address></body></html>', encoding="utf-8")
    assert convert_file(doxygen, cache_dir=False)[0] == "json_object.h File Reference\n\nCore json-c API.\n"
