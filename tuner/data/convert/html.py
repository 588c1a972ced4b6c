"""An HTML page's own content (:func:`html_content`): its generator's documented content container
(:data:`CONTENT_CONTAINERS`) or its landmark, else the region readability-lxml finds, widened until
it holds 90% of the words the page shows a reader; then its furniture dropped
(:data:`FURNITURE_SELECTORS`, permalink anchors, cookie banners), headings as their words and,
unless links are kept, links as their text."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ContentContainer:
    """Where one documentation generator (or an HTML landmark) keeps a page's own content.

    Attributes:
        generator: who lays pages out this way (``"landmark"`` for HTML's own).
        selectors: the container, as any of these simple selectors (``tag``, ``.class``,
            ``#id``, ``[attribute=value]`` or a tag with one of the others).
        outermost: matches nested in other matches count as their outermost (DocBook nests a
            chapter's sections, each ``div.sect1`` inside the ``div.chapter`` that is the page);
            otherwise as their innermost (a landmark inside a wrapper of the same kind).
        title: a sibling before the container that holds the page's title, kept with it.
    """

    generator: str
    selectors: tuple[str, ...]
    outermost: bool = False
    title: str | None = None


#: Where a page keeps its own content, most specific first: the documented content containers
#: of the documentation generators, then the HTML landmarks. The first entry whose matches
#: come down to exactly one element (see ``outermost``) is the content; a page none matches
#: goes to :func:`_fallback_content`. Every region kept is measured against the page's visible
#: text (:func:`_prose_words`), and a page that loses more than a third is named.
CONTENT_CONTAINERS: tuple[ContentContainer, ...] = (
    ContentContainer("GitHub-rendered README", ("article.markdown-body",)),
    ContentContainer("Docusaurus", ("div.theme-doc-markdown",)),
    ContentContainer("MkDocs Material", ("article.md-content__inner",)),
    ContentContainer("Sphinx, Read the Docs theme", ("div[itemprop=articleBody]",)),
    ContentContainer("rustdoc", ("section#main-content",)),
    # Hugo's Docsy and Book themes (Hugo itself has no fixed layout; these are its documentation themes).
    ContentContainer("Hugo, Docsy theme", ("div.td-content",)),
    ContentContainer("Hugo, Book theme", ("article.book-article",)),
    # Sphinx (div.body role=main), MkDocs's own themes, Javadoc 9+ (main role=main), Furo, pydata.
    ContentContainer("landmark", ("[role=main]",)),
    ContentContainer("landmark", ("main",)),
    ContentContainer("Javadoc 8 and older", ("div.contentContainer",), title="div.header"),
    ContentContainer("Doxygen", ("div.contents",), title="div.header"),
    ContentContainer("Sphinx, older themes", ("div.body",)),
    ContentContainer("Sphinx, older themes", ("div.document",)),
    # DocBook XSL's chunked HTML: the page is one top-level division, with div.navheader and
    # div.navfooter around it; its subsections nest inside.
    ContentContainer("DocBook XSL", ("div.set", "div.book", "div.part", "div.chapter", "div.appendix", "div.preface",
                                     "div.article", "div.reference", "div.refentry", "div.sect1", "div.section",
                                     "div.glossary", "div.index", "div.bibliography", "div.colophon"),
                     outermost=True),
    ContentContainer("landmark", ("article",)),
)
#: Page furniture inside the content, dropped: navigation, footers, breadcrumbs, previous/next,
#: forms and buttons, line numbers of code blocks, and the generators' named furniture.
FURNITURE_SELECTORS: tuple[str, ...] = (
    "nav", "footer", "button", "form", "input", "select", "textarea", "dialog", "iframe", "svg",
    "[role=navigation]", "[role=contentinfo]", "[role=banner]", "[role=search]",
    # Sphinx and its themes
    "div.sphinxsidebar", "div.related", "div.rst-footer-buttons", "div.wy-breadcrumbs", "a.headerlink",
    # MkDocs Material
    "a.md-content__button", ".md-source-file", "div.md-sidebar", "div.md-footer",
    # Docusaurus
    "a.hash-link", ".theme-doc-breadcrumbs", ".theme-doc-toc-mobile", ".theme-doc-footer", ".pagination-nav",
    ".theme-edit-this-page",
    # GitHub
    "a.anchor", "clipboard-copy",
    # Javadoc
    "div.skip-nav", "div.sub-nav", "div.top-nav", "div.topNav", "div.subNav", "div.bottomNav",
    # DocBook, Texinfo, LaTeX2HTML
    "div.navheader", "div.navfooter", "div.toc", "a.copiable-anchor", "table.header", "div.navigation",
    "ul.ChildLinks", "a#CHILD_LINKS",
    # Doxygen (div.summary: the header's links to the page's own sections)
    "div.summary", "div.navpath", "div#nav-path", "div#side-nav", "div#MSearchBox", "address.footer",
    # rustdoc
    "a.srclink", "a.src", "div#rustdoc-toc", "nav.sidebar", "div.sidebar-elems", "summary.hideme",
    # pandoc (its table of contents, nav#TOC or, before pandoc 2, div#TOC)
    "#TOC",
    # Pygments line numbers, copy buttons
    "td.linenos", "span.linenos", "div.linenodiv", "a.copybtn",
)
#: Lists Javadoc lays a page out with (a section per item): unwrapped, so that the sections'
#: headings are headings, not list items.
LAYOUT_LIST_SELECTORS: tuple[str, ...] = ("ul.summary-list", "ul.details-list", "ul.member-list", "ul.blockList",
                                          "ul.blockListLast")
#: A permalink anchor's whole text (Sphinx ``¶``, Texinfo and Docusaurus ``#``, ``§``, ``🔗``).
_PERMALINK_SIGNS = frozenset({"¶", "§", "#", "🔗", "\u200b", ""})
#: Class or id of a cookie or consent banner (``cookie-banner``, ``cc-window``, ``onetrust-...``).
_COOKIE_BANNER = re.compile(r"^(?:cookies?|gdpr|consent)[-_]?(?:banner|bar|notice|consent|popup|modal|law|alert|"
                            r"container|wrapper|dialog|message)$|^cookie-?consent|^cc-(?:window|banner)$|^onetrust|"
                            r"^cookiebot|^cybotcookiebot", re.IGNORECASE)
_SELECTOR = re.compile(r"^([\w-]+)?(?:\.([\w-]+))?(?:#([\w-]+))?(?:\[([\w-]+)=([\w-]+)\])?$")


def _matcher(selector: str) -> Callable[[Any], bool]:
    """A test of an element for one of the simple selectors above (faster than CSS matching,
    which took most of the conversion time on large pages)."""
    name, cls, identifier, attribute, value = _SELECTOR.match(selector).groups()  # type: ignore[union-attr]
    return lambda tag: ((name is None or tag.name == name) and (cls is None or cls in (tag.get("class") or ()))
                        and (identifier is None or tag.get("id") == identifier)
                        and (attribute is None or tag.get(attribute) == value))


def _any_matcher(selectors: tuple[str, ...]) -> Callable[[Any], bool]:
    tests = [_matcher(selector) for selector in selectors]
    return lambda tag: any(test(tag) for test in tests)


_CONTENT_MATCHERS = [(container, _any_matcher(container.selectors)) for container in CONTENT_CONTAINERS]
_FURNITURE_MATCHERS = [_matcher(selector) for selector in FURNITURE_SELECTORS]
_LAYOUT_LIST_MATCHERS = [_matcher(selector) for selector in LAYOUT_LIST_SELECTORS]

#: A region readability-lxml chose must hold this share of the page's visible words
#: (:func:`_prose_words`); a smaller one is widened to its smallest ancestor that does.
_REGION_MIN_SHARE = 0.9
#: A page whose kept content holds less than this share of its visible words is named in a
#: warning (the conversion's warnings, the corpus loader's summary, ``convert --stats``).
KEPT_WARNING_SHARE = 2 / 3


@dataclass(frozen=True)
class HtmlContent:
    """What :func:`html_content` kept of a page.

    Attributes:
        html: the content, cleaned (see :func:`html_content`).
        found_by: the :class:`ContentContainer` generator that matched, or ``"fallback"``.
        visible_words: words the page shows a reader outside furniture and link text
            (:func:`_prose_words`).
        kept_words: those of them inside the content kept.
    """

    html: str
    found_by: str
    visible_words: int
    kept_words: int

    @property
    def kept_share(self) -> float:
        """``kept_words / visible_words`` (1 for a page with no visible words outside links)."""
        return self.kept_words / self.visible_words if self.visible_words else 1.0


def html_content(markup: str, *, keep_links: bool = False) -> HtmlContent:
    """A page's own content as HTML, cleaned, what found it and how much of the page it keeps.

    The content is found by :data:`CONTENT_CONTAINERS` (its name says which generator or
    landmark matched) or, on a page none of them matches, by :func:`_fallback_content`
    (``"fallback"``), whose region is widened until it holds :data:`_REGION_MIN_SHARE` of
    the page's visible words. Then furniture goes (:data:`FURNITURE_SELECTORS`, permalink
    anchors, cookie banners), headings become their words only, and, unless ``keep_links``,
    links become their text and images their alt text.
    """
    from bs4 import BeautifulSoup

    with warnings.catch_warnings():
        ignore_parser_notices()
        soup = BeautifulSoup(markup, "lxml")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    page = soup.body or soup
    tags = page.find_all(True)
    parts, found_by = [], "fallback"
    for container, matches in _CONTENT_MATCHERS:
        found = [tag for tag in tags if matches(tag)]
        if container.outermost:
            chosen = [t for t in found if not any(matches(p) for p in t.parents)]
        else:
            chosen = [t for t in found if not any(any(p is t for p in other.parents) for other in found)]
        if len(chosen) == 1 and chosen[0].get_text().strip():
            parts, found_by = [chosen[0]], container.generator
            if container.title:
                title = chosen[0].find_previous_sibling(_matcher(container.title))
                if title is not None:
                    parts.insert(0, title)
            break
    if not parts:
        # Furniture the rules know goes first, and headings become their words, so that the
        # library scores the rest (a heading that is an anchor would count as a link and go).
        _clean_content(page, keep_links=True)
        for heading in page.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
            # A title wrapped in divs of its own (DocBook's div.titlepage) is short enough for
            # readability to drop the wrapper, title and all: unwrap it.
            while heading.parent is not None and heading.parent.name == "div" and \
                    heading.parent.get_text().split() == heading.get_text().split():
                heading.parent.unwrap()
        counts = _prose_words(page)
        region = _content_region(page, _fallback_content(str(page)))
        parts = [_widened(region, page, counts, _REGION_MIN_SHARE * sum(counts.values()))]
    else:
        counts = _prose_words(page)
    visible = sum(counts.values())
    kept = sum(_words_within(part, counts) for part in parts)
    return HtmlContent("".join(_clean_content(part, keep_links) for part in parts), found_by, visible, kept)


def ignore_parser_notices() -> None:
    """Silence BeautifulSoup's notices about its own parser choice (an XHTML page read with
    the HTML parser, which is what chunkwise wants): they say nothing about the document, and
    would be one line per page."""
    from bs4 import MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
    warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)


def _prose_words(page: Any) -> dict[int, int]:
    """The words a reader sees on ``page`` outside its furniture, per text node (by ``id``):
    text outside :data:`FURNITURE_SELECTORS` and other furniture (:func:`_is_furniture`), and
    outside links (navigation that no rule knows is mostly links; body text is mostly not).
    What a kept region is measured against."""
    from bs4 import NavigableString

    verdicts: dict[int, bool] = {}

    def left_out(tag: Any) -> bool:
        key = id(tag)
        if key not in verdicts:
            verdicts[key] = tag.name == "a" or _is_furniture(tag)
        return verdicts[key]

    counts: dict[int, int] = {}
    for string in page.find_all(string=True):
        if type(string) is not NavigableString:
            continue
        words = len(_WORD.findall(string))
        if not words:
            continue
        if any(left_out(parent) for parent in string.parents if parent is not page and parent.name != "[document]"):
            continue
        counts[id(string)] = words
    return counts


_WORD = re.compile(r"\w+")


def _words_within(element: Any, counts: dict[int, int]) -> int:
    """The visible words (``counts`` from :func:`_prose_words`) inside ``element``."""
    from bs4 import NavigableString

    if isinstance(element, NavigableString):
        return counts.get(id(element), 0)
    return sum(counts.get(id(string), 0) for string in element.find_all(string=True))


def _widened(region: Any, page: Any, counts: dict[int, int], needed: float) -> Any:
    """``region``, or its smallest ancestor within ``page`` holding ``needed`` visible words:
    the safety net under a library's choice of region, which on a page of many similar
    sections (a DocBook reference page of parameters) can be one subsection."""
    while region is not page and region.parent is not None and _words_within(region, counts) < needed:
        region = region.parent
    return region


def _fallback_content(markup: str) -> str:
    """The main content of a page with no landmark and no known generator's container, as
    readability-lxml extracts it (Mozilla Readability's scoring: the block with the most prose
    wins, with its siblings that score well)."""
    from readability import Document

    return Document(markup).summary(html_partial=True)


#: The share of the extracted text the content region must hold (see :func:`_content_region`).
_REGION_SHARE = 0.9


def _content_region(page: Any, extracted: str) -> Any:
    """The element of ``page`` that holds what the library extracted: the deepest one holding
    :data:`_REGION_SHARE` of the extracted text's characters. The region is then kept whole:
    readability's clean-up also drops blocks it finds too short or too full of links (a
    two-item list, a list of commands with man-page links), which a corpus whose every sentence
    may be asked about cannot lose; it is trusted to find where the content is, not to edit it."""
    from bs4 import BeautifulSoup, NavigableString

    kept = {" ".join(text.split()) for text in BeautifulSoup(extracted, "lxml").find_all(string=True)} - {""}
    weight: dict[int, int] = {}
    depth: dict[int, int] = {}
    elements: dict[int, Any] = {}
    total = 0
    for string in page.find_all(string=True):
        text = " ".join(string.split())
        if type(string) is not NavigableString or text not in kept:
            continue
        total += len(text)
        chain = []
        for parent in string.parents:
            chain.append(parent)
            if parent is page:
                break
        for level, parent in enumerate(reversed(chain)):
            weight[id(parent)] = weight.get(id(parent), 0) + len(text)
            depth[id(parent)], elements[id(parent)] = level, parent
    if not total:
        return page
    best = max((key for key in weight if weight[key] >= _REGION_SHARE * total), key=lambda key: depth[key])
    return elements[best]


def _clean_content(content: Any, keep_links: bool) -> str:
    """The content element's HTML without furniture, headings as their words, links as their text."""
    doomed = [tag for tag in content.find_all(True) if _is_furniture(tag)]
    for tag in doomed:
        if not tag.decomposed:
            tag.decompose()
    for layout in [tag for tag in content.find_all("ul") if any(matches(tag) for matches in _LAYOUT_LIST_MATCHERS)]:
        for item in layout.find_all("li", recursive=False):
            item.unwrap()
        layout.unwrap()
    for heading in content.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
        for br in heading.find_all("br"):
            br.replace_with(" ")
        heading.string = " ".join(heading.get_text().split())  # its words only, no links or code marks
    if not keep_links:
        for link in content.find_all("a"):
            link.unwrap()
        for image in content.find_all("img"):
            alt = " ".join((image.get("alt") or "").split())
            if alt:
                image.replace_with(alt)
            else:
                image.decompose()
    return str(content)


def _is_furniture(tag: Any) -> bool:
    """Whether an element inside the content is furniture: a :data:`FURNITURE_SELECTORS`
    match, a cookie banner, or a permalink anchor (a same-page link whose text is ``¶``, ``#``...)."""
    if any(matches(tag) for matches in _FURNITURE_MATCHERS):
        return True
    if any(_COOKIE_BANNER.match(name) for name in [*(tag.get("class") or ()), tag.get("id") or ""] if name):
        return True
    return tag.name == "a" and (tag.get("href") or "").startswith("#") and \
        tag.get_text().strip() in _PERMALINK_SIGNS and tag.find("img") is None

