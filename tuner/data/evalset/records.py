"""The evaluation set's records: a :class:`Reference` (an exact excerpt), a :class:`Query` (a question,
its excerpts, where it came from and how a review left it) and the :class:`EvaluationSet` they make,
with the vocabularies of their provenance and state."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..._io.files import write_atomically
from ...errors import EvaluationSetError

#: The offsets of a reference read without them (``{document, content}``), until it is located.
UNLOCATED = -1
#: Where a query came from (its JSONL ``"origin"``; absent: written by hand).
ORIGINS = ("hand", "generated")
#: How a review left a query (its JSONL ``"review"``; absent: not reviewed).
REVIEWS = ("accepted", "rejected", "edited")
#: A query's state, as loading counts it: :attr:`Query.state`, and ``stale`` for a stale query
#: whose excerpt no longer matches (left out, like a rejected one).
STATES = ("hand", "generated", "accepted", "edited", "rejected", "stale")
#: How :meth:`EvaluationSet.describe_states` names each state.
STATE_LABELS = {"hand": "hand-written", "generated": "generated not reviewed", "accepted": "accepted",
                "edited": "edited", "rejected": "rejected", "stale": "stale (excerpt not found)"}
#: What became of a question's excerpts when its documents changed (its JSONL ``"fate"``, written by
#: ``chunkwise validate``'s update, :mod:`.update`): the same text (perhaps at new offsets), the same
#: text in another document, an edited text found by its words, or no text left.
FATES = ("unchanged", "moved", "edited", "gone")


@dataclass(frozen=True, slots=True)
class Reference:
    """An exact excerpt of a document: ``text[start_index:end_index] == content``."""

    document: str
    start_index: int
    end_index: int
    content: str


@dataclass(frozen=True, slots=True)
class Query:
    """A question and the excerpts that answer it, all in one corpus."""

    id: str
    question: str
    corpus: str
    references: tuple[Reference, ...]
    #: Provenance and review (see the module docstring): None where the file says nothing.
    origin: str | None = None
    model: str | None = None
    review: str | None = None
    stale: bool = False
    #: What an update found of its excerpts (one of :data:`FATES`; None: never updated).
    fate: str | None = None

    @property
    def state(self) -> str:
        """``"rejected"``, ``"edited"`` or ``"accepted"`` once reviewed; else ``"generated"`` or ``"hand"``."""
        return self.review or ("generated" if self.origin == "generated" else "hand")

    def to_dict(self) -> dict[str, Any]:
        provenance = {"origin": self.origin, "model": self.model, "review": self.review, "stale": self.stale or None,
                      "fate": self.fate}
        return self.content_dict() | {key: value for key, value in provenance.items() if value is not None}

    def content_dict(self) -> dict[str, Any]:
        """The question and its references, without provenance (what :attr:`EvaluationSet.sha256` hashes)."""
        return {
            "id": self.id,
            "question": self.question,
            "corpus": self.corpus,
            "references": [asdict(r) for r in self.references],
        }


@dataclass(frozen=True)
class EvaluationSet:
    """An ordered list of validated queries.

    Attributes:
        queries: the queries, in file order.
        repaired: number of references whose offsets were re-located on load.
        located: number of references given without offsets, located from their excerpt on load.
    """

    queries: tuple[Query, ...]
    repaired: int = 0
    #: The file :func:`load_evaluation_set` read (None for a set built in memory).
    origin: str | None = field(default=None, repr=False, compare=False)
    located: int = 0
    #: Queries read in each state of :data:`STATES`, those left out (rejected, stale) included.
    states: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    #: Queries used whose excerpt an update re-anchored to an edited text, not reviewed since.
    edited_excerpts: int = field(default=0, repr=False, compare=False)

    def __iter__(self) -> Iterator[Query]:
        return iter(self.queries)

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def corpora(self) -> list[str]:
        """Names of the corpora the queries refer to, in first-seen order."""
        return list(dict.fromkeys(q.corpus for q in self.queries))

    @property
    def sha256(self) -> str:
        """Content hash of the queries and references (canonical JSON)."""
        payload = json.dumps([q.content_dict() for q in self.queries], sort_keys=True,
                             ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def describe_states(self) -> str:
        """``read 12 questions: 3 hand-written, 4 generated not reviewed, 2 accepted, 1 edited; 2 rejected,
        left out`` (states with no question are not named)."""
        read = sum(self.states.values())
        used = [f"{self.states[s]} {STATE_LABELS[s]}" for s in STATES[:4] if self.states.get(s)]
        left_out = [f"{self.states[s]} {STATE_LABELS[s]}" for s in STATES[4:] if self.states.get(s)]
        line = f"read {read} question{'s' if read != 1 else ''}: {', '.join(used) or 'none used'}"
        line += f"; {', '.join(left_out)}, left out" if left_out else ""
        if self.edited_excerpts:
            line += (f"; {self.edited_excerpts} used with an excerpt an update re-anchored to edited text, not "
                     "reviewed since (check them in a review)")
        return line

    def write_jsonl(self, path: str | Path) -> None:
        """Write the queries as chunkwise JSONL (atomically: a temporary file, renamed)."""
        lines = "".join(json.dumps(q.to_dict(), ensure_ascii=False) + "\n" for q in self.queries)
        write_atomically(path, lines, EvaluationSetError)

# A query as read, before validation: (location in the file, Query).
RawQuery = tuple[str, Query]
