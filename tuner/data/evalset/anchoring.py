"""A reference re-anchored to documents that changed since it was written: where its text is now,
and what became of it (:data:`~.records.FATES`).

A reference knows its document, its offsets and its text. Against the documents as they are now:

* **unchanged**: its exact text is in its own document (at the same offsets, or shifted by text
  added or removed before it);
* **moved**: its exact text is no longer in its own document (or that document is gone: renamed,
  split) but is in another one;
* **edited**: no exact copy, but its words are still there with a few changed, added or dropped:
  found as a copy a model makes of an excerpt is found (:func:`tuner.data.generate.passages.near_copy`,
  after the copy tolerant of white space and markdown markup, :func:`tuner.data.excerpts.locate`),
  the new offsets and text being the document's;
* **gone**: none of that: its text was removed.

Where the text occurs more than once, the copy in the same document wins, and of several there,
the one nearest where the reference is expected now: its old offset moved by as much as the
nearest reference of the same document whose text occurs once moved (:class:`Reanchorer` learns
those shifts first). A choice that nothing but proximity made is marked uncertain, and so is every
edited reference: :attr:`Anchored.certain` is what a question needs to be trusted without a review.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
from collections import defaultdict
from dataclasses import dataclass

from ..corpus import Corpus
from ..excerpts import Normalized, locate
from ..generate.passages import near_copy
from .records import UNLOCATED, Reference

#: A word, as near copies compare them (lower case; an apostrophe inside a word kept).
_WORD = re.compile(r"\w+(?:['’]\w+)*")
#: Runs of this many words anchor the search for a near copy (the shortest run :func:`near_copy` counts).
_RUN = 3
#: The most places in one document a near copy is looked for (the runs it shares, in clusters).
_MOST_WINDOWS = 60
#: Words of an edited excerpt's ends that a near copy may leave out and :func:`_complete` adds back.
_EDGE_WORDS = 3


@dataclass(frozen=True)
class Anchored:
    """Where a reference's text is now (``document``, ``start``, ``end``, ``content``: the document's
    own text; all None when it is gone), its fate, how it was found, and whether the choice needs
    no review (``certain``)."""

    fate: str
    document: str | None = None
    start: int | None = None
    end: int | None = None
    content: str | None = None
    how: str = ""
    #: Exact copies of the text in the document chosen (more than one: the nearest was taken).
    copies: int = 0
    certain: bool = True


class Reanchorer:
    """Re-anchors the references of one corpus; :meth:`learn` from the references whose text
    occurs once first (:meth:`unique`), then :meth:`anchor` the others."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._normalized: dict[str, Normalized] = {}
        self._trigrams: dict[str, tuple[list[tuple[int, int, str]], dict[tuple[str, ...], list[int]]]] = {}
        #: Per old document, sorted: (old start, new document, new start) of references found once.
        self._moves: dict[str, list[tuple[int, str, int]]] = defaultdict(list)

    # ------------------------------------------------------------------------------------- exact

    def unique(self, ref: Reference) -> Anchored | None:
        """The reference's exact text found once (in its own document, else in the whole corpus),
        or at its own offsets; None when it takes more (several copies, no exact copy)."""
        start = None if ref.start_index == UNLOCATED else ref.start_index
        if ref.document in self.corpus:
            text = self.corpus.document(ref.document).text
            if start is not None and text[start:ref.end_index] == ref.content:
                return Anchored("unchanged", ref.document, start, ref.end_index, ref.content, "at its offsets", 1)
            hits = _occurrences(text, ref.content)
            if len(hits) == 1:
                return Anchored("unchanged", ref.document, hits[0], hits[0] + len(ref.content), ref.content,
                                "found once", 1)
            if hits:
                return None
        elsewhere = [(doc.id, hits) for doc in self.corpus if doc.id != ref.document
                     and (hits := _occurrences(doc.text, ref.content))]
        if len(elsewhere) == 1 and len(elsewhere[0][1]) == 1:
            (document, (at,)), = elsewhere
            return Anchored("moved", document, at, at + len(ref.content), ref.content, "found once", 1)
        return None

    def learn(self, ref: Reference, anchored: Anchored) -> None:
        """Remember how far a reference found once moved: the others of its document move alike."""
        if ref.start_index != UNLOCATED and anchored.document is not None and anchored.start is not None:
            bisect.insort(self._moves[ref.document], (ref.start_index, anchored.document, anchored.start))

    def expected(self, ref: Reference) -> tuple[str | None, int | None, bool]:
        """Where the reference's text should be now: (document, offset, learned). The document: its
        own, or where the references of a document that is gone went; the offset: its own, moved as
        the nearest reference of its document found once moved, in the same document where it is still
        there (``learned``: that shift was known)."""
        start = None if ref.start_index == UNLOCATED else ref.start_index
        moves = self._moves.get(ref.document, [])
        own = ref.document if ref.document in self.corpus else None
        if not moves:
            return own, start, False
        if start is None:
            documents = [document for _, document, _ in moves]
            return own or max(set(documents), key=documents.count), None, False
        # A document that is still there: the shifts of its references that stayed in it.
        stayed = [move for move in moves if move[1] == own] or moves
        nearest = min(stayed, key=lambda move: (abs(move[0] - start), move[0]))
        return nearest[1], start + nearest[2] - nearest[0], True

    # ------------------------------------------------------------------------------------- every case

    def anchor(self, ref: Reference) -> Anchored:
        """The reference re-anchored (see the module docstring), at the cost of a search of every
        document for a reference whose text is no longer where it was."""
        content = ref.content
        hint, at, learned = self.expected(ref)
        own = ref.document if ref.document in self.corpus else None
        if own is not None and (hits := _occurrences(self.corpus.document(own).text, content)):
            pick = _nearest(hits, at if hint == own else None if ref.start_index == UNLOCATED else ref.start_index)
            certain = len(hits) == 1 or (learned and hint == own and pick == at)
            return Anchored("unchanged", own, pick, pick + len(content), content,
                            _how_many(len(hits), certain), len(hits), certain)
        found = {doc.id: hits for doc in self.corpus if doc.id != own and (hits := _occurrences(doc.text, content))}
        if found:
            document = hint if hint in found else next(iter(found))
            hits = found[document]
            pick = _nearest(hits, at if hint == document else None)
            # Certain when it is the one copy there is, or exactly where its document's other references went.
            certain = (len(found) == 1 and len(hits) == 1) or (learned and hint == document and pick == at)
            how = _how_many(len(hits), certain) + (f" (also in {len(found) - 1} other document(s))"
                                                   if len(found) > 1 else "")
            return Anchored("moved", document, pick, pick + len(content), content, how, len(hits), certain)
        old = None if ref.start_index == UNLOCATED else ref.start_index
        for document in self._order(own, hint):
            spans = self._loose(document, content)
            if spans:  # of several, the one nearest where it is expected, else the closest copy
                start, end = _choose(spans, at if document == hint else old if document == own else None)
                text = self.corpus.document(document).text
                return Anchored("edited", document, start, end, text[start:end], spans[start, end][0], 0, False)
        return Anchored("gone", how="no copy of its text or of most of its words", certain=False)

    def _order(self, own: str | None, hint: str | None) -> list[str]:
        """The documents to search: its own first, then where its document's references went, then the rest."""
        first = [d for d in dict.fromkeys((own, hint)) if d is not None]
        return first + [doc.id for doc in self.corpus if doc.id not in first]

    def _normalized_of(self, document: str) -> Normalized:
        if document not in self._normalized:
            self._normalized[document] = Normalized.of(self.corpus.document(document).text)
        return self._normalized[document]

    def _index(self, document: str) -> tuple[list[tuple[int, int, str]], dict[tuple[str, ...], list[int]]]:
        """The document's words (start, end, key) and where each run of three words starts."""
        if document not in self._trigrams:
            text = self.corpus.document(document).text
            words = [(m.start(), m.end(), _key(m.group())) for m in _WORD.finditer(text)]
            runs: dict[tuple[str, ...], list[int]] = defaultdict(list)
            for i in range(len(words) - _RUN + 1):
                runs[tuple(w for _, _, w in words[i:i + _RUN])].append(i)
            self._trigrams[document] = (words, runs)
        return self._trigrams[document]

    def _loose(self, document: str, content: str) -> dict[tuple[int, int], tuple[str, float]]:
        """Every span of ``document`` that ``content`` is a copy of, tolerant of white space and markup
        (found once), or a near copy of: (start, end) -> (how it was found, how alike the words are)."""
        text = self.corpus.document(document).text
        spans = {span: ("found by its words, a near copy", likeness)
                 for span, likeness in self._near(document, content).items()}
        loose = locate(text, content, lambda: self._normalized_of(document))
        if loose.found:
            spans[loose.start, loose.end] = ("its white space or markup changed", 1.0)
        return spans

    def _near(self, document: str, content: str) -> dict[tuple[int, int], float]:
        """The spans of ``document`` that ``content`` is a near copy of, with how alike their words are:
        :func:`near_copy` in a window around each cluster of the runs of words the two share."""
        copied = [_key(w) for w in _WORD.findall(content)]
        if len(copied) < _RUN:
            return {}
        words, runs = self._index(document)
        starts = sorted({i for j in range(len(copied) - _RUN + 1) for i in runs.get(tuple(copied[j:j + _RUN]), ())})
        if not starts:
            return {}
        text = self.corpus.document(document).text
        reach = len(content)
        windows, cluster = [], [starts[0]]
        for i in starts[1:]:
            if words[i][0] - words[cluster[-1]][0] > reach:
                windows.append(cluster)
                cluster = []
            cluster.append(i)
        windows.append(cluster)
        anchored = set(starts)
        options = []
        for cluster in windows:
            # The cluster's window, and one from each run of shared words on (two copies side by side,
            # or a stray run beside the copy, make one cluster).
            options.append((words[cluster[0]][0] - reach, words[cluster[-1]][1] + reach))
            options += [(words[i][0] - 1, words[i][0] + int(1.6 * reach)) for i in cluster if i - 1 not in anchored]
        found: dict[tuple[int, int], float] = {}
        for low, high in list(dict.fromkeys(options))[:_MOST_WINDOWS]:
            span = near_copy(text, content, (max(0, low), min(len(text), high)))
            if span is not None and (span := _complete(text, content, copied, span)) not in found:
                found[span] = _likeness(copied, text[span[0]:span[1]])
        return found


def _choose(spans: dict[tuple[int, int], tuple[str, float]], near: int | None) -> tuple[int, int]:
    """The span nearest ``near`` (None: anywhere), then the closest copy, then the first."""
    return min(spans, key=lambda span: (abs(span[0] - near) if near is not None else 0, -spans[span][1], span[0]))


def _key(word: str) -> str:
    return word.lower().replace("’", "'")


def _likeness(copied: list[str], text: str) -> float:
    return difflib.SequenceMatcher(None, copied, [_key(w) for w in _WORD.findall(text)], autojunk=False).ratio()


def _complete(text: str, content: str, copied: list[str], span: tuple[int, int]) -> tuple[int, int]:
    """``span`` widened over the words at the copy's ends that a near copy leaves out (it counts only
    runs of three words), up to :data:`_EDGE_WORDS` words each side and never past a paragraph: to the
    copy's last (first) word when the document has it there, else, for an excerpt that ends (starts)
    a sentence, to the end (start) of the document's sentence. "lasts two years." edited to "lasts
    three years." ends at "years.", and "... date of purchase." edited to "... date of delivery." at
    "delivery."."""
    start, end = span
    inside = [_key(w) for w in _WORD.findall(text[start:end])]
    blocks = [b for b in difflib.SequenceMatcher(None, copied, inside, autojunk=False).get_matching_blocks() if b.size]
    if not blocks:
        return span
    head, tail = copied[:blocks[0].a], copied[blocks[-1].a + blocks[-1].size:]
    if tail and len(tail) <= _EDGE_WORDS:
        after = [m for m in itertools.islice(_WORD.finditer(text, end), len(tail) + 1)
                 if "\n\n" not in text[end:m.start()]]
        same = [m for m in after if _key(m.group()) == tail[-1]]
        if same:
            end = _closed(text, same[0].end())
        elif content.rstrip()[-1:] in _ENDS and after:
            stop = next((m.end() for m in after if text[m.end():m.end() + 1] in _ENDS), None)
            end = end if stop is None else _closed(text, stop)
    if head and len(head) <= _EDGE_WORDS:
        before = [m for m in list(_WORD.finditer(text, max(0, start - 300), start))[-(len(head) + 1):]
                  if "\n\n" not in text[m.end():start]]
        same = [m for m in before if _key(m.group()) == head[0]]
        if same:
            start = same[-1].start()
        elif content.lstrip()[:1].isupper() and before:
            # The sentence's first word: the earliest of those before whose preceding text ends a sentence.
            opening = [m for m in before if re.search(r"(^|[.!?][\"')\]]*\s|\n\s*)$", text[:m.start()][-4:]
                                                      if m.start() else "")]
            start = opening[-1].start() if opening else start
    return start, end


#: What ends a sentence, and the marks that may close it after.
_ENDS = ".!?"


def _closed(text: str, end: int) -> int:
    """``end`` moved past the full stop and closing marks that follow it."""
    while end < len(text) and text[end] in ".!?)]*_`\"'”’":
        end += 1
    return end


def _occurrences(text: str, content: str) -> list[int]:
    """Every offset at which ``content`` occurs in ``text`` (overlapping copies included)."""
    found, at = [], text.find(content) if content else -1
    while at != -1:
        found.append(at)
        at = text.find(content, at + 1)
    return found


def _nearest(hits: list[int], at: int | None) -> int:
    """The copy nearest ``at`` (the first when nothing is expected; the earlier of two as near)."""
    return hits[0] if at is None else min(hits, key=lambda hit: (abs(hit - at), hit))


def _how_many(copies: int, certain: bool) -> str:
    if copies == 1:
        return "found once"
    return (f"the nearest of {copies} copies to where it was expected" if certain
            else f"the nearest of {copies} copies to its old offset: check it")
