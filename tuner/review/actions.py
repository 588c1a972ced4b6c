"""What a page's action may hold: the actions (:data:`ACTIONS`), the question text and the excerpts
an action writes, each checked against its document before anything is saved, and the error an
action that cannot be done gets (:class:`ReviewError`, with the HTTP status the page sees)."""

from __future__ import annotations

from typing import Any

from ..data.corpus import Corpus
from ..errors import ReviewError

#: Actions a page sends (``new`` writes a question; the others change one by its id).
ACTIONS = ("accept", "reject", "edit", "new")
#: The longest question text accepted.
MAX_QUESTION_CHARS = 4000
#: How many excerpts one question may have.
MAX_REFERENCES = 20


def question_of(action: dict[str, Any]) -> str:
    question = action.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ReviewError("the question is empty: write the question this excerpt answers")
    if len(question) > MAX_QUESTION_CHARS:
        raise ReviewError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
    return question.strip()


def references_of(action: dict[str, Any], corpus: Corpus) -> list[dict[str, Any]]:
    """The action's excerpts, each checked against its document (exact offsets, in characters of
    the converted text); the content saved is the document's."""
    given = action.get("references")
    if not isinstance(given, list) or not given:
        raise ReviewError("a question needs at least one excerpt: select the passage that answers it")
    if len(given) > MAX_REFERENCES:
        raise ReviewError(f"a question has at most {MAX_REFERENCES} excerpts")
    references: list[dict[str, Any]] = []
    for i, ref in enumerate(given, start=1):
        if not isinstance(ref, dict):
            raise ReviewError(f"excerpt {i} is not an object")
        document, start, end = ref.get("document"), ref.get("start_index"), ref.get("end_index")
        if not isinstance(document, str) or document not in corpus:
            raise ReviewError(f"excerpt {i}: the corpus has no document {document!r}", 404)
        text = corpus.document(document).text
        if not (type(start) is int and type(end) is int and 0 <= start < end <= len(text)):
            raise ReviewError(f"excerpt {i}: offsets [{start}:{end}] are not a non-empty range of {document!r} "
                              f"(0 to {len(text)} characters)")
        content = text[start:end]
        if "content" in ref and ref["content"] != content:
            raise ReviewError(f"excerpt {i}: its text does not match {document!r} at [{start}:{end}] "
                              f"(the document reads {content[:40]!r}); reload the page")
        if not content.strip():
            raise ReviewError(f"excerpt {i}: {document!r} [{start}:{end}] is only white space: select the "
                              "words that answer the question")
        saved = {"document": document, "start_index": start, "end_index": end, "content": content}
        if saved in references:
            raise ReviewError(f"excerpts {references.index(saved) + 1} and {i} are the same passage of "
                              f"{document!r} [{start}:{end}]: give each excerpt once")
        references.append(saved)
    return references
