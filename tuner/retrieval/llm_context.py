"""LLM-written chunk contexts: Anthropic's contextual retrieval ("Introducing Contextual
Retrieval", 2024).

``context: llm`` asks an LLM, for each chunk, for a short context (a sentence or two) that
situates the chunk within its document, and that context is the chunk's header, prepended to
what is embedded and BM25-indexed exactly as the title and heading headers are
(:mod:`tuner.retrieval.context`): offsets, chunk texts and scored units stay the document's.

The model reads the whole document, or for a document longer than :data:`WINDOW_TOKENS` the
window of that many tokens around the chunk, then the chunk (:data:`PROMPT`). It is the
endpoint every LLM feature uses (:class:`~tuner.llm.client.LLMClient`'s defaults:
``$OPENAI_BASE_URL``, ``$CHUNKWISE_LLM_MODEL``, ``$OPENAI_API_KEY``), and its replies go
through the client's reply cache, keyed by endpoint, model, :data:`PROMPT_VERSION` and the
request (the document or its window, and the chunk): a second run sends nothing, and a
changed document asks again only for its own chunks.

A reply is read by :func:`read_context`: an empty one, a refusal or one longer than
:data:`MAX_CONTEXT_TOKENS` is asked again (never cached), then reported in one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..chunkers.base import Chunk
from ..data.document import Document
from ..errors import AskAgain
from ..llm.client import LLMClient
from ..text.tokens import count_tokens

PROMPT_VERSION = "chunk-context-v1"
#: Anthropic's prompt; ``{document}`` is the document, or its window around the chunk.
PROMPT = """<document>
{document}
</document>
Here is the chunk we want to situate within the whole document
<chunk>
{chunk}
</chunk>
Please give a short succinct context to situate this chunk within the overall document for the purposes of \
improving search retrieval of the chunk. Answer only with the succinct context and nothing else."""
#: The most document tokens one request shows (a longer document: the window around the chunk).
WINDOW_TOKENS = 2000
#: A longer reply is not a short context: asked again.
MAX_CONTEXT_TOKENS = 200
#: What the dry run expects a reply to cost (Anthropic: contexts of 50-100 tokens).
REPLY_TOKENS = 75
#: cl100k tokens of the prompt's own words (without the document and the chunk).
PROMPT_TOKENS = count_tokens(PROMPT.format(document="", chunk=""))

_REFUSAL = re.compile(r"(i'?m sorry|i am sorry|sorry,|i can(?:no|')t\b|i am unable|i'?m unable|as an ai\b)", re.I)
_LABEL = re.compile(r"^\W*(?:succinct\s+)?context\W*:\W*", re.I)


def context_client() -> LLMClient:
    """The client that writes contexts: the LLM endpoint and model every LLM feature defaults to."""
    return LLMClient()


def document_window(document: Document, chunk: Chunk) -> str:
    """What the model reads of ``document`` for ``chunk``: all of it up to :data:`WINDOW_TOKENS`
    tokens, else that many tokens around the chunk (more when the chunk alone is longer)."""
    tokens = document.tokens
    n = len(tokens)
    if n <= WINDOW_TOKENS:
        return document.text
    spans = chunk.all_spans
    first, last = tokens.token_range(spans[0][0], spans[-1][1])
    first, last = min(first, n - 1), max(last, first + 1)
    spare = max(WINDOW_TOKENS - (last - first), 0)
    start = max(0, first - spare // 2)
    end = min(n, start + max(WINDOW_TOKENS, last - first))
    start = max(0, min(start, end - WINDOW_TOKENS))
    return document.text[int(tokens.starts[start]) : int(tokens.ends[end - 1])]


def read_context(reply: str) -> str:
    """The context in a model's reply, on one line (a leading ``Context:`` label and quotes
    dropped); an :class:`~tuner.errors.AskAgain` for an empty reply, a refusal, or
    one longer than :data:`MAX_CONTEXT_TOKENS`.

    >>> read_context('Context: "This chunk is from the ACME handbook,\\n section Ports."')
    'This chunk is from the ACME handbook, section Ports.'
    """
    text = _LABEL.sub("", " ".join(reply.split())).strip().strip("\"'“”").strip()
    if not text:
        raise AskAgain("the context is empty")
    if _REFUSAL.match(text):
        raise AskAgain(f"the model refused ({' '.join(text.split()[:12])!r})")
    if (tokens := count_tokens(text)) > MAX_CONTEXT_TOKENS:
        raise AskAgain(f"the context is {tokens} tokens long, more than {MAX_CONTEXT_TOKENS}")
    return text


def situate(client: LLMClient, document: Document, chunk: Chunk) -> str:
    """The LLM-written context of ``chunk`` in ``document`` (cached; see the module docstring)."""
    prompt = PROMPT.format(document=document_window(document, chunk), chunk=chunk.text)
    return client.chat([{"role": "user", "content": prompt}], prompt_version=PROMPT_VERSION, parse=read_context,
                       max_tokens=2 * MAX_CONTEXT_TOKENS)


def estimated_tokens(document_tokens: Sequence[int], size: int, overlap: int = 0) -> int:
    """LLM tokens (sent and received) to write the contexts of documents of ``document_tokens``
    tokens cut into chunks of ``size`` tokens overlapping by ``overlap``: per chunk the prompt,
    the document's window, the chunk and a reply of :data:`REPLY_TOKENS`.

    A document of ``n`` tokens gives ``1 + ceil((n - size) / (size - overlap))`` chunks (one if
    ``n <= size``) holding ``n + (chunks - 1) * overlap`` tokens, as the ``token`` chunker cuts.

    >>> estimated_tokens([3000], 1000, 0) == 3 * (PROMPT_TOKENS + 2000 + REPLY_TOKENS) + 3000
    True
    """
    total = 0
    stride = max(size - overlap, 1)
    for n in document_tokens:
        if n <= 0:
            continue
        chunks = 1 if n <= size else 1 + -(-(n - size) // stride)
        window = min(n, max(WINDOW_TOKENS, size))
        total += chunks * (PROMPT_TOKENS + window + REPLY_TOKENS) + n + (chunks - 1) * overlap
    return total
