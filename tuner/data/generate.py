"""Generate an evaluation set from your own documents with an LLM (Chroma's pipeline).

For each request a passage of about ``passage_chars`` characters is sampled (documents
weighted by length); the model is asked, in JSON mode, for one specific question about
it and the excerpts that answer it, copied exactly; it is shown no earlier questions (see
below). A query is accepted only when every excerpt is
found in the document: exactly first, then with whitespace normalised and mapped back to
exact offsets. The reply is read as real models write it (:func:`generated_reply`): the JSON
object alone, in a ```json code fence, or with prose before and after it; a reply with no
such object (or cut off, or empty) is asked again and, if every attempt fails, ends the run
with one error naming the endpoint (nothing invalid is cached). A question without excerpts
is rejected and counted. Accepted queries are then filtered: a question too similar to an earlier
one (cosine of question embeddings above ``duplicate_threshold``) is dropped, and so is a
query whose least similar excerpt is below ``relevance_threshold``. Every rejection is
counted by reason.

The filters are the field's (Chroma's pipeline, the Hugging Face RAG-evaluation cookbook, InPars),
cheapest first, and every rejection is counted under its reason (:data:`REJECTIONS`): the excerpt
located in the passage (exactly, else tolerant of whitespace and markdown markup); a question, not
a preamble ("Here are two questions..."); standalone (no "according to the passage"); one thing
asked, not two; not a copy of its excerpt; not a near-duplicate of an earlier question; its excerpt
close to it in embedding space; and, last (it costs a request), the model's own critique of the
question against its excerpt: answered by it, at least :data:`CRITIQUE_KEEP` of 5
(``critique=False`` leaves it out). Where the server constrains its
output, the reply's JSON schema is sent with the request (llama.cpp turns it into a grammar; OpenAI
gets ``json_schema``), so a small model cannot answer ``Question: ... Answer: ...``.

Passages are drawn in proportion to the corpus's size and spread over it: attempt ``i`` of ``n``
centres its passage on a character drawn from the ``i``-th of ``n`` equal slices of the whole
corpus (documents end to end), in a seeded order, so a long document is asked about as often as
its length says and no stretch of the corpus is left out by chance. The model is shown no
earlier questions: Chroma's pipeline lists them ("do not repeat them"), and a small model copies
from that list. On the realdocs documents Qwen2.5-Coder-1.5B, shown up to 10 earlier questions
of the passage's document, re-asked a kept question in 72 of its first 279 replies, 69 of them with
an excerpt of the new passage, not the original's, and more often as the set grew (5 in the first
50 replies, 15 in the third 50): the yield fell as the list grew. Distinct passages make distinct
questions, and the near-duplicate filter catches the rest.

The round trip (does BM25 find a question's excerpt in its top 5?) is reported by
:func:`tuner.evaluation.round_trip.round_trip`, never used to filter: keeping only the questions that retrieve their own
passage keeps only the easy ones (Promptagator's filter is for training data, not evaluation).

With ``excerpts="sampled"`` the roles turn around, for models that write a sensible question but
not JSON or exact copies: chunkwise picks the excerpt (one or two sentences of the passage, at exact offsets),
shows it inside its passage, and asks for one question that it answers, in plain text
(:func:`sampled_question`). Nothing is left to locate; the same filters apply, and a question
that only repeats its excerpt is rejected.

The output is chunkwise JSONL, appended as queries are accepted, so a run can stop at any
time (even killed) and the same command continues toward ``n``. The file is created with the
first accepted query, never before (a run that fails at its first request leaves no empty
file), private to its owner (mode 0600), and each query is written whole or not at all.
"""

from __future__ import annotations

import bisect
import contextlib
import difflib
import itertools
import json
import os
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._io.files import PRIVATE_FILE_MODE, writers_lock
from ..embedding import Embedder
from ..errors import ChunkwiseError, option
from ..llm.client import LLMClient
from ..llm.endpoint import UnfitAnswer
from ..schema import ParamSpec, check_value
from ..text.sentences import split_sentences
from .corpus import Corpus
from .evalset import EvaluationSet, Query, Reference, load_evaluation_set
from .excerpts import locate as locate_excerpt
from .lexical import QUESTION_WORDS

PROMPT_VERSION = "generate-v4"
#: The instructions, at the start of the one user message (no system message: some chat templates
#: drop it, others refuse it).
INSTRUCTIONS = """You write questions to evaluate a retrieval system over a document collection.
You are given a passage of one document. Write ONE question that a user of these documents could
ask and that this passage answers, and copy the parts of the passage that answer it.

Rules:
- The question is specific: it has one clear answer found in the passage.
- Ask about one thing only: no compound questions joined by "and".
- References are exact copies of consecutive text from the passage, character for character:
  do not fix typos, change punctuation, or use ellipses. Use 1 to 3 references, each at most
  a few sentences long.

Answer with a JSON object: {"question": "...", "references": [{"content": "..."}]}"""
#: The reply's JSON schema, sent where the server can hold the model to it.
REPLY_SCHEMA = {"type": "object", "properties": {
    "question": {"type": "string"},
    "references": {"type": "array", "minItems": 1, "maxItems": 3,
                   "items": {"type": "object", "properties": {"content": {"type": "string"}},
                             "required": ["content"]}}},
    "required": ["question", "references"]}

CRITIQUE_PROMPT_VERSION = "critique-v2"
#: The model's critique of a question against its excerpt (the Hugging Face RAG-evaluation
#: cookbook's groundedness critique). Standalone-ness is the rule-based filter's: asked of the model
#: too, Qwen2.5-Coder-1.5B rated all 14 questions that reached it below 4 (BENCHMARKS.md).
CRITIQUE_INSTRUCTIONS = """You check questions written to evaluate a search system. Rate on a scale
from 1 to 5 how completely the excerpt below answers the question. 1: not at all; 3: partly, or only
with guessing; 5: the excerpt states the full answer.

Answer with a JSON object: {"answered": N}"""
CRITIQUE_SCHEMA = {"type": "object", "properties": {
    "answered": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
    "required": ["answered"]}
#: A question is kept when the critique rates it at least this (the cookbook's bar).
CRITIQUE_KEEP = 4

#: Why a generated question is not kept, in the order the checks run (every reason is one row
#: of the yield table, counted or not).
REJECTIONS = (
    "no sentence to ask about",
    "question without excerpts",
    "reference not in the text",
    "not a question",
    "not standalone",
    "asks two things",
    "question repeats its excerpt",
    "near-duplicate question",
    "weakest reference too dissimilar",
    "critique: not answered by its excerpt",
)

#: How the excerpts that answer a question are chosen: by the model (Chroma's pipeline), or
#: sampled by chunkwise and the model asked only for the question.
EXCERPT_SOURCES = ("model", "sampled")
SAMPLED_PROMPT_VERSION = "generate-sampled-v2"
SAMPLED_INSTRUCTIONS = """You write questions to evaluate a retrieval system over a document collection.
You are given a passage of one document and an excerpt of that passage. Write ONE question that a
user of these documents could ask and that the excerpt answers.

Rules:
- The question is specific: the excerpt gives its answer.
- Ask about one thing only.
- Ask as a user who has not read the excerpt would: do not copy its sentences.

Answer with the question alone, on one line."""
#: A sampled excerpt: a sentence of at least this many words, joined by the next one while shorter
#: than ``_SHORT_EXCERPT`` characters, and never longer than ``_LONG_EXCERPT``.
_EXCERPT_WORDS = 8
_SHORT_EXCERPT = 120
_LONG_EXCERPT = 600
#: The longest question :func:`sampled_question` accepts, in characters.
_LONGEST_QUESTION = 300

#: The most tokens a reply may take (a rambling small model is cut off there, and asked again).
REPLY_TOKENS = 1500

_CODE_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.S)


@dataclass
class GenerationReport:
    """What a generation run did. The tokens and cost are those of the requests sent: a reply
    served from the cache (``cached``) costs nothing."""

    accepted: int = 0
    already: int = 0
    attempts: int = 0
    rejected: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: int = 0
    #: Wall-clock seconds of the run.
    seconds: float = 0.0

    @property
    def tokens_per_accepted(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.accepted if self.accepted else 0.0

    def yield_table(self) -> str:
        """Each filter in the order it runs: the questions that reached it and those it rejected,
        then what was kept and the seconds per kept question."""
        lines = [f"{'filter':<40}{'reached':>8}{'rejected':>9}"]
        left = self.attempts
        for reason in REJECTIONS:
            lines.append(f"{reason:<40}{left:>8}{self.rejected[reason]:>9}")
            left -= self.rejected[reason]
        for reason, count in self.rejected.items():  # a reason a newer check added (none today)
            if reason not in REJECTIONS:
                lines.append(f"{reason:<40}{'':>8}{count:>9}")
        kept = f"{self.accepted / self.attempts:.0%} of the requests" if self.attempts else "no request"
        per = f", {self.seconds / self.accepted:.1f} s per kept question" if self.accepted else ""
        lines.append(f"kept {self.accepted} ({kept}){per}")
        return "\n".join(lines)


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
    def word(char: str) -> bool:
        return char.isalnum() or char == "_"

    return bool((start > 0 and word(text[start - 1]) and word(text[start]))
                or (end < len(text) and word(text[end]) and word(text[end - 1])))


def locate(text: str, content: str, window: tuple[int, int]) -> tuple[int, int] | None:
    """Exact offsets of ``content`` in ``text``, preferring the passage ``window``.

    Exact matches first (inside the window, else a unique one in the whole text), then a
    whitespace-normalised match inside the window mapped back to exact offsets, then one that
    leaves markdown markup out too (:func:`tuner.data.excerpts.locate`: found once in the window).

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
    if not found.found or _cuts_a_word(passage, found.start, found.end):
        return None
    return window[0] + found.start, window[0] + found.end


def generate_evaluation_set(corpus: Corpus, output: str | Path, n: int, client: LLMClient, embedder: Embedder, *,
                            passage_chars: int = 4000, duplicate_threshold: float = 0.9,
                            relevance_threshold: float = 0.3, seed: int = 0, max_attempts: int | None = None,
                            price_in: float = 0.15, price_out: float = 0.60, progress: bool = False,
                            excerpts: str = "model", critique: bool = True, echo=print) -> GenerationReport:
    """Generate (or continue generating) ``n`` accepted queries into ``output``.

    Args:
        price_in, price_out: $ per million prompt and completion tokens, for the cost estimate.
        max_attempts: requests for questions at most (default ``5 * n``); the critique's requests
            are not counted.
        excerpts: ``"model"`` (the model copies the excerpts that answer its question) or
            ``"sampled"`` (chunkwise picks the excerpt and asks only for a question; see the module).
        critique: ask the model to rate each question that passed the other filters against its
            excerpt, and keep it only at :data:`CRITIQUE_KEEP` or more.
    """
    check_value(ParamSpec(int, low=1), n, option("n"))
    check_value(ParamSpec(str, choices=EXCERPT_SOURCES), excerpts, option("excerpts"))
    output = Path(output)
    _check_output(output)
    accepted: list[Query] = list(load_evaluation_set(output, corpus, rejected=True)) if output.is_file() and \
        output.stat().st_size > 0 else []
    report = GenerationReport(already=len(accepted))
    rng = random.Random(f"{seed}:{len(accepted)}")
    question_vectors = list(embedder.embed([q.question for q in accepted])) if accepted else []
    limit = max_attempts if max_attempts is not None else 5 * n
    passages = PassageSampler(corpus, passage_chars, limit, rng)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, initial=len(accepted), desc="generating", unit="query", disable=None)
    before = (client.usage.sent_prompt_tokens, client.usage.sent_completion_tokens, client.usage.cached)
    started = time.monotonic()
    out = _AppendOnly(output)
    try:
        while len(accepted) < n and report.attempts < limit:
            report.attempts += 1
            query, reason = _attempt(corpus, client, embedder, rng, passages.next(), accepted, question_vectors,
                                     duplicate_threshold, relevance_threshold, excerpts, critique)
            if query is None:
                report.rejected[reason] += 1
                continue
            out.append(json.dumps(query.to_dict(), ensure_ascii=False) + "\n", kept=len(accepted))
            accepted.append(query)
            report.accepted += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        report.seconds = time.monotonic() - started
        report.prompt_tokens = client.usage.sent_prompt_tokens - before[0]
        report.completion_tokens = client.usage.sent_completion_tokens - before[1]
        report.cached = client.usage.cached - before[2]
        report.cost_usd = (report.prompt_tokens * price_in + report.completion_tokens * price_out) / 1e6
    if len(accepted) < n:
        common = report.rejected.most_common(1)
        why = f" (most rejected as {common[0][0]!r}: {common[0][1]} of {report.attempts})" if common else ""
        echo(f"stopped after {report.attempts} requests with {len(accepted)} of {n} queries{why}; run again to "
             "continue")
    return report


def _check_output(output: Path) -> None:
    """Fail before the first (paid) request when ``output`` could not be written."""
    if output.is_dir():
        raise ChunkwiseError(f"-o {output} is a folder; give a file name for the evaluation set")
    if not output.parent.is_dir():
        raise ChunkwiseError(f"cannot write {output}: the folder {output.parent} does not exist")
    if not os.access(output if output.exists() else output.parent, os.W_OK):
        raise ChunkwiseError(f"cannot write {output}: permission denied")


class _AppendOnly:
    """Appends whole lines to a file that is created only with the first line.

    Each line is appended under the lock every writer of the file takes
    (:func:`~tuner._io.files.writers_lock`), to the file the path names *now*: ``chunkwise review``
    may have replaced it (its saves are atomic renames) since the last line, and a descriptor
    kept open would append to the replaced file, which nobody reads again. A line that cannot be
    written completely (a full disk) is cut off again, and a file this run created is removed if
    its first line fails, so the file always holds whole queries: the ones accepted before the
    failure.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, line: str, kept: int) -> None:
        try:
            with writers_lock(self.path):
                self._append_locked(line.encode("utf-8"))
        except OSError as exc:
            kept_text = (f"it keeps the {kept} queries accepted before, and the same command continues from them"
                         if kept else "nothing was written")
            raise ChunkwiseError(f"cannot write {self.path}: {exc.strerror or exc}; {kept_text}") from None

    def _append_locked(self, data: bytes) -> None:
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
        size = None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a file edited by hand may lack its last newline
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            if size is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
            if created and not size:
                with contextlib.suppress(OSError):
                    self.path.unlink()
            raise
        finally:
            os.close(fd)


def _attempt(corpus, client, embedder, rng, passage, accepted, question_vectors, duplicate_threshold,
             relevance_threshold, excerpts="model", critique=True) -> tuple[Query | None, str]:
    document_id, start, end = passage
    text = corpus.document(document_id).text
    asked = _ask_about_sampled_excerpt if excerpts == "sampled" else _ask_for_question_and_excerpts
    question, references, reason = asked(client, rng, document_id, text, (start, end))
    if question is None:
        return None, reason
    if reason := question_flaw(question, " ".join(r.content for r in references)):
        return None, reason
    vectors = embedder.embed([question] + [r.content for r in references])
    if question_vectors and float(np.max(np.stack(question_vectors) @ vectors[0])) > duplicate_threshold:
        return None, "near-duplicate question"
    if float(np.min(vectors[1:] @ vectors[0])) < relevance_threshold:
        return None, "weakest reference too dissimilar"
    if critique and (reason := _critique(client, question, references)):
        return None, reason
    question_vectors.append(vectors[0])
    query_id = f"g{len(accepted) + 1:04d}"
    return Query(query_id, question, corpus.name, tuple(references), origin="generated", model=str(client.model)), ""


#: A reply that is not one question but talk about questions.
_PREAMBLE = re.compile(r"^\s*(?:here (?:is|are)|sure\b|certainly\b|okay\b|ok\b|of course\b|i (?:can|will|would))",
                       re.I)
#: A question that leans on the text it was written from.
_NOT_STANDALONE = re.compile(
    r"\b(?:(?:according to|in|from|based on|per|within|given) (?:the|this|that|these) "
    r"(?:passage|excerpt|text|document|context|section|paragraph|article|snippet|above)|"
    r"(?:the|this|that) (?:passage|excerpt|snippet)|(?:mentioned|described|stated|given) above)\b", re.I)
#: Two questions in one: a second question mark, or "..., and what/how/...".
_TWO_THINGS = re.compile(r"\?\s*\S|,?\s+and\s+(?:what|how|why|when|where|which|who|whom|whose|is|are|does|do|"
                         r"can|should)\b", re.I)
#: A question whose content words stand in its excerpt in one run covering at least this share of
#: them copies the excerpt (InPars drops such questions: they test string matching, not search).
_COPIED_SHARE = 0.75
_COPIED_WORDS = 4


def question_flaw(question: str, excerpt: str) -> str:
    """Why ``question`` (asked about ``excerpt``) is not kept, by the rule-based filters of
    :data:`REJECTIONS`, or ``""``.

    >>> question_flaw("Here are two questions about the scheduler?", "")
    'not a question'
    >>> question_flaw("What does the passage say about retries?", "")
    'not standalone'
    >>> question_flaw("How long is the warranty, and who pays for shipping?", "")
    'asks two things'
    >>> question_flaw("What compression method can be set to gzip, lz4, zstd, or none?",
    ...               "The compression method can be set to gzip, lz4, zstd, or none.")
    'question repeats its excerpt'
    >>> question_flaw("Which compression methods does the backup tool support?",
    ...               "The compression method can be set to gzip, lz4, zstd, or none.")
    ''
    """
    if _PREAMBLE.search(question) or not re.search(r"[A-Za-z]{2}", question):
        return "not a question"
    if _NOT_STANDALONE.search(question):
        return "not standalone"
    if _TWO_THINGS.search(question.rstrip().rstrip("?")):
        return "asks two things"
    if excerpt and copies(question, excerpt):
        return "question repeats its excerpt"
    return ""


def copies(question: str, excerpt: str) -> bool:
    """Whether ``question`` is its excerpt's words in a row: its words (question words aside)
    stand in the excerpt as one run of at least four covering at least 75% of them, in order.

    >>> copies("What is the default setting for wal_buffers?", "The default setting for wal_buffers is -1.")
    True
    >>> copies("How large is the WAL buffer by default?", "The default setting for wal_buffers is -1.")
    False
    """
    # Both sides without the words a question adds ("What is the X" of "The X is"), so a run stays a run.
    skipped = _FILLER.union(QUESTION_WORDS)
    asked, said = ([w for w in re.findall(r"\w+", text.lower()) if w not in skipped] for text in (question, excerpt))
    if not asked:
        return False
    matcher = difflib.SequenceMatcher(None, asked, said, autojunk=False)
    run = matcher.find_longest_match(0, len(asked), 0, len(said)).size
    return run >= min(_COPIED_WORDS, len(asked)) and run / len(asked) >= _COPIED_SHARE


#: Words a question adds or drops around a copied sentence ("What is the ..." of "The ... is").
_FILLER = frozenset(("the", "a", "an", "is", "are", "was", "be", "of", "to", "that", "it", "this"))


def _critique(client: LLMClient, question: str, references: list[Reference]) -> str:
    """The model's rating of ``question`` against its excerpt: a reason to reject it, or ``""``."""
    answered = critique_rating(client, question, references)
    return "critique: not answered by its excerpt" if answered < CRITIQUE_KEEP else ""


def critique_rating(client: LLMClient, question: str, references: Sequence[Reference]) -> int:
    """How completely the excerpts answer ``question``, 1-5, as the model behind ``client`` rates it."""
    excerpt = "\n...\n".join(r.content for r in references)
    user = f"{CRITIQUE_INSTRUCTIONS}\n\nQuestion: {question}\n\nExcerpt:\n<excerpt>\n{excerpt}\n</excerpt>"
    return client.chat([{"role": "user", "content": user}], prompt_version=CRITIQUE_PROMPT_VERSION,
                       json_mode=True, json_schema=CRITIQUE_SCHEMA, parse=critique_reply, max_tokens=100)


def critique_reply(reply: str) -> int:
    """The rating (1-5) in a critique's reply; an :class:`~tuner.llm.endpoint.UnfitAnswer` for a
    reply without one.

    >>> critique_reply('{"answered": 5}')
    5
    >>> critique_reply('```json\\n{"answered": "3"}\\n```')
    3
    """
    data = _json_object(reply) or {}
    value = data.get("answered")
    try:
        rating = int(str(value).strip())
    except ValueError:
        rating = None
    if rating is None or not 1 <= rating <= 5 or isinstance(value, bool):
        start = " ".join(reply[:60].split())
        raise UnfitAnswer(f"the critique has no rating from 1 to 5 (it starts {start!r})")
    return rating


def _ask_for_question_and_excerpts(client, rng, document_id, text, window):
    """Chroma's request: a question and the excerpts that answer it, copied by the model and located here."""
    start, end = window
    user = f"{INSTRUCTIONS}\n\nPassage from {document_id}:\n<passage>\n{text[start:end]}\n</passage>\n"
    question, contents = client.chat([{"role": "user", "content": user}], prompt_version=PROMPT_VERSION,
                                     json_mode=True, json_schema=REPLY_SCHEMA, temperature=0.7,
                                     parse=generated_reply, max_tokens=REPLY_TOKENS)
    if not contents:
        return None, [], "question without excerpts"
    references = []
    for content in contents:
        found = locate(text, content, window)
        if found is None:
            return None, [], "reference not in the text"
        references.append(Reference(document_id, found[0], found[1], text[found[0] : found[1]]))
    return question, references, ""


def _ask_about_sampled_excerpt(client, rng, document_id, text, window):
    """An excerpt picked here (:func:`sample_excerpt`), and the model asked only for its question."""
    span = sample_excerpt(text, window, rng)
    if span is None:
        return None, [], "no sentence to ask about"
    excerpt = text[span[0] : span[1]]
    user = (f"{SAMPLED_INSTRUCTIONS}\n\nPassage from {document_id}:\n<passage>\n{text[window[0] : window[1]]}\n"
            f"</passage>\n\nExcerpt:\n<excerpt>\n{excerpt}\n</excerpt>\n")
    question = client.chat([{"role": "user", "content": user}], prompt_version=SAMPLED_PROMPT_VERSION,
                           temperature=0.7, parse=sampled_question, max_tokens=REPLY_TOKENS)
    return question, [Reference(document_id, span[0], span[1], excerpt)], ""


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


def sampled_question(reply: str) -> str:
    """The question in a model's plain-text reply: its first line that asks something, with labels,
    list marks, quotes and emphasis taken off (a JSON object's ``question`` counts too); an
    :class:`~tuner.llm.endpoint.UnfitAnswer` when no line ends its question with "?".

    >>> sampled_question('Question: "How often does the scheduler run a job?"')
    'How often does the scheduler run a job?'
    >>> sampled_question('- What does write.table write?')
    'What does write.table write?'
    >>> sampled_question('{"question": "Why?"}')
    'Why?'
    """
    data = _json_object(reply)
    if data is not None and isinstance(data.get("question"), str) and data["question"].strip().endswith("?"):
        return data["question"].strip()
    for line in reply.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+", "", line)  # a list mark
        line = re.sub(r"^(?:\*\*)?\s*(?:question|q)\s*:\s*(?:\*\*)?", "", line, flags=re.I)  # a label
        line = line.strip().strip("*_`\"'“”‘’ ").strip()
        if "?" in line:
            question = line[: line.index("?") + 1].strip().strip("*_`\"'“”‘’ ").strip()
            if 10 <= len(question) <= _LONGEST_QUESTION:
                return question
    start = " ".join(reply[:60].split())
    raise UnfitAnswer(f"the reply holds no question ending with '?' (it starts {start!r})")


def generated_reply(reply: str) -> tuple[str, list[str]]:
    """The question and excerpt texts in a model's reply, read as models write it: a JSON object
    ``{"question": ..., "references": [{"content": ...}]}`` alone, in a code fence, or with
    prose around it (an excerpt given as a bare string counts too). Excerpts may be missing
    (the caller rejects the question); an :class:`~tuner.llm.endpoint.UnfitAnswer` when there
    is no object with a question.

    >>> generated_reply('Sure!\\n```json\\n{"question": "Why?", "references": [{"content": "Because."}]}\\n```')
    ('Why?', ['Because.'])
    >>> generated_reply('{"question": "Why?"}')
    ('Why?', [])
    """
    data = _json_object(reply)
    if data is None:
        start = " ".join(reply[:60].split())
        raise UnfitAnswer(f"the reply holds no JSON object (it starts {start!r})")
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        raise UnfitAnswer(f"the reply's JSON object has no question (keys: {', '.join(map(str, data)) or 'none'})")
    references = data.get("references")
    contents = []
    for reference in references if isinstance(references, list) else []:
        content = reference.get("content") if isinstance(reference, dict) else reference
        if isinstance(content, str) and content.strip():
            contents.append(content)
    return question.strip(), contents


def _json_object(text: str) -> dict | None:
    """The JSON object in ``text``: the whole text, else a code fence's body, else the first
    object found after prose (one with a ``question`` preferred)."""
    candidates = [text.strip(), *(body.strip() for body in _CODE_FENCE.findall(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    first = None
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            if "question" in value:
                return value
            first = first if first is not None else value
    return first


def similarity_distributions(evaluation_set: EvaluationSet, embedder: Embedder) -> dict[str, np.ndarray]:
    """Per query: its highest similarity to another question, and its weakest reference's similarity."""
    queries = list(evaluation_set)
    if not queries:
        raise ChunkwiseError("the evaluation set is empty: nothing to calibrate")
    questions = embedder.embed([q.question for q in queries])
    duplicate = np.full(len(queries), -1.0)
    if len(queries) > 1:
        similarity = questions @ questions.T
        np.fill_diagonal(similarity, -1.0)
        duplicate = similarity.max(axis=1)
    relevance = np.array([float(np.min(embedder.embed([r.content for r in q.references]) @ questions[i]))
                          for i, q in enumerate(queries)])
    return {"closest other question": duplicate, "weakest reference": relevance}


def format_distributions(distributions: dict[str, np.ndarray]) -> str:
    quantiles = (0, 5, 25, 50, 75, 95, 100)
    lines = ["cosine similarity       " + "".join(f"{f'p{q}':>8}" for q in quantiles)]
    for name, values in distributions.items():
        lines.append(f"{name:<24}" + "".join(f"{np.percentile(values, q):>8.3f}" for q in quantiles))
    lines.append(f"Drop near-duplicates above a {option('duplicate_threshold')} just under the top of the first row, "
                 f"and queries below a {option('relevance_threshold')} near the bottom of the second.")
    return "\n".join(lines)
