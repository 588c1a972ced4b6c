"""What kind of question a set holds: a rule-based classifier (:func:`question_style`) and the mix of
styles a command prints (:func:`describe_styles`). Questions about identifiers favour BM25 (they
share a rare token with their excerpt); a team's own questions are mostly how-to and why questions
(issue 49), so a generated set heavy in identifier questions ranks retrieval methods unlike them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

#: The styles :func:`question_style` tells apart, in the order they are printed.
QUESTION_STYLES = ("how-to", "why", "what-happens", "identifier", "other")

#: A code identifier in a question: `backticked`, snake_case, a --flag (or -f), a dotted name of
#: two parts of two characters or more (CamelCase.method, write.table, os.path; not "e.g."), or a
#: call: name() or name(x) ("setting(s)" is no call).
_CODE = re.compile(
    r"`[^`\n]+`"
    r"|\b[A-Za-z0-9]+_[A-Za-z0-9_]*[A-Za-z0-9]\b"
    r"|(?<![\w-])--?[A-Za-z][\w-]*"
    r"|\b[A-Za-z_]\w+\.[A-Za-z_]\w+"
    r"|\b[A-Za-z_]\w*\((?!s\))[^()\s]*\)")
#: A question that asks for a name or a value: "which option ...", "what is the default value ...",
#: "what is ... called".
_NAMED = (r"name|names|flag|flags|option|options|function|functions|method|methods|parameter|parameters|"
          r"argument|arguments|setting|settings|variable|variables|command|commands|class|classes|field|fields|"
          r"key|keys|keyword|keywords|value|values|property|properties|attribute|attributes|identifier|"
          r"environment variable|module|modules|constant|constants|macro|macros")
_ASKS_NAME = re.compile(
    rf"\b(?:what|which)(?:'s|\s+is|\s+are|\s+was)?\s+(?:the\s+|a\s+)?(?:exact\s+|default\s+|specific\s+)?"
    rf"(?:{_NAMED})\b|\bwhat\s+(?:is|are)\s+.+\s+(?:called|named)\b", re.I)
_HOW_TO = re.compile(
    r"\bhow\s+(?:do|can|could|should|would|will|might|must|does)\s+(?:i|you|we|one|a\s+user|users|someone)\b"
    r"|\bhow\s+to\b"
    r"|\bwhat(?:'s|\s+is|\s+are)\s+the\s+(?:best\s+|right\s+|recommended\s+|correct\s+|easiest\s+)?"
    r"(?:way|ways|steps|procedure)\s+to\b"
    r"|\bis\s+(?:there\s+a\s+way|it\s+possible)\s+to\b"
    r"|^\s*(?:can|could|should)\s+(?:i|you|we)\b", re.I)
_WHY = re.compile(
    r"\bwhy\b|\bhow\s+come\b|\bfor\s+what\s+reason\b|\bwhat\s+(?:causes|caused|makes)\b"
    r"|\bwhat\s+is\s+the\s+(?:reason|purpose|point|cause)\b", re.I)
_WHAT_HAPPENS = re.compile(
    r"\bwhat\s+(?:happens|happened|will\s+happen|would\s+happen|occurs|if)\b"
    r"|\bwhat\s+(?:is|are)\s+the\s+(?:effects?|results?|consequences?|outcomes?|behaviou?r)\s+(?:of|when|if)\b"
    r"|\bwhat\s+does\s+.+\s+do\s+(?:when|if)\b"
    r"|\bhow\s+does\s+.+\s+(?:behave|react|respond)\b", re.I)


def question_style(question: str) -> str:
    """The style of ``question``, one of :data:`QUESTION_STYLES`, by the first rule that holds:

    1. ``identifier``: it asks for a name or a value ("which option ...", "what is the default value
       of ...", "what is ... called"), or it holds a code identifier (`backticks`, ``snake_case``,
       ``--flag``, ``CamelCase.method``, ``name()``): such questions share a rare token with their
       excerpt, which favours BM25, whatever else they ask.
    2. ``how-to``: how to do a task ("how do I ...", "how can we ...", "how to ...", "what is the
       best way to ...", "is it possible to ...", "can I ...").
    3. ``why``: "why", "how come", "what causes", "what is the reason for/purpose of".
    4. ``what-happens``: "what happens when/if ...", "what if ...", "what is the effect of ...",
       "what does X do when ...", "how does X behave ...".
    5. ``other``: anything else (most "what is X?" questions about a fact).

    >>> question_style("Which option limits the number of parallel jobs?")
    'identifier'
    >>> question_style("How do I stop `max_jobs` from being ignored?")
    'identifier'
    >>> question_style("What does --dry-run print?")
    'identifier'
    >>> question_style("What does PassageSampler.next return?")
    'identifier'
    >>> question_style("When should I call flush()?")
    'identifier'
    >>> question_style("How do I restore a backup from last week?")
    'how-to'
    >>> question_style("Why does the nightly cleanup delete my archives?")
    'why'
    >>> question_style("What happens when a job fails twice?")
    'what-happens'
    >>> question_style("How many archive(s) does the tool keep, e.g. per week?")
    'other'
    >>> question_style("How long are archives kept?")
    'other'
    """
    if _ASKS_NAME.search(question) or _CODE.search(question):
        return "identifier"
    if _HOW_TO.search(question):
        return "how-to"
    if _WHY.search(question):
        return "why"
    if _WHAT_HAPPENS.search(question):
        return "what-happens"
    return "other"


def style_counts(questions: Iterable[str]) -> Counter:
    """How many of ``questions`` are of each style (:func:`question_style`)."""
    return Counter(question_style(q) for q in questions)


def describe_styles(questions: Iterable[str]) -> str:
    """The mix of styles of ``questions``, every style named in :data:`QUESTION_STYLES`'s order.

    >>> describe_styles(["How do I restore a backup?", "Why is it slow?", "What does --force do?"])
    'styles: 1 how-to, 1 why, 0 what-happens, 1 identifier, 0 other'
    """
    counts = style_counts(questions)
    return "styles: " + ", ".join(f"{counts[style]} {style}" for style in QUESTION_STYLES)
