"""References given as excerpts alone, ``{document, content}`` (issue 27): located once, tolerant
of whitespace and markdown markup, mapped back to exact offsets; an ambiguous or missing
excerpt is named with its file and line and a suggestion. Expected offsets are counted by hand
(see the comments beside each document)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tuner import load_corpus, load_evaluation_set
from tuner.errors import EvaluationSetError

ROOT = Path(__file__).resolve().parents[2]

# guide.md, with its offsets:
#   0  "# Guide\n"                                (8 chars: 0-7)
#   8  "\n"
#   9  "Backups run **nightly** at\n"             ("Backups" 9-15, "**" 21-22, "nightly" 23-29, "**" 30-31,
#                                                   " at" 32-34, "\n" 35)
#  36  "  02:00 UTC.\n"                           ("02:00" 38-42, "UTC." 44-47, "\n" 48)
#  49  "\n"
#  50  "Restores take an hour.\n"                  (50-71, "\n" 72)
#  73  "Restores take an hour.\n"                  (73-94, "\n" 95)
#  96  "See [the manual](https://x.example/m) for `retention_days`.\n"
#        ("See " 96-99, "[" 100, "the manual" 101-110, "](https://x.example/m)" 111-132, " for " 133-137,
#         "`" 138, "retention_days" 139-152, "`" 153, "." 154, "\n" 155)
GUIDE = ("# Guide\n\nBackups run **nightly** at\n  02:00 UTC.\n\nRestores take an hour.\nRestores take an hour.\n"
         "See [the manual](https://x.example/m) for `retention_days`.\n")
OTHER = "Snapshots are kept for thirty days.\n"


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8", newline="")
    (folder / "other.md").write_text(OTHER, encoding="utf-8", newline="")
    return load_corpus(folder, "docs")


def _write(tmp_path, *references: dict) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "references": [ref]}) + "\n"
                            for i, ref in enumerate(references, start=1)), encoding="utf-8")
    return path


def test_excerpts_are_located_with_hard_wraps_indents_and_markup(docs, tmp_path):
    path = _write(
        tmp_path,
        # Exact text: found as it is.
        {"document": "guide.md", "content": "02:00 UTC."},
        # Copied from the rendered page: no ** and no hard wrap or indent.
        {"document": "guide.md", "content": "Backups run nightly at 02:00 UTC."},
        # Copied from a hard-wrapped, indented copy that also lost the link target and backticks.
        {"document": "guide.md", "content": "See the\n      manual for retention_days."},
    )
    evalset = load_evaluation_set(path, docs)
    refs = [q.references[0] for q in evalset]
    assert [(r.start_index, r.end_index) for r in refs] == [(38, 48), (9, 48), (96, 155)]
    # The reference keeps the document's exact text, markup and wraps included.
    assert refs[1].content == "Backups run **nightly** at\n  02:00 UTC."
    assert refs[2].content == "See [the manual](https://x.example/m) for `retention_days`."
    assert evalset.located == 3 and evalset.repaired == 0


def test_an_ambiguous_excerpt_names_its_lines_and_asks_for_context(docs, tmp_path):
    path = _write(tmp_path, {"document": "guide.md", "content": "Backups run nightly at 02:00 UTC."},
                  {"document": "guide.md", "content": "Restores take\nan hour."})
    with pytest.raises(EvaluationSetError) as caught:
        load_evaluation_set(path, docs)
    message = str(caught.value)
    assert "1 problem(s)" in message
    assert (f"{path}:2 (question 2?): reference 1: the excerpt 'Restores take an hour.' occurs twice in "
            "'guide.md' (lines 6, 7): give more context (a longer excerpt) so it occurs once") in message


def test_a_missing_excerpt_shows_the_nearest_match_or_the_document_that_holds_it(docs, tmp_path):
    path = _write(tmp_path, {"document": "guide.md", "content": "Backups run nightly at 03:00 UTC."},
                  {"document": "guide.md", "content": "Snapshots are kept for thirty days."},
                  {"document": "guide.md", "content": "Nothing like this is written anywhere."})
    with pytest.raises(EvaluationSetError) as caught:
        load_evaluation_set(path, docs)
    message = str(caught.value)
    assert "3 problem(s)" in message
    # "Backups run nightly at 0" (24 characters, markup left out) matches on line 3; then the
    # excerpt reads "3:00 UTC." where the document reads "2:00 UTC." and on (30 characters shown).
    assert (f"{path}:1 (question 1?): reference 1: the excerpt 'Backups run nightly at 03:00 UTC.' is not in "
            "'guide.md'; nearest: its first 24 characters match at line 3, then the excerpt reads '3:00 UTC.' "
            "where the document reads '2:00 UTC. Restores take an hou...'") in message
    assert (f"{path}:2 (question 2?): reference 1: the excerpt 'Snapshots are kept for thirty days.' is not in "
            "'guide.md'; no part of it was found: is it from this document, and copied verbatim?; it occurs once "
            "in 'other.md': is the document right?") in message
    assert f"{path}:3 (question 3?): reference 1: the excerpt 'Nothing like this is written anywhere.'" in message


@pytest.mark.parametrize("reference, message", [
    ({"document": "guide.md", "start_index": 3, "content": "x"}, "'start_index' without its pair"),
    ({"document": "guide.md", "start_index": -1, "end_index": -1, "content": "x"}, "offsets must be >= 0"),
    ({"document": "guide.md", "content": "  "}, "field 'content' is empty"),
])
def test_half_given_offsets_are_a_clear_error(docs, tmp_path, reference, message):
    with pytest.raises(EvaluationSetError, match=message):
        load_evaluation_set(_write(tmp_path, reference), docs)


def test_validate_locates_excerpts_and_exits_2_on_an_ambiguous_one(docs, tmp_path):
    folder = str(tmp_path / "docs")
    path = _write(tmp_path, {"document": "guide.md", "content": "Restores take an hour."})
    done = subprocess.run([sys.executable, "-m", "tuner", "validate", "--corpus", folder, "--queries", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{path}:1" in done.stderr and "occurs twice in 'guide.md' (lines 6, 7)" in done.stderr


def test_the_examples_excerpt_set_gives_the_examples_offsets(tmp_path):
    """The bundled excerpt-only set, located, is byte for byte the offset set the examples use."""
    out = tmp_path / "queries.jsonl"
    done = subprocess.run([sys.executable, "-m", "tuner", "validate", "--corpus", str(ROOT / "examples" / "handbook"),
                           "--queries", str(ROOT / "examples" / "handbook-excerpts.jsonl"), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "30 queries, 35 references (35 located from their excerpt)" in done.stdout
    assert out.read_bytes() == (ROOT / "examples" / "handbook-queries.jsonl").read_bytes()
