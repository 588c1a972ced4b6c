"""Evaluation sets: queries with exact reference excerpts, in character offsets.

Two formats are read:

* **JSONL** (chunkwise's own, also written): one query per line::

      {"id": "q1", "question": "How long is the warranty?", "corpus": "handbook",
       "references": [{"document": "warranty.md", "start_index": 120,
                       "end_index": 187, "content": "The warranty lasts two years..."}]}

  ``corpus`` may be left out when one corpus is loaded; ``id`` defaults to
  ``"line-N"``. A reference may leave out both offsets, ``{"document": ..., "content": ...}``:
  the excerpt is then located in its document (:mod:`.excerpts`: exactly once, tolerant of
  whitespace and markdown markup) and its offsets and exact text filled in on load. This is
  the way to write an evaluation set by hand; ``chunkwise validate -o`` writes the offsets.

  A query may also say where it came from and how it was reviewed (``chunkwise review``):
  ``"origin"`` (``"hand"``, the default, or ``"generated"``), ``"model"`` (the model that wrote
  it), ``"review"`` (``"accepted"``, ``"rejected"`` or ``"edited"``; absent: not reviewed),
  ``"stale": true`` (its document changed since the question was written; its excerpt was
  re-located where possible), ``"fate"`` (what ``chunkwise validate``'s update found of its
  excerpts when the documents changed: ``"unchanged"``, ``"moved"``, ``"edited"`` or ``"gone"``,
  :mod:`.update`) and ``"revision"`` (how often the review changed it). A rejected
  query is left out on load, and so is a stale one whose excerpt no longer matches; the others
  are counted by state (:attr:`EvaluationSet.states`, :meth:`EvaluationSet.describe_states`).

  :func:`read_jsonl_records` is the one reader of such a file: ``validate``, ``tune``,
  ``evaluate`` and ``review`` all read it with the same rules (a line that is not a JSON object,
  a field of the wrong type or value, an excerpt that is only white space or given twice, a
  string no UTF-8 file can hold: each refused with its line named).
* **Chroma CSV** (``question``, ``references`` as a JSON list of
  ``{content, start_index, end_index}``, ``corpus_id``), as in Chroma's
  ``chunking_evaluation``. ``corpus_id`` names a loaded corpus with one document, or a
  document (by id or file stem) of the single loaded corpus.

Loading always validates against the corpora: each reference must equal
``document_text[start_index:end_index]``, offsets counting characters of the text as
decoded (no newline translation; a byte-order mark is not counted). Files are UTF-8;
a leading byte-order mark is accepted (Excel's "CSV UTF-8" writes one), and so is
UTF-16 or UTF-32 text that starts with one.

The package: :mod:`.records` holds the records (:class:`Query` and its kin); :mod:`.jsonl` and
:mod:`.chroma` read the two formats; :mod:`.validation` checks a set against its corpora;
:mod:`.loading` reads a file through them (:func:`load_evaluation_set`).
"""

from __future__ import annotations

from .jsonl import JsonlRecord, parse_json_object, query_of_record, read_jsonl_records
from .loading import load_chroma_dataset, load_evaluation_set, read_regular_file
from .records import FATES, ORIGINS, REVIEWS, STATE_LABELS, STATES, UNLOCATED, EvaluationSet, Query, Reference
from .validation import MAX_LISTED, check_records, query_problems

__all__ = [
    "FATES", "MAX_LISTED", "ORIGINS", "REVIEWS", "STATES", "STATE_LABELS", "UNLOCATED", "EvaluationSet", "JsonlRecord",
    "Query", "Reference", "check_records", "load_chroma_dataset", "load_evaluation_set", "parse_json_object",
    "query_of_record", "query_problems", "read_jsonl_records", "read_regular_file",
]
