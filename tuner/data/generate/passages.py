"""Where questions are asked about and where their excerpts are: passages drawn in proportion to
the corpus's size and spread over it (:class:`PassageSampler`, ``draw="size"``) across documents
and their sections (:class:`SectionSampler`, ``draw="documents"``) or the two in turn
(:class:`MixedSampler`, ``draw="mix"``), an excerpt sampled from a passage
(:func:`sample_excerpt`), and a model's copy of an excerpt located at exact offsets (:func:`locate`)."""

from __future__ import annotations

import bisect
import itertools
import random
import re

from ...errors import ChunkwiseError
from ...text.sentences import split_sentences
from ..corpus import Corpus
from ..excerpts import locate as locate_excerpt

#: A sampled excerpt: a sentence of at least this many words, joined by the next one while shorter
#: than ``_SHORT_EXCERPT`` characters, and never longer than ``_LONG_EXCERPT``.
_EXCERPT_WORDS = 8
_SHORT_EXCERPT = 120
_LONG_EXCERPT = 600

#: How passages are drawn: in proportion to the corpus's size (:class:`PassageSampler`), across
#: documents and their sections, each asked about equally often (:class:`SectionSampler`), or the
#: two in turn (:class:`MixedSampler`).
DRAWS = ("size", "documents", "mix")


def passage_sampler(corpus: Corpus, draw: str, chars: int, slices: int, rng: random.Random):
    """The sampler of ``draw`` (one of :data:`DRAWS`); ``slices`` is the size draw's number of slices."""
    if draw == "documents":
        return SectionSampler(corpus, chars, rng)
    if draw == "mix":
        return MixedSampler(corpus, chars, slices, rng)
    return PassageSampler(corpus, chars, slices, rng)


class MixedSampler:
    """Half the passages in proportion to size, half across documents and sections, in turn (draw 0
    by size, draw 1 by document, ...): a team's questions usually sit between the two, more about
    the long manuals than a document-by-document draw asks, fewer than their share of the text. The
    size half spreads its draws over ``ceil(slices / 2)`` slices, as a size draw of that many would."""

    def __init__(self, corpus: Corpus, chars: int, slices: int, rng: random.Random) -> None:
        self.by_size = PassageSampler(corpus, chars, (slices + 1) // 2, rng)
        self.by_document = SectionSampler(corpus, chars, rng)
        self.drawn = 0

    def next(self) -> tuple[str, int, int]:
        """A (document id, start, end) window of about ``chars`` characters, cut at whitespace."""
        sampler = self.by_document if self.drawn % 2 else self.by_size
        self.drawn += 1
        return sampler.next()


class PassageSampler:
    """Passages in proportion to the corpus's size and spread over it (see the module docstring):
    draw ``i`` centres its passage on a character of the ``i``-th of ``slices`` equal slices of
    the corpus's text (documents end to end), slices taken in a seeded order."""

    def __init__(self, corpus: Corpus, chars: int, slices: int, rng: random.Random) -> None:
        self.documents = [d for d in corpus if d.text.strip()]
        if not self.documents:
            raise ChunkwiseError(f"the corpus {corpus.name!r} has no text to ask questions about")
        self.ends = list(itertools.accumulate(len(d.text) for d in self.documents))
        self.chars, self.rng, self.slices = chars, rng, max(1, slices)
        self.order = list(range(self.slices))
        rng.shuffle(self.order)
        self.drawn = 0

    def next(self) -> tuple[str, int, int]:
        """A (document id, start, end) window of about ``chars`` characters, cut at whitespace."""
        piece = self.order[self.drawn % self.slices]
        self.drawn += 1
        total = self.ends[-1]
        position = min(total - 1, int((piece + self.rng.random()) * total / self.slices))
        index = bisect.bisect_right(self.ends, position)
        document = self.documents[index]
        offset = position - (self.ends[index - 1] if index else 0)
        return (document.id, *passage_around(document.text, offset, self.chars))


class SectionSampler:
    """Passages across documents and sections, not in proportion to size: documents are taken in a
    seeded round-robin (each once per round, every round in a fresh seeded order), so each is asked
    about equally often however long it is; within a document its sections (:func:`sections`) are
    taken in turn the same way, and the passage is drawn inside the section
    (:func:`passage_in_section`)."""

    def __init__(self, corpus: Corpus, chars: int, rng: random.Random) -> None:
        self.documents = [d for d in corpus if d.text.strip()]
        if not self.documents:
            raise ChunkwiseError(f"the corpus {corpus.name!r} has no text to ask questions about")
        self.sections = [sections(d.text) for d in self.documents]
        self.chars, self.rng = chars, rng
        self.round: list[int] = []
        self.section_rounds: list[list[int]] = [[] for _ in self.documents]

    def next(self) -> tuple[str, int, int]:
        """A (document id, start, end) window of about ``chars`` characters, cut at whitespace."""
        index = self._turn(self.round, len(self.documents))
        document = self.documents[index]
        spans = self.sections[index]
        span = spans[self._turn(self.section_rounds[index], len(spans))]
        return (document.id, *passage_in_section(document.text, span, self.chars, self.rng))

    def _turn(self, left: list[int], count: int) -> int:
        """The next of ``count`` items in a seeded round-robin whose round's remainder is ``left``."""
        if not left:
            left.extend(range(count))
            self.rng.shuffle(left)
        return left.pop()


#: A markdown ATX heading (``#`` to ``######`` and a space, or alone on its line).
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
#: The fence that opens or closes a fenced code block (inside it, ``# comment`` is no heading).
_FENCE = re.compile(r" {0,3}(```|~~~)")


def sections(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of ``text``'s sections: each markdown heading (``#`` to ``######``,
    outside fenced code) starts one that runs to the next heading, and the text before the first
    heading is one too. A section with nothing but its heading (or blank) is left out; a text
    without headings is one section.

    >>> text = "Intro.\\n# A\\nalpha\\n```\\n# not a heading\\n```\\n## B\\n## C\\ngamma\\n"
    >>> [text[a:b] for a, b in sections(text)]
    ['Intro.\\n', '# A\\nalpha\\n```\\n# not a heading\\n```\\n', '## C\\ngamma\\n']
    >>> sections("no headings here")
    [(0, 16)]
    """
    starts, fence, at = [0], None, 0
    for line in text.splitlines(keepends=True):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence:
                fence = None
        elif opened:
            fence = opened.group(1)
        elif _HEADING.match(line) and at:
            starts.append(at)
        at += len(line)
    bounds = [*starts, len(text)]
    spans = []
    for start, end in itertools.pairwise(bounds):
        body = text[start:end]
        if _HEADING.match(body):
            body = body.split("\n", 1)[1] if "\n" in body else ""
        if body.strip():
            spans.append((start, end))
    return spans or [(0, len(text))]


def passage_in_section(text: str, section: tuple[int, int], chars: int, rng: random.Random) -> tuple[int, int]:
    """The (start, end) of about ``chars`` characters of ``text`` for a question about ``section``:
    a section longer than ``chars`` gets a passage inside it, centred on a character drawn evenly
    (cut at whitespace, never past the section); a shorter one is shown whole, inside a passage of
    ``chars`` centred on a point drawn so that the section still fits (the same section drawn again
    comes with other context, so it is another request, not the cached reply to the same one).

    >>> text = "# A\\nshort\\n# B\\n" + "word " * 40
    >>> start, end = passage_in_section(text, (16, len(text)), 30, random.Random(0))
    >>> 16 <= start and end <= len(text) and end - start >= 30
    True
    >>> passage_in_section(text, (0, 10), 1000, random.Random(0)) == (0, len(text))
    True
    """
    start, end = section
    if end - start <= chars:
        low, high = max(start, end - chars // 2), min(end, start + chars // 2)
        return passage_around(text, low + int(rng.random() * (high - low + 1)), chars)
    offset = chars // 2 + int(rng.random() * (end - start - chars))
    inner_start, inner_end = passage_around(text[start:end], offset, chars)
    return start + inner_start, start + inner_end


def passage_around(text: str, offset: int, chars: int) -> tuple[int, int]:
    """The (start, end) of about ``chars`` characters of ``text`` centred on ``offset`` (moved
    inward at the text's ends), widened to whitespace so no word is cut.

    >>> text = "alpha beta gamma delta epsilon"
    >>> start, end = passage_around(text, 13, 10)
    >>> text[start:end]
    'beta gamma delta'
    """
    if len(text) <= chars:
        return 0, len(text)
    start = min(max(0, offset - chars // 2), len(text) - chars)
    end = start + chars
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return start, end


def _whole_word_matches(text: str, content: str, start: int, end: int) -> list[int]:
    """Where ``content`` occurs in ``text[start:end]`` without cutting a word at either end: an
    excerpt is never the tail of a longer word ("cov" inside "vcov" is not a copy of "cov").

    >>> _whole_word_matches("vcov and cov", "cov", 0, 12)
    [9]
    """
    out, at = [], text.find(content, start, end)
    while at != -1:
        if not _cuts_a_word(text, at, at + len(content)):
            out.append(at)
        at = text.find(content, at + 1, end)
    return out


def _cuts_a_word(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` begins or ends inside a word of ``text``."""
    word = _is_word_character
    return bool((start > 0 and word(text[start - 1]) and word(text[start]))
                or (end < len(text) and word(text[end]) and word(text[end - 1])))


def locate(text: str, content: str, window: tuple[int, int]) -> tuple[int, int] | None:
    """Exact offsets of ``content`` in ``text``, preferring the passage ``window``.

    Exact matches first (inside the window, else a unique one in the whole text), then a
    whitespace-normalised match inside the window mapped back to exact offsets, then one that
    leaves markdown markup out too (:func:`tuner.data.excerpts.locate`: found once in the window),
    then a near copy of the window's words (:func:`near_copy`). The offsets are always the
    document's: the excerpt stored is its text there, never the model's copy.

    >>> text = "See the `max_jobs` setting: it **caps** parallel jobs."
    >>> start, end = locate(text, "the max_jobs setting: it caps parallel jobs.", (0, len(text)))
    >>> text[start:end]
    'the `max_jobs` setting: it **caps** parallel jobs.'
    """
    content = content.strip()
    if not content:
        return None
    inside = _whole_word_matches(text, content, *window)
    if inside:
        return inside[0], inside[0] + len(content)
    anywhere = _whole_word_matches(text, content, 0, len(text))
    if len(anywhere) == 1:
        return anywhere[0], anywhere[0] + len(content)
    # Whitespace-normalised: collapse runs of whitespace, remembering original positions.
    passage = text[window[0] : window[1]]
    normal_chars, origin = [], []
    for i, ch in enumerate(passage):
        if ch.isspace():
            if normal_chars and normal_chars[-1] == " ":
                continue
            normal_chars.append(" ")
        else:
            normal_chars.append(ch)
        origin.append(window[0] + i)
    normal = "".join(normal_chars)
    needle = re.sub(r"\s+", " ", content)
    for at in _whole_word_matches(normal, needle, 0, len(normal)):
        return origin[at], origin[at + len(needle) - 1] + 1
    # Markdown markup lost in the copy (``**``, backticks, link targets), found once in the passage.
    found = locate_excerpt(passage, content)
    if found.found and not _cuts_a_word(passage, found.start, found.end):
        return window[0] + found.start, window[0] + found.end
    return near_copy(text, content, window)


#: A near copy: runs of at least ``_RUN_WORDS`` words of the passage, in order, hold at least
#: ``_NEAR_COPY`` of the copy's words, and the passage's span from the first run to the last is at
#: most ``_SPAN_SLACK`` times the copy's length in words.
_RUN_WORDS = 3
_NEAR_COPY = 0.8
_SPAN_SLACK = 1.5
#: A word, an apostrophe inside it included ("don't" is one word, not "don" and "t").
_WORDS = re.compile(r"\w+(?:['’]\w+)*")


def near_copy(text: str, content: str, window: tuple[int, int]) -> tuple[int, int] | None:
    """Exact offsets of the passage's span that ``content`` copies with a few words changed,
    dropped or added (a small model's copy often merges two sentences or edits a word): the words
    of runs the two share (at least three words each, in order) cover 80% of the copy's words,
    and the span from the first run to the last is at most 1.5 times the copy's length (so up to a
    third of the span may be words the copy left out, such as a clause between two sentences it
    merged). The span is the document's text, never the copy. A paraphrase is not a near copy:
    ``None``.

    >>> text = "Intro. The scheduler runs each job at most once per window, in submission order. Then."
    >>> start, end = near_copy(text, "The scheduler runs every job at most once per window in submission order",
    ...                        (0, len(text)))
    >>> text[start:end]
    'The scheduler runs each job at most once per window, in submission order.'
    >>> near_copy(text, "Jobs run once in each window, oldest first.", (0, len(text))) is None
    True
    """
    import difflib

    words = [(m.start(), m.end(), _word_key(m.group())) for m in _WORDS.finditer(text, *window)
             if not _cuts_a_word(text, m.start(), m.end())]  # a word the window's edge cuts is not the passage's
    copied = [_word_key(w) for w in _WORDS.findall(content)]
    if not words or len(copied) < _RUN_WORDS:
        return None
    matcher = difflib.SequenceMatcher(None, [w for _, _, w in words], copied, autojunk=False)
    runs = [block for block in matcher.get_matching_blocks() if block.size >= _RUN_WORDS]
    if not runs or sum(run.size for run in runs) < _NEAR_COPY * len(copied):
        return None
    first, last = runs[0].a, runs[-1].a + runs[-1].size - 1
    if last - first + 1 > _SPAN_SLACK * len(copied):
        return None
    return _with_marks(text, words[first][0], words[last][1], window)


def _word_key(word: str) -> str:
    """A word as copies are compared: lower case, a typographic apostrophe as a straight one."""
    return word.lower().replace("’", "'")


def _with_marks(text: str, start: int, end: int, window: tuple[int, int]) -> tuple[int, int]:
    """``start``-``end`` widened to the marks that open its first word and close its last (quotes,
    emphasis, code marks, brackets) and its full stop, unless the widened span would then begin or
    end inside a word ("3" of "3.5" stays "3", "t" of "Don't" would not become "'t").

    >>> text = 'He said “run the *tests*.” Then 3.5 more.'
    >>> text[slice(*_with_marks(text, 9, 23, (0, len(text))))]
    '“run the *tests*.”'
    >>> text[slice(*_with_marks(text, 27, 33, (0, len(text))))]
    'Then 3'
    """
    wide_start = start
    while wide_start > window[0] and text[wide_start - 1] in _OPENING:
        wide_start -= 1
    wide_end = end
    while wide_end < window[1] and text[wide_end] in _CLOSING:
        wide_end += 1
    # Widened only where a space, a line's end or other punctuation follows the marks (precedes them).
    if wide_start == 0 or not _is_word_character(text[wide_start - 1]):
        start = wide_start
    if wide_end == len(text) or not _is_word_character(text[wide_end]):
        end = wide_end
    return start, end


def _is_word_character(char: str) -> bool:
    return char.isalnum() or char == "_"


_OPENING = "*_`\"'“‘(["
_CLOSING = "*_`\"'”’)].!?"

def sample_excerpt(text: str, window: tuple[int, int], rng: random.Random) -> tuple[int, int] | None:
    """Exact (start, end) offsets of one or two sentences inside ``window`` worth a question: a
    sentence of at least eight words (a heading, a code line or a table row rarely is; a fenced code
    block never counts), joined by the next sentence of its paragraph while shorter than 120
    characters, never past 600; None when the passage has none.

    >>> text = "Intro. The scheduler runs each job at most once per window, in submission order. Then it waits."
    >>> start, end = sample_excerpt(text, (0, len(text)), random.Random(0))
    >>> text[start:end]
    'The scheduler runs each job at most once per window, in submission order. Then it waits.'
    """
    start, end = window
    spans = [(start + a, start + b) for a, b in split_sentences(text[start:end])]
    candidates = [i for i, (a, b) in enumerate(spans)
                  if b - a <= _LONG_EXCERPT and not text.startswith(("```", "~~~"), a)
                  and len(re.findall(r"[A-Za-z]{2,}", text[a:b])) >= _EXCERPT_WORDS]
    if not candidates:
        return None
    first = rng.choice(candidates)
    a, b = spans[first]
    if b - a < _SHORT_EXCERPT and first + 1 < len(spans):
        after_start, after_end = spans[first + 1]
        # the next sentence of the same paragraph (not a table row or the next block), if the two fit
        if (after_end - a <= _LONG_EXCERPT and "\n\n" not in text[b:after_start]
                and len(re.findall(r"[A-Za-z]{2,}", text[after_start:after_end])) >= 3):
            b = after_end
    return a, b
