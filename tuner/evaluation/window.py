"""What an embedder leaves unread of the chunks, and the notes that say so: its input window
(chunks longer than it are read in part) and its own tokens per cl100k token (a chunk size means
something else to it than it says)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..chunkers import Chunk
from ..embedding import Embedder

#: Above this share of truncated chunks, a configuration's scores come with a warning.
TRUNCATION_WARNING = 0.05


def embedder_window(model: Embedder, chunks: Sequence[Chunk] | Sequence[str]) -> dict[str, Any]:
    """The model's input window and how much of the chunks (or the texts embedded for them,
    context headers included) lies past it (see ``window``)."""
    texts = [c if isinstance(c, str) else c.text for c in chunks]
    unread = model.unread_characters(texts) if texts else np.zeros(0, dtype=np.int64)
    total = sum(len(t) for t in texts)
    ratio = model.tokens_per_cl100k(texts)
    return {"max_input_tokens": model.max_input_tokens,
            "truncated_chunks": float(np.mean(unread > 0)) if len(unread) else 0.0,
            "unread_text": float(unread.sum() / total) if total else 0.0,
            **({"tokens_per_cl100k": round(ratio, 3)} if ratio is not None else {})}


#: Of the model's own tokens per cl100k token, a ratio this far from 1 (either way) makes a chunk
#: size mean something else to the model than it says: the note names it. all-MiniLM-L6-v2 reads
#: 0.94-1.07 word pieces per cl100k token on the English chroma-dev corpora, 1.51 on a Korean one.
SIZE_RATIO_WARNING = 1.25


def window_note(window: dict[str, Any], model: str) -> str | None:
    """A sentence when more than :data:`TRUNCATION_WARNING` of the chunks exceed the window, and one
    when the model's tokens per cl100k token (``tokens_per_cl100k``) are :data:`SIZE_RATIO_WARNING`
    times more or fewer than 1.

    >>> print(window_note({"max_input_tokens": 256, "truncated_chunks": 0.0, "unread_text": 0.0,
    ...                    "tokens_per_cl100k": 2.5}, "m"))  # doctest: +NORMALIZE_WHITESPACE
    chunk sizes count cl100k tokens, but m reads 2.50 of its own tokens per cl100k token of these chunks:
    a size of 100 is about 250 of its tokens
    """
    notes = []
    if window.get("truncated_chunks", 0.0) > TRUNCATION_WARNING:
        notes.append(f"{window['truncated_chunks']:.0%} of the chunks exceed {model}'s input window of "
                     f"{window['max_input_tokens']} tokens ({window['unread_text']:.0%} of their text is never "
                     "embedded): they are retrieved on their first part only")
    ratio = window.get("tokens_per_cl100k")
    if ratio and not 1 / SIZE_RATIO_WARNING < ratio < SIZE_RATIO_WARNING:
        notes.append(f"chunk sizes count cl100k tokens, but {model} reads {ratio:.2f} of its own tokens per cl100k "
                     f"token of these chunks: a size of 100 is about {100 * ratio:.0f} of its tokens")
    return "; ".join(notes) or None
