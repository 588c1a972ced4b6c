"""Chunkers driven by an LLM: asked for split points, or read through log-probabilities."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import numpy as np

from .._io.secrets import split_credentials
from ..data.document import Document
from ..llm.client import LLMClient, UnfitAnswerError
from ..llm.endpoint import UnfitAnswer
from ..schema import param
from .base import Chunk, Chunker
from .registry import register
from .semantic import consecutive_groups, group_chunks, piece_units, sentence_units, unit_token_ranges

LLM_PROMPT_VERSION = "llm-split-v1"
LLM_SYSTEM_PROMPT = """You split documents into thematically consistent sections.
The text is divided into numbered chunks, each wrapped in <|start_chunk_N|> and <|end_chunk_N|> tags.
Decide after which chunks a new section begins. Answer with one line:
split_after: 3, 5
listing chunk numbers in ascending order; give at least one number."""
LOGPROB_PROMPT_VERSION = "logprob-marker-v1"
#: Marker characters tried in order; the first that does not occur in the document is used.
MARKERS = ("¶", "§", "†", "‡", "¤", "⁂")


class _LLMBound:
    """The LLM client of a chunker, built from its ``model``/``base_url`` parameters."""

    def _check(self) -> None:
        # The configuration is stored with every trial: a user and password in the endpoint's
        # URL are kept in memory and sent with its requests instead.
        if self.base_url:
            object.__setattr__(self, "base_url", split_credentials(self.base_url))
        super()._check()

    def client(self) -> LLMClient:
        client = getattr(self, "_llm_client", None)
        if client is None:
            client = LLMClient(model=self.model or None, base_url=self.base_url or None)
            object.__setattr__(self, "_llm_client", client)
        return client

    @property
    def llm_usage(self):
        """Tokens this chunker's model consumed (cached requests included)."""
        return self.client().usage

    def use_client(self, client: LLMClient):
        """Use this client (tests, shared usage accounting); returns ``self``."""
        object.__setattr__(self, "_llm_client", client)
        return self


@register
@dataclass(frozen=True)
class LLMChunker(_LLMBound, Chunker):
    """Chroma's LLMSemanticChunker: the text is cut into pieces of about ``piece_size``
    tokens, wrapped in numbered tags, and the model answers after which pieces a new
    section begins (``split_after: i, j``). Long texts go in windows of about
    ``window_tokens``; each window starts after the last split of the previous one, and
    the window that reaches the end of the text settles its splits. A
    reply that is not ascending numbers within the window is asked again (up to the client's
    retries, never cached); if every reply is refused the window falls back to one chunk and
    is counted in ``malformed_replies``. A reply the endpoint itself spoils (not JSON, empty,
    cut off) is an :class:`~tuner.llm.client.LLMError` once the retries fail. Replies are cached
    per model, text and prompt version.
    """

    name = "llm"
    piece_size: int = param(50, int, low=4, help="tokens per numbered piece")
    window_tokens: int = param(800, int, low=50, help="tokens shown to the model per request")
    model: str = param("", str, help="LLM (empty: $CHUNKWISE_LLM_MODEL or gpt-4o-mini)")
    base_url: str = param("", str, help="OpenAI-compatible endpoint (empty: $OPENAI_BASE_URL)")

    def split(self, document: Document) -> list[Chunk]:
        pieces = piece_units(document, self.piece_size)
        if not pieces:
            return []
        starts, ends = unit_token_ranges(document, pieces)
        cuts = np.zeros(max(len(pieces) - 1, 0), dtype=bool)
        first = 0
        while first < len(pieces):
            last = first
            while last + 1 < len(pieces) and ends[last + 1] - starts[first] <= self.window_tokens:
                last += 1
            if first == last:  # one piece fills the window: nothing to ask
                if last < len(pieces) - 1:
                    cuts[last] = True
                first += 1
                continue
            splits = self._ask(document, pieces, first, last)
            if splits is None:
                if last < len(pieces) - 1:
                    cuts[last] = True
                first = last + 1
                continue
            for after in splits:
                cuts[after] = True
            if last == len(pieces) - 1:  # the window reached the end: its splits are final
                break
            first = splits[-1] + 1
        return group_chunks(document, pieces, consecutive_groups(cuts))

    def _ask(self, document: Document, pieces, first: int, last: int) -> list[int] | None:
        """Split points (piece indices) the model gives for pieces ``first..last``, or None."""
        tagged = "".join(f"<|start_chunk_{i + 1}|>{document.text[s:e]}<|end_chunk_{i + 1}|>"
                         for i, (s, e) in enumerate(pieces[first : last + 1], start=first))
        user = (f"{tagged}\n\nThe chunks above are numbered {first + 1} to {last + 1}. Answer with split_after: "
                f"and the numbers after which a new section begins, each from {first + 1} to {last}.")
        try:
            return self.client().chat([{"role": "system", "content": LLM_SYSTEM_PROMPT},
                                       {"role": "user", "content": user}], prompt_version=LLM_PROMPT_VERSION,
                                      parse=lambda reply: split_points(reply, first, last))
        except UnfitAnswerError:
            object.__setattr__(self, "malformed_replies", getattr(self, "malformed_replies", 0) + 1)
            return None


def split_points(reply: str, first: int, last: int) -> list[int]:
    """The piece indices after which the model splits pieces ``first..last`` (``split_after:``
    and 1-based numbers, anywhere in the reply); an :class:`~tuner.llm.endpoint.UnfitAnswer`
    unless they are ascending and within ``first + 1..last``.

    >>> split_points("Sure.\\nsplit_after: 3, 5\\nThat is all.", 0, 9)
    [2, 4]
    """
    match = re.search(r"split_after:\s*([\d,\s]+)", reply)
    numbers = [int(x) for x in re.findall(r"\d+", match.group(1))] if match else []
    if not numbers:
        raise UnfitAnswer(f"the reply has no 'split_after:' numbers (it starts {' '.join(reply[:60].split())!r})")
    if not all(a < b for a, b in itertools.pairwise(numbers)) or not all(first + 1 <= x <= last for x in numbers):
        raise UnfitAnswer(f"the split points {numbers} are not ascending numbers from {first + 1} to {last}")
    return [x - 1 for x in numbers]


@register
@dataclass(frozen=True)
class LogprobChunker(_LLMBound, Chunker):
    """LlamaChunk: instead of asking the model to rewrite the text, read how likely it is
    to emit a marker character (one absent from the document) at each sentence end.

    The text, after an instruction to insert the marker where a new topic begins, goes to
    the completions API with ``echo`` and ``logprobs``: at every position the endpoint
    reports the most likely next tokens, and the marker's log-probability there (or the
    lowest reported one, if absent) scores a split. Those scores decay over a long input,
    so they are normalised by a least-squares fit against the log of the position, and a
    chunk ends where the residual exceeds ``threshold`` (nats). Texts longer than
    ``window_tokens`` go in windows of whole sentences. Endpoints without logprobs are a
    clear error.
    """

    name = "logprob"
    threshold: float = param(1.0, float, low=-10.0, high=10.0, help="residual log-probability to split at")
    window_tokens: int = param(1500, int, low=50, help="tokens per request")
    model: str = param("", str, help="LLM (empty: $CHUNKWISE_LLM_MODEL or gpt-4o-mini)")
    base_url: str = param("", str, help="OpenAI-compatible completions endpoint (empty: $OPENAI_BASE_URL)")

    def split(self, document: Document) -> list[Chunk]:
        units = sentence_units(document, max_tokens=self.window_tokens)
        if len(units) <= 1:
            return group_chunks(document, units, [list(range(len(units)))]) if units else []
        marker = next((m for m in MARKERS if m not in document.text), MARKERS[0])
        starts, ends = unit_token_ranges(document, units)
        scores = np.full(len(units) - 1, -np.inf)
        first = 0
        while first < len(units) - 1:
            last = first
            while last + 1 < len(units) and ends[last + 1] - starts[first] <= self.window_tokens:
                last += 1
            scores[first:last] = self._window_scores(document, units, first, last, marker)
            first = last if last > first else first + 1
        return group_chunks(document, units, consecutive_groups(self._cuts(scores)))

    def _window_scores(self, document: Document, units, first: int, last: int, marker: str) -> np.ndarray:
        """Marker log-probability at the end of each unit ``first..last-1`` of the window."""
        start = units[first][0]
        instruction = (f"Insert the character {marker} wherever a new topic begins in the following text.\n\n")
        text = document.text[start : units[last][1]]
        data = self.client().prompt_logprobs(instruction + text, prompt_version=LOGPROB_PROMPT_VERSION)
        offsets = np.asarray(data["text_offset"]) - len(instruction)
        out = np.empty(last - first)
        for i, unit in enumerate(range(first, last)):
            boundary = units[unit][1] - start
            position = int(np.searchsorted(offsets, boundary, side="left"))
            if position >= len(offsets):
                out[i] = -math.inf
                continue
            alternatives = data["top_logprobs"][position] or {}
            out[i] = alternatives.get(marker, min(alternatives.values(), default=-30.0))
        return out

    def _cuts(self, scores: np.ndarray) -> np.ndarray:
        finite = np.isfinite(scores)
        if finite.sum() < 2:
            return finite & (scores > self.threshold)
        position = np.log1p(np.arange(len(scores), dtype=float))
        slope, intercept = np.polyfit(position[finite], scores[finite], 1)
        residual = scores - (slope * position + intercept)
        return finite & (residual > self.threshold)
