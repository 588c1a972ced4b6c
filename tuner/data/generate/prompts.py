"""What the model is asked and how its replies are read: the instructions and reply schemas of the
four requests (questions with the excerpts that answer them, one or several per passage; a question
about a sampled excerpt; the answer round trip of a question; the critique of a question against its
excerpt), what changes a question request (:class:`Asking`: the style asked for, the team's
questions shown as examples, the questions asked per passage),
the requests themselves, and the parsers that read a reply as real models write it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import AskAgain
from ...llm.client import LLMClient
from ...text.language import LANGUAGES
from ..evalset import Reference
from .passages import locate, sample_excerpt

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

SEVERAL_PROMPT_VERSION = "generate-several-v1"
#: The instructions of a request for several questions about one passage (``Asking.per_passage``
#: above 1): the passage's prompt is evaluated once for all of them.
SEVERAL_INSTRUCTIONS = """You write questions to evaluate a retrieval system over a document collection.
You are given a passage of one document. Write {count} different questions that a user of these
documents could ask and that this passage answers, each about a different part of the passage, and
for each copy the parts of the passage that answer it.

Rules:
- Each question is specific: it has one clear answer found in the passage.
- Ask about one thing only: no compound questions joined by "and".
- References are exact copies of consecutive text from the passage, character for character:
  do not fix typos, change punctuation, or use ellipses. Use 1 to 3 references per question, each
  at most a few sentences long.

Answer with a JSON object: {{"questions": [{{"question": "...", "references": [{{"content": "..."}}]}}, ...]}}"""


def several_schema(count: int) -> dict:
    """The reply's JSON schema of a request for ``count`` questions: 1 to ``count`` of :data:`REPLY_SCHEMA`."""
    return {"type": "object", "properties": {
        "questions": {"type": "array", "minItems": 1, "maxItems": count, "items": REPLY_SCHEMA}},
        "required": ["questions"]}


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

SAMPLED_PROMPT_VERSION = "generate-sampled-v2"
SAMPLED_INSTRUCTIONS = """You write questions to evaluate a retrieval system over a document collection.
You are given a passage of one document and an excerpt of that passage. Write ONE question that a
user of these documents could ask and that the excerpt answers.

Rules:
- The question is specific: the excerpt gives its answer.
- Ask about one thing only.
- Ask as a user who has not read the excerpt would: do not copy its sentences.

Answer with the question alone, on one line."""

#: The styles of question a request asks for: ``lookup`` (the instructions above, unchanged) or
#: ``users`` (what a reader of the documents would ask, :data:`USERS_RULE` added to the rules).
STYLES = ("lookup", "users")
#: The rule ``style="users"`` adds, first among the rules of either question request.
USERS_RULE = """- Ask what a reader of these documents would ask while using them: how to do a task, why
  something happens, or what happens when something is done or goes wrong. Say in plain words what
  the reader wants; do not ask for the exact name of a function, option, flag, setting or value."""
#: What introduces the team's own questions (``examples``), after the rules.
EXAMPLES_HEADER = ("Questions the team asks about these documents look like these; write yours in the same "
                   "style, about the passage, never one of these:")


@dataclass(frozen=True)
class Asking:
    """What changes a question request beyond its passage: the ``style`` asked for (one of
    :data:`STYLES`) and the team's own questions shown as ``examples``. Each is part of the
    request's cache version (:meth:`version`), so a reply cached for another prompt is never reused
    (the default, ``lookup`` without examples, keeps the plain version and its cached replies)."""

    style: str = "lookup"
    examples: tuple[str, ...] = ()
    #: The documents' language (a code of :data:`~tuner.text.language.LANGUAGES`): a question is
    #: asked in it; English, the prompts' own language, adds no rule.
    language: str = "en"
    #: Questions asked of one passage in one request (:data:`SEVERAL_INSTRUCTIONS` above 1).
    per_passage: int = 1

    def instructions(self, base: str) -> str:
        """``base`` (:data:`INSTRUCTIONS` or :data:`SAMPLED_INSTRUCTIONS`) with the style's rule and
        the examples, before its closing "Answer with ..." paragraph.

        >>> text = Asking("users", ("How do I restore a backup?",)).instructions(SAMPLED_INSTRUCTIONS)
        >>> text.index("Rules:\\n- Ask what a reader") < text.index(EXAMPLES_HEADER) < text.index("Answer with")
        True
        >>> "- How do I restore a backup?" in text
        True
        >>> Asking().instructions(INSTRUCTIONS) == INSTRUCTIONS
        True
        """
        text = base
        if self.language != "en":
            text = text.replace("\nRules:\n", "\nRules:\n" + language_rule(self.language) + "\n", 1)
        if self.style == "users":
            text = text.replace("\nRules:\n", "\nRules:\n" + USERS_RULE + "\n", 1)
        if self.examples:
            body, _, closing = text.rpartition("\n\nAnswer with")
            shown = "\n".join(f"- {' '.join(q.split())}" for q in self.examples)
            text = f"{body}\n\n{EXAMPLES_HEADER}\n{shown}\n\nAnswer with{closing}"
        return text

    def version(self, base: str) -> str:
        """The cache version of a request whose plain version is ``base``.

        >>> Asking().version(PROMPT_VERSION), Asking("users").version(PROMPT_VERSION)
        ('generate-v4', 'generate-v4+users')
        >>> Asking(examples=("Why?",)).version(PROMPT_VERSION)
        'generate-v4+examples-5d8a995a6fa7'
        >>> Asking(per_passage=3).version(SEVERAL_PROMPT_VERSION)
        'generate-several-v1+3-per-passage'
        """
        parts = [base]
        if self.per_passage > 1:
            parts.append(f"{self.per_passage}-per-passage")
        if self.language != "en":
            parts.append(f"lang-{self.language}")
        if self.style != "lookup":
            parts.append(self.style)
        if self.examples:
            digest = hashlib.sha256("\n".join(self.examples).encode("utf-8")).hexdigest()[:12]
            parts.append(f"examples-{digest}")
        return "+".join(parts)


def language_rule(code: str) -> str:
    """The rule that asks for a question in the documents' language.

    >>> language_rule("ko")
    '- Write the question in Korean, the language of the passage, as its readers would ask it.'
    """
    return f"- Write the question in {LANGUAGES[code].name}, the language of the passage, as its readers would ask it."


#: The longest question :func:`sampled_question` accepts, in characters, and the shortest: a
#: character of Chinese, Japanese or Korean says about what a word of English does.
_LONGEST_QUESTION = 300
_SHORTEST_QUESTION = 10
_SHORTEST_WIDE_QUESTION = 5
#: What ends a question: "?" and the full-width "？" of Chinese and Japanese.
QUESTION_MARKS = ("?", "？")
#: Letters of the scripts written without spaces between words, or whose syllables are words' parts:
#: Hangul, kana, Han.
WIDE_SCRIPT = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
#: A label before a question ("Question:", "Q:", and in Korean, Chinese and Japanese).
_LABEL = re.compile(r"^(?:\*\*)?\s*(?:question|q|질문|问题|問題|質問)\s*[:：]\s*(?:\*\*)?", re.I)
_QUOTES = "*_`\"'“”‘’「」『』 "

ANSWER_PROMPT_VERSION = "answer-v1"
#: The answer round trip (``answer_check``): given the passage and its own question, the model copies
#: the answer; the question is kept only when the copy overlaps one of its excerpts.
ANSWER_INSTRUCTIONS = """You answer questions about a passage of a document. Copy from the passage
the words that answer the question below: one stretch of consecutive text, character for character,
no longer than the full answer needs (at most a few sentences). Do not rephrase it, fix it, or
shorten it with ellipses.

Answer with a JSON object: {"answer": "..."}"""
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}

#: The most tokens a reply may take (a rambling small model is cut off there, and asked again).
REPLY_TOKENS = 1500

_CODE_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.S)


def critique_rating(client: LLMClient, question: str, references: Sequence[Reference]) -> int:
    """How completely the excerpts answer ``question``, 1-5, as the model behind ``client`` rates it."""
    excerpt = "\n...\n".join(r.content for r in references)
    user = f"{CRITIQUE_INSTRUCTIONS}\n\nQuestion: {question}\n\nExcerpt:\n<excerpt>\n{excerpt}\n</excerpt>"
    return client.chat([{"role": "user", "content": user}], prompt_version=CRITIQUE_PROMPT_VERSION,
                       json_mode=True, json_schema=CRITIQUE_SCHEMA, parse=critique_reply, max_tokens=100)


def critique_reply(reply: str) -> int:
    """The rating (1-5) in a critique's reply; an :class:`~tuner.errors.AskAgain` for a
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
        raise AskAgain(f"the critique has no rating from 1 to 5 (it starts {start!r})")
    return rating


def answer_span(client: LLMClient, question: str, document_id: str, text: str,
                window: tuple[int, int]) -> tuple[int, int] | None:
    """The answer round trip: the model, shown the passage ``window`` of ``text`` and ``question``,
    copies the answer; its exact (start, end) in ``text`` (:func:`~.passages.locate`), or None when
    the copy is not found."""
    start, end = window
    user = (f"{ANSWER_INSTRUCTIONS}\n\nPassage from {document_id}:\n<passage>\n{text[start:end]}\n</passage>\n\n"
            f"Question: {question}")
    answer = client.chat([{"role": "user", "content": user}], prompt_version=ANSWER_PROMPT_VERSION,
                         json_mode=True, json_schema=ANSWER_SCHEMA, parse=answer_reply, max_tokens=REPLY_TOKENS)
    return locate(text, answer, window)


def answer_reply(reply: str) -> str:
    """The answer a model copied: the ``answer`` of the JSON object in its reply (alone, in a code
    fence, or among prose), else the reply's own text, quotes taken off; an
    :class:`~tuner.errors.AskAgain` for an empty reply or an object without an answer.

    >>> answer_reply('{"answer": "Archives are kept for thirty days."}')
    'Archives are kept for thirty days.'
    >>> answer_reply('"Archives are kept for thirty days."')
    'Archives are kept for thirty days.'
    """
    data = _json_object(reply)
    if data is not None:
        answer = data.get("answer")
        if isinstance(answer, list) and answer and isinstance(answer[0], str):
            answer = answer[0]
        if isinstance(answer, str) and answer.strip():
            return answer.strip()
        raise AskAgain(f"the reply's JSON object has no answer (keys: {', '.join(map(str, data)) or 'none'})")
    answer = reply.strip().strip("\"'“”‘’`").strip()
    if not answer:
        raise AskAgain("the reply holds no answer")
    return answer


def ask_for_question_and_excerpts(client, rng, document_id, text, window, asking: Asking = Asking()):
    """Chroma's request: questions and the excerpts that answer them, copied by the model and
    located here; one ``(question, references, reason)`` per question the reply holds (one, or up to
    ``asking.per_passage``), ``reason`` saying why a question has no located references."""
    start, end = window
    several = asking.per_passage > 1
    base = SEVERAL_INSTRUCTIONS.format(count=asking.per_passage) if several else INSTRUCTIONS
    user = (f"{asking.instructions(base)}\n\nPassage from {document_id}:\n<passage>\n{text[start:end]}\n"
            "</passage>\n")
    written = client.chat([{"role": "user", "content": user}],
                          prompt_version=asking.version(SEVERAL_PROMPT_VERSION if several else PROMPT_VERSION),
                          json_mode=True, json_schema=several_schema(asking.per_passage) if several else REPLY_SCHEMA,
                          temperature=0.7, parse=several_replies if several else generated_reply,
                          max_tokens=REPLY_TOKENS * asking.per_passage)
    return [_located(question, contents, document_id, text, window)
            for question, contents in (written if several else [written])]


def _located(question: str, contents: list[str], document_id: str, text: str, window: tuple[int, int]):
    """``(question, references, reason)``: each of ``contents`` located in ``text``'s ``window``."""
    if not contents:
        return None, [], "question without excerpts"
    references = []
    for content in contents:
        found = locate(text, content, window)
        if found is None:
            return None, [], "reference not in the text"
        references.append(Reference(document_id, found[0], found[1], text[found[0] : found[1]]))
    return question, references, ""


def ask_about_sampled_excerpt(client, rng, document_id, text, window, asking: Asking = Asking()):
    """An excerpt picked here (:func:`sample_excerpt`), and the model asked only for its question:
    a list of one ``(question, references, reason)``, as :func:`ask_for_question_and_excerpts` gives."""
    span = sample_excerpt(text, window, rng)
    if span is None:
        return [(None, [], "no sentence to ask about")]
    excerpt = text[span[0] : span[1]]
    user = (f"{asking.instructions(SAMPLED_INSTRUCTIONS)}\n\nPassage from {document_id}:\n<passage>\n"
            f"{text[window[0] : window[1]]}\n</passage>\n\nExcerpt:\n<excerpt>\n{excerpt}\n</excerpt>\n")
    question = client.chat([{"role": "user", "content": user}],
                           prompt_version=asking.version(SAMPLED_PROMPT_VERSION),
                           temperature=0.7, parse=sampled_question, max_tokens=REPLY_TOKENS)
    return [(question, [Reference(document_id, span[0], span[1], excerpt)], "")]


def sampled_question(reply: str) -> str:
    """The question in a model's plain-text reply: its first line that asks something, with labels,
    list marks, quotes and emphasis taken off (a JSON object's ``question`` counts too); an
    :class:`~tuner.errors.AskAgain` when no line ends its question with "?".

    >>> sampled_question('Question: "How often does the scheduler run a job?"')
    'How often does the scheduler run a job?'
    >>> sampled_question('- What does write.table write?')
    'What does write.table write?'
    >>> sampled_question('{"question": "Why?"}')
    'Why?'
    >>> sampled_question('问题：调度器多久运行一次任务？')
    '调度器多久运行一次任务？'
    """
    data = _json_object(reply)
    if data is not None and isinstance(data.get("question"), str) and data["question"].strip().endswith(QUESTION_MARKS):
        return data["question"].strip()
    for line in reply.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+", "", line)  # a list mark
        line = _LABEL.sub("", line)
        line = line.strip().strip(_QUOTES).strip()
        mark = next((i for i, c in enumerate(line) if c in QUESTION_MARKS), None)
        if mark is not None:
            question = line[: mark + 1].strip().strip(_QUOTES).strip()
            shortest = _SHORTEST_WIDE_QUESTION if WIDE_SCRIPT.search(question) else _SHORTEST_QUESTION
            if shortest <= len(question) <= _LONGEST_QUESTION:
                return question
    start = " ".join(reply[:60].split())
    raise AskAgain(f"the reply holds no question ending with '?' (it starts {start!r})")


def generated_reply(reply: str) -> tuple[str, list[str]]:
    """The question and excerpt texts in a model's reply, read as models write it: a JSON object
    ``{"question": ..., "references": [{"content": ...}]}`` alone, in a code fence, or with
    prose around it (an excerpt given as a bare string counts too). Excerpts may be missing
    (the caller rejects the question); an :class:`~tuner.errors.AskAgain` when there
    is no object with a question.

    >>> generated_reply('Sure!\\n```json\\n{"question": "Why?", "references": [{"content": "Because."}]}\\n```')
    ('Why?', ['Because.'])
    >>> generated_reply('{"question": "Why?"}')
    ('Why?', [])
    """
    data = _json_object(reply)
    if data is None:
        start = " ".join(reply[:60].split())
        raise AskAgain(f"the reply holds no JSON object (it starts {start!r})")
    return _written(data)


def _written(data: dict) -> tuple[str, list[str]]:
    """The question and excerpt texts of one question object (see :func:`generated_reply`)."""
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        raise AskAgain(f"the reply's JSON object has no question (keys: {', '.join(map(str, data)) or 'none'})")
    references = data.get("references")
    contents = []
    for reference in references if isinstance(references, list) else []:
        content = reference.get("content") if isinstance(reference, dict) else reference
        if isinstance(content, str) and content.strip():
            contents.append(content)
    return question.strip(), contents


def several_replies(reply: str) -> list[tuple[str, list[str]]]:
    """The questions and excerpt texts of a reply to a request for several questions: the
    ``questions`` of its JSON object, each read as :func:`generated_reply` reads one (a reply with
    one question object, as a model may answer, counts as that one); items without a question are
    skipped, and an :class:`~tuner.errors.AskAgain` when none has one.

    >>> several_replies('{"questions": [{"question": "Why?", "references": [{"content": "Because."}]}, {"x": 1}]}')
    [('Why?', ['Because.'])]
    >>> several_replies('{"question": "How?", "references": ["Thus."]}')
    [('How?', ['Thus.'])]
    """
    data = _json_object(reply)
    items = data.get("questions") if isinstance(data, dict) and "questions" in data else [data]
    written = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            with contextlib.suppress(AskAgain):
                written.append(_written(item))
    if not written:
        start = " ".join(reply[:60].split())
        raise AskAgain(f"the reply holds no question (it starts {start!r})")
    return written


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
