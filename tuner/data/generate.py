"""Generate an evaluation set from your own documents with an LLM (Chroma's pipeline).

For each request a passage of about ``passage_chars`` characters is sampled (documents
weighted by length); the model is asked, in JSON mode, for one specific question about
it and the excerpts that answer it, copied exactly, and is shown up to 50 earlier
questions so it does not repeat them. A query is accepted only when every excerpt is
found in the document: exactly first, then with whitespace normalised and mapped back to
exact offsets. The reply is read as real models write it (:func:`generated_reply`): the JSON
object alone, in a ```json code fence, or with prose before and after it; a reply with no
such object (or cut off, or empty) is asked again and, if every attempt fails, ends the run
with one error naming the endpoint (nothing invalid is cached). A question without excerpts
is rejected and counted. Accepted queries are then filtered: a question too similar to an earlier
one (cosine of question embeddings above ``duplicate_threshold``) is dropped, and so is a
query whose least similar excerpt is below ``relevance_threshold``. Every rejection is
counted by reason.

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

import contextlib
import json
import os
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._io.files import PRIVATE_FILE_MODE
from ..embedding import Embedder
from ..errors import ChunkwiseError, option
from ..llm.client import LLMClient
from ..llm.endpoint import UnfitAnswer
from ..schema import ParamSpec, check_value
from ..text.sentences import split_sentences
from .corpus import Corpus
from .evalset import EvaluationSet, Query, Reference, load_evaluation_set

PROMPT_VERSION = "generate-v2"
MAX_EARLIER_QUESTIONS = 50
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
- Do not repeat or rephrase any of the earlier questions listed.

Answer with a JSON object: {"question": "...", "references": [{"content": "..."}]}"""

#: How the excerpts that answer a question are chosen: by the model (Chroma's pipeline), or
#: sampled by chunkwise and the model asked only for the question.
EXCERPT_SOURCES = ("model", "sampled")
SAMPLED_PROMPT_VERSION = "generate-sampled-v1"
SAMPLED_INSTRUCTIONS = """You write questions to evaluate a retrieval system over a document collection.
You are given a passage of one document and an excerpt of that passage. Write ONE question that a
user of these documents could ask and that the excerpt answers.

Rules:
- The question is specific: the excerpt gives its answer.
- Ask about one thing only.
- Ask as a user who has not read the excerpt would: do not copy its sentences.
- Do not repeat or rephrase any of the earlier questions listed.

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

    @property
    def tokens_per_accepted(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.accepted if self.accepted else 0.0


def sample_passage(corpus: Corpus, rng: random.Random, chars: int) -> tuple[str, int, int]:
    """A (document id, start, end) window of about ``chars`` characters, cut at whitespace."""
    documents = [d for d in corpus if d.text.strip()]
    weights = [len(d.text) for d in documents]
    document = rng.choices(documents, weights=weights)[0]
    text = document.text
    if len(text) <= chars:
        return document.id, 0, len(text)
    start = rng.randrange(0, len(text) - chars)
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    end = min(len(text), start + chars)
    while end < len(text) and not text[end].isspace():
        end += 1
    return document.id, start, end


def locate(text: str, content: str, window: tuple[int, int]) -> tuple[int, int] | None:
    """Exact offsets of ``content`` in ``text``, preferring the passage ``window``.

    Exact matches first (inside the window, else a unique one in the whole text), then a
    whitespace-normalised match inside the window mapped back to exact offsets.
    """
    content = content.strip()
    if not content:
        return None
    start = text.find(content, window[0], window[1])
    if start != -1:
        return start, start + len(content)
    first = text.find(content)
    if first != -1 and text.find(content, first + 1) == -1:
        return first, first + len(content)
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
    at = normal.find(needle)
    if at == -1:
        return None
    return origin[at], origin[at + len(needle) - 1] + 1


def generate_evaluation_set(corpus: Corpus, output: str | Path, n: int, client: LLMClient, embedder: Embedder, *,
                            passage_chars: int = 4000, duplicate_threshold: float = 0.9,
                            relevance_threshold: float = 0.3, seed: int = 0, max_attempts: int | None = None,
                            price_in: float = 0.15, price_out: float = 0.60, progress: bool = False,
                            excerpts: str = "model", echo=print) -> GenerationReport:
    """Generate (or continue generating) ``n`` accepted queries into ``output``.

    Args:
        price_in, price_out: $ per million prompt and completion tokens, for the cost estimate.
        max_attempts: requests at most (default ``5 * n``).
        excerpts: ``"model"`` (the model copies the excerpts that answer its question) or
            ``"sampled"`` (chunkwise picks the excerpt and asks only for a question; see the module).
    """
    check_value(ParamSpec(int, low=1), n, option("n"))
    check_value(ParamSpec(str, choices=EXCERPT_SOURCES), excerpts, option("excerpts"))
    output = Path(output)
    _check_output(output)
    accepted: list[Query] = list(load_evaluation_set(output, corpus)) if output.is_file() and \
        output.stat().st_size > 0 else []
    report = GenerationReport(already=len(accepted))
    rng = random.Random(f"{seed}:{len(accepted)}")
    question_vectors = list(embedder.embed([q.question for q in accepted])) if accepted else []
    limit = max_attempts if max_attempts is not None else 5 * n
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, initial=len(accepted), desc="generating", unit="query", disable=None)
    before = (client.usage.sent_prompt_tokens, client.usage.sent_completion_tokens, client.usage.cached)
    out = _AppendOnly(output)
    try:
        while len(accepted) < n and report.attempts < limit:
            report.attempts += 1
            query, reason = _attempt(corpus, client, embedder, rng, accepted, question_vectors, passage_chars,
                                     duplicate_threshold, relevance_threshold, excerpts)
            if query is None:
                report.rejected[reason] += 1
                continue
            out.append(json.dumps(query.to_dict(), ensure_ascii=False) + "\n", kept=len(accepted))
            accepted.append(query)
            report.accepted += 1
            if bar is not None:
                bar.update(1)
    finally:
        out.close()
        if bar is not None:
            bar.close()
        report.prompt_tokens = client.usage.sent_prompt_tokens - before[0]
        report.completion_tokens = client.usage.sent_completion_tokens - before[1]
        report.cached = client.usage.cached - before[2]
        report.cost_usd = (report.prompt_tokens * price_in + report.completion_tokens * price_out) / 1e6
    if len(accepted) < n:
        echo(f"stopped after {report.attempts} requests with {len(accepted)} of {n} queries; run again to continue")
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

    A line that cannot be written completely (a full disk) is cut off again, and a file this
    run created is removed if its first line fails, so the file always holds whole queries:
    the ones accepted before the failure.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._created = False

    def _open(self) -> bytes:
        """Open for appending; returns what must precede the first line (a newline the file lacks)."""
        self._created = not self.path.exists()
        prefix = b""
        if not self._created:
            with self.path.open("rb") as existing:
                end = existing.seek(0, os.SEEK_END)
                if end:
                    existing.seek(end - 1)
                    if existing.read(1) != b"\n":
                        prefix = b"\n"  # a file edited by hand may lack its last newline
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
        return prefix

    def append(self, line: str, kept: int) -> None:
        size = None
        try:
            data = line.encode("utf-8")
            if self._fd is None:
                data = self._open() + data
            size = os.fstat(self._fd).st_size
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            if self._fd is not None and size is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, size)
                if self._created and size == 0:
                    self.close()
                    self.path.unlink(missing_ok=True)
            kept_text = (f"it keeps the {kept} queries accepted before, and the same command continues from them"
                         if kept else "nothing was written")
            raise ChunkwiseError(f"cannot write {self.path}: {exc.strerror or exc}; {kept_text}") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _attempt(corpus, client, embedder, rng, accepted, question_vectors, passage_chars, duplicate_threshold,
             relevance_threshold, excerpts="model") -> tuple[Query | None, str]:
    document_id, start, end = sample_passage(corpus, rng, passage_chars)
    text = corpus.document(document_id).text
    earlier = [q.question for q in accepted[-MAX_EARLIER_QUESTIONS:]]
    asked = _ask_about_sampled_excerpt if excerpts == "sampled" else _ask_for_question_and_excerpts
    question, references, reason = asked(client, rng, document_id, text, (start, end), _earlier_list(earlier))
    if question is None:
        return None, reason
    vectors = embedder.embed([question] + [r.content for r in references])
    if question_vectors and float(np.max(np.stack(question_vectors) @ vectors[0])) > duplicate_threshold:
        return None, "near-duplicate question"
    if float(np.min(vectors[1:] @ vectors[0])) < relevance_threshold:
        return None, "weakest reference too dissimilar"
    question_vectors.append(vectors[0])
    query_id = f"g{len(accepted) + 1:04d}"
    return Query(query_id, question, corpus.name, tuple(references)), ""


def _earlier_list(earlier: list[str]) -> str:
    return "\nEarlier questions (do not repeat them):\n" + "\n".join(f"- {q}" for q in earlier) if earlier else ""


def _ask_for_question_and_excerpts(client, rng, document_id, text, window, earlier):
    """Chroma's request: a question and the excerpts that answer it, copied by the model and located here."""
    start, end = window
    user = f"{INSTRUCTIONS}\n\nPassage from {document_id}:\n<passage>\n{text[start:end]}\n</passage>\n{earlier}"
    question, contents = client.chat([{"role": "user", "content": user}], prompt_version=PROMPT_VERSION,
                                     json_mode=True, temperature=0.7, parse=generated_reply,
                                     max_tokens=REPLY_TOKENS)
    if not contents:
        return None, [], "question without excerpts"
    references = []
    for content in contents:
        found = locate(text, content, window)
        if found is None:
            return None, [], "reference not in the text"
        references.append(Reference(document_id, found[0], found[1], text[found[0] : found[1]]))
    return question, references, ""


def _ask_about_sampled_excerpt(client, rng, document_id, text, window, earlier):
    """An excerpt picked here (:func:`sample_excerpt`), and the model asked only for its question."""
    span = sample_excerpt(text, window, rng)
    if span is None:
        return None, [], "no sentence to ask about"
    excerpt = text[span[0] : span[1]]
    user = (f"{SAMPLED_INSTRUCTIONS}\n\nPassage from {document_id}:\n<passage>\n{text[window[0] : window[1]]}\n"
            f"</passage>\n\nExcerpt:\n<excerpt>\n{excerpt}\n</excerpt>\n{earlier}")
    question = client.chat([{"role": "user", "content": user}], prompt_version=SAMPLED_PROMPT_VERSION,
                           temperature=0.7, parse=sampled_question, max_tokens=REPLY_TOKENS)
    if _repeats(question, excerpt):
        return None, [], "question repeats its excerpt"
    return question, [Reference(document_id, span[0], span[1], excerpt)], ""


def _repeats(question: str, excerpt: str) -> bool:
    """Whether ``question`` is its excerpt's words in a row (a sentence given a question mark)."""
    asked, said = (" ".join(re.findall(r"\w+", text.lower())) for text in (question, excerpt))
    return bool(asked) and f" {asked} " in f" {said} "


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
