"""Generate an evaluation set from your own documents with an LLM (Chroma's pipeline).

For each request a passage of about ``passage_chars`` characters is sampled (documents
weighted by length); the model is asked, in JSON mode, for one specific question about
it (or up to ``per_passage`` different ones, each then filtered on its own: the passage is read
once for all of them) and the excerpts that answer it, copied exactly; it is shown no earlier
questions (see below). A query is accepted only when every excerpt is
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
asked, not two; not a copy of its excerpt; not a copy of one of the team's example questions (with
``examples``); not a near-duplicate of an earlier question; its excerpt close to it in embedding
space; with ``answer_check``, its answer inside its excerpt (a request); and, last (it costs a
request), the model's own critique of the question against its excerpt: answered by it, at least
:data:`CRITIQUE_KEEP` of 5 (``critique=False`` leaves it out). Where the server constrains its
output, the reply's JSON schema is sent with the request (llama.cpp turns it into a grammar; OpenAI
gets ``json_schema``), so a small model cannot answer ``Question: ... Answer: ...``.

By default passages are drawn in proportion to the corpus's size and spread over it: attempt ``i`` of ``n``
centres its passage on a character drawn from the ``i``-th of ``n`` equal slices of the whole
corpus (documents end to end), in a seeded order, so a long document is asked about as often as
its length says and no stretch of the corpus is left out by chance. The model is shown no
earlier questions: Chroma's pipeline lists them ("do not repeat them"), and a small model copies
from that list. On the realdocs documents Qwen2.5-Coder-1.5B, shown up to 10 earlier questions
of the passage's document, re-asked a kept question in 72 of its first 279 replies, 69 of them with
an excerpt of the new passage, not the original's, and more often as the set grew (5 in the first
50 replies, 15 in the third 50): the yield fell as the list grew. Distinct passages make distinct
questions, and the near-duplicate filter catches the rest.

Four levers (issue 49) change what is asked; none is measured yet against a team's own questions
(the Kendall τ-b of ``chunkwise validate --agreement``), so each is off by default:

- ``examples``: the team's own questions (an evaluation set about any corpus: only the question texts
  are read, :func:`read_example_questions`). Up to :data:`MAX_EXAMPLES` of them, chosen by the seed
  and spread over the file (:func:`choose_examples`), go with every question request as the style to
  follow (Promptagator's few-shot); they are never kept as generated questions: one identical to an
  example (case and space aside) or closer to one than ``duplicate_threshold`` is rejected ("copies
  an example"). No extra request; a longer prompt.
- ``draw="documents"``: passages across documents and sections instead of in proportion to size
  (:class:`SectionSampler`): documents in a seeded round-robin, each asked about equally often, and
  within a document its markdown sections (:func:`sections`) likewise, the passage drawn inside the
  section, at exact offsets as before. ``draw="mix"`` takes the two draws in turn
  (:class:`MixedSampler`): half the passages by size, half by document.
- ``answer_check``: the answer round trip. A question that passed the other filters goes back to the
  model with its passage, and the model copies the answer; located like an excerpt
  (:func:`locate`), it must share a character with one of the question's excerpts, or the question
  is rejected ("answer outside its excerpt", also when the copy is not found). One request per
  question that reaches it, before the critique.
- ``style="users"``: the questions a reader would ask (how to do a task, why something happens,
  what happens when), not the exact name of an identifier (:data:`USERS_RULE`). The mix of styles
  a set holds (:func:`question_style`, :func:`describe_styles`) is printed by ``generate`` and
  ``validate``.

``style`` and ``examples`` change the question request, so both are part of its cache version
(:class:`Asking`): a reply cached for another prompt is never reused, and the default prompt keeps
its version and its cached replies. The draw changes only which passages are shown (the same
passage is the same request), and the answer check has a request and a version of its own.

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

The package: :mod:`.writer` holds the writing loop (:func:`generate_evaluation_set`);
:mod:`.passages` draws passages and locates or samples excerpts; :mod:`.prompts` holds what the
model is asked and the readers of its replies; :mod:`.filters` the rejections, in the order they
run; :mod:`.examples` reads and chooses the team's example questions; :mod:`.styles` tells a
question's style; :mod:`.calibration` the similarity distributions that calibrate the thresholds.
"""

from __future__ import annotations

from .calibration import format_distributions, similarity_distributions
from .examples import MAX_EXAMPLES, choose_examples, read_example_questions
from .filters import CRITIQUE_KEEP, REJECTIONS, copies, critique_rating, question_flaw
from .passages import DRAWS, PassageSampler, SectionSampler, locate, passage_around, sample_excerpt, sections
from .prompts import (
    ANSWER_INSTRUCTIONS,
    ANSWER_PROMPT_VERSION,
    ANSWER_SCHEMA,
    CRITIQUE_INSTRUCTIONS,
    CRITIQUE_PROMPT_VERSION,
    CRITIQUE_SCHEMA,
    EXAMPLES_HEADER,
    INSTRUCTIONS,
    PROMPT_VERSION,
    REPLY_SCHEMA,
    REPLY_TOKENS,
    SAMPLED_INSTRUCTIONS,
    SAMPLED_PROMPT_VERSION,
    STYLES,
    USERS_RULE,
    Asking,
    answer_reply,
    critique_reply,
    generated_reply,
    sampled_question,
)
from .styles import QUESTION_STYLES, describe_styles, question_style, style_counts
from .writer import EXCERPT_SOURCES, GenerationReport, generate_evaluation_set

__all__ = [
    "ANSWER_INSTRUCTIONS", "ANSWER_PROMPT_VERSION", "ANSWER_SCHEMA", "CRITIQUE_INSTRUCTIONS", "CRITIQUE_KEEP",
    "CRITIQUE_PROMPT_VERSION", "CRITIQUE_SCHEMA", "DRAWS", "EXAMPLES_HEADER", "EXCERPT_SOURCES", "INSTRUCTIONS",
    "MAX_EXAMPLES", "PROMPT_VERSION", "QUESTION_STYLES", "REJECTIONS", "REPLY_SCHEMA", "REPLY_TOKENS",
    "SAMPLED_INSTRUCTIONS", "SAMPLED_PROMPT_VERSION", "STYLES", "USERS_RULE", "Asking", "GenerationReport",
    "PassageSampler", "SectionSampler", "answer_reply", "choose_examples", "copies", "critique_rating",
    "critique_reply", "describe_styles", "format_distributions", "generate_evaluation_set", "generated_reply",
    "locate", "passage_around", "question_flaw", "question_style", "read_example_questions", "sample_excerpt",
    "sampled_question", "sections", "similarity_distributions", "style_counts",
]
