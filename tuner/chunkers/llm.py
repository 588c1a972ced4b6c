"""Chunkers driven by an LLM: asked for split points, or read through log-probabilities."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import numpy as np

from .._io.secrets import split_credentials
from ..data.document import Document
from ..errors import AskAgain
from ..llm.client import LLMClient, UnfitAnswerError
from ..schema import param
from .base import Chunk, Chunker
from .registry import register
from .semantic import consecutive_groups, group_chunks, piece_units, sentence_units, unit_token_ranges

LLM_PROMPT_VERSION = "llm-split-v2"
#: One user message, no system message (some chat templates drop one, others refuse it), the
#: question last, where small models follow it best (SmolLM2-135M repeated instructions given
#: before the text instead of answering them).
LLM_PROMPT = """{tagged}

The text above is divided into numbered chunks, each wrapped in <|start_chunk_N|> and <|end_chunk_N|> tags. \
After which chunks does a new section (a new topic) begin? Answer only with one line: split_after: followed by \
chunk numbers from {low} to {high} in ascending order, for example split_after: {example}"""
#: The most tokens a split-point reply may take (a rambling small model is cut off there).
LLM_REPLY_TOKENS = 300
LOGPROB_PROMPT_VERSION = "logprob-marker-v2"
#: Marker characters tried in order; the first that does not occur in the document and that the
#: model reads as one token is used. § comes first: SmolLM2's byte-level vocabulary has " §" but
#: splits ¶ into two byte tokens, which no top-logprobs list can show.
MARKERS = ("§", "¶", "†", "‡", "¤", "⁂")


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
        low, high = first + 1, last
        example = ", ".join(str(n) for n in sorted({low + (high - low) // 3, low + 2 * (high - low) // 3}))
        user = LLM_PROMPT.format(tagged=tagged, low=low, high=high, example=example)
        try:
            return self.client().chat([{"role": "user", "content": user}], prompt_version=LLM_PROMPT_VERSION,
                                      parse=lambda reply: split_points(reply, first, last),
                                      max_tokens=LLM_REPLY_TOKENS)
        except UnfitAnswerError:
            object.__setattr__(self, "malformed_replies", getattr(self, "malformed_replies", 0) + 1)
            return None


def split_points(reply: str, first: int, last: int) -> list[int]:
    """The piece indices after which the model splits pieces ``first..last`` (``split_after:``
    and 1-based numbers, anywhere in the reply); an :class:`~tuner.errors.AskAgain`
    unless they are ascending and within ``first + 1..last``.

    >>> split_points("Sure.\\nsplit_after: 3, 5\\nThat is all.", 0, 9)
    [2, 4]
    """
    match = re.search(r"split_after:\s*([\d,\s]+)", reply)
    numbers = [int(x) for x in re.findall(r"\d+", match.group(1))] if match else []
    if not numbers:
        raise AskAgain(f"the reply has no 'split_after:' numbers (it starts {' '.join(reply[:60].split())!r})")
    if not all(a < b for a, b in itertools.pairwise(numbers)) or not all(first + 1 <= x <= last for x in numbers):
        raise AskAgain(f"the split points {numbers} are not ascending numbers from {first + 1} to {last}")
    return [x - 1 for x in numbers]


@register
@dataclass(frozen=True)
class LogprobChunker(_LLMBound, Chunker):
    """LlamaChunk: instead of asking the model to rewrite the text, read how likely it is
    to emit a marker character (one absent from the document) at each sentence end.

    The text, after an instruction to insert the marker where a new topic begins, goes to
    the completions API with ``echo`` and ``logprobs``: at every position the endpoint
    reports the most likely next tokens, and the marker's log-probability there (or the
    lowest reported one, if absent) scores a split. The marker is the first of :data:`MARKERS`
    the model reads as one token (seen in the echo of the instruction), and which token each
    position's list predicts is read from the echo too (:func:`prediction_shift`: servers
    differ). Those scores decay over a long input,
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
        markers = [m for m in MARKERS if m not in document.text] or [MARKERS[0]]
        starts, ends = unit_token_ranges(document, units)
        scores = np.full(len(units) - 1, -np.inf)
        first = 0
        while first < len(units) - 1:
            last = first
            while last + 1 < len(units) and ends[last + 1] - starts[first] <= self.window_tokens:
                last += 1
            scores[first:last] = self._window_scores(document, units, first, last, markers)
            first = last if last > first else first + 1
        return group_chunks(document, units, consecutive_groups(self._cuts(scores)))

    def _window_scores(self, document: Document, units, first: int, last: int, markers: list[str]) -> np.ndarray:
        """Marker log-probability at the end of each unit ``first..last-1`` of the window, with
        the first of ``markers`` that the model reads as one token (a marker it splits into
        several tokens is remembered and not tried again)."""
        split = getattr(self, "_split_markers", set())
        usable = [m for m in markers if m not in split] or markers[-1:]
        start = units[first][0]
        text = document.text[start : units[last][1]]
        for marker in usable:
            instruction = f"Insert the character {marker} wherever a new topic begins in the following text.\n\n"
            data = self.client().prompt_logprobs(instruction + text, prompt_version=LOGPROB_PROMPT_VERSION)
            if one_token(data, instruction.index(marker), marker) or marker == usable[-1]:
                break
            object.__setattr__(self, "_split_markers", split | {marker})
            split = self._split_markers
        shift = prediction_shift(data)
        offsets = np.asarray(data["text_offset"]) - len(instruction)
        out = np.empty(last - first)
        for i, unit in enumerate(range(first, last)):
            boundary = units[unit][1] - start
            position = int(np.searchsorted(offsets, boundary, side="left"))
            if position >= len(offsets) or position - shift < 0:
                out[i] = -math.inf
                continue
            out[i] = marker_logprob(data["top_logprobs"][position - shift] or {}, marker)
        return out

    def _cuts(self, scores: np.ndarray) -> np.ndarray:
        finite = np.isfinite(scores)
        if finite.sum() < 2:
            return finite & (scores > self.threshold)
        position = np.log1p(np.arange(len(scores), dtype=float))
        slope, intercept = np.polyfit(position[finite], scores[finite], 1)
        residual = scores - (slope * position + intercept)
        return finite & (residual > self.threshold)


def marker_logprob(alternatives: dict[str, float], marker: str) -> float:
    """The log-probability of ``marker`` among a position's most likely next tokens, with or
    without the whitespace a tokenizer puts before it (``" §"``); else the lowest one listed
    (the marker is at most that likely), or -30 when none is.

    >>> marker_logprob({" §": -2.0, "§": -3.0, " The": -0.5}, "§"), marker_logprob({" The": -0.5}, "§")
    (-2.0, -0.5)
    """
    found = [value for token, value in alternatives.items() if token.strip() == marker]
    return max(found) if found else min(alternatives.values(), default=-30.0)


def one_token(data: dict, at: int, marker: str) -> bool:
    """Whether the echoed prompt holds ``marker`` (at character ``at``) as one token of its own."""
    return any(offset <= at < offset + len(token) and token.strip() == marker
               for token, offset in zip(data["tokens"], data["text_offset"]))


def prediction_shift(data: dict, top: int = 5) -> int:
    """Which token an echo's ``top_logprobs[i]`` predicts: 0 for token ``i`` (the OpenAI
    convention, and llama.cpp's for models that start with a BOS token), 1 for token ``i + 1``
    (llama-cpp-python 0.3 for models without one, such as SmolLM2: it pairs each token with the
    logits computed after it).

    Read from the echo itself: in natural text the token that follows is often among the
    ``top`` most likely; counted for both readings, the one that finds it more often wins.

    >>> prediction_shift({"tokens": ["The", " cat", " sat"], "top_logprobs": [{" cat": -1.0}, {" sat": -1.0}, {}]})
    1
    """
    tokens, tops = data["tokens"], data["top_logprobs"]
    aligned = shifted = 0
    for i, alternatives in enumerate(tops):
        if not alternatives:
            continue
        likely = sorted(alternatives, key=alternatives.get, reverse=True)[:top]
        aligned += tokens[i] in likely
        shifted += i + 1 < len(tokens) and tokens[i + 1] in likely
    return int(shifted > aligned)
