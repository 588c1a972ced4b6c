"""How many of the bundled writer's copied excerpts are near copies, and what the questions they
anchor are worth (issue 49).

The writer is asked to copy the excerpt that answers its question; a 1.5B model often changes a
word, merges two sentences or straightens a quote, and the excerpt is then "not in the text". The
locator now anchors a near copy to the document's own words (``tuner.data.generate.passages
.near_copy``). This script measures that on replies the writer really gave:

    python benchmarks/generated_questions/near_copies.py collect -o replies.jsonl      # from this machine's LLM cache
    python benchmarks/generated_questions/near_copies.py measure replies.jsonl -o anchored.jsonl

``collect`` reads every cached reply of the question request (a question and the excerpts it
copied) from chunkwise's LLM cache, one JSON line each, without the passage it was asked about
(the cache keeps replies, not requests); a reply cached as a bare JSON object only (the bundled
writer's, whose server constrains it to the schema), not one wrapped in prose or a code fence.
``measure`` finds each copy's passage again (the 1,500-
character stretch of the realdocs, Rust book or Valgrind corpus, ``~/.cache/chunkwise-bench``, that
shares the most four-word runs with it, and 2,000 characters either side), locates each excerpt
there as ``generate`` does, without and with near copies, and counts: located either way, only
as near copies, neither. The near-copy questions that pass ``generate``'s rule and relevance
filters are written out (with the model's copies beside the document's text) for a hand check.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sqlite3
import sys
from pathlib import Path

CORPORA = ("realdocs", "rustbook", "valgrind")
BENCH = Path.home() / ".cache" / "chunkwise-bench"
_WORD = re.compile(r"\w+")
#: Where a copy is searched: buckets of this many characters, the passage this much either side.
BUCKET, REACH = 1500, 2000


def collect(output: Path) -> None:
    from tuner._io.cachedir import cache_dir

    path = cache_dir() / "llm.sqlite3"
    replies, seen = [], set()
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        for (value,) in connection.execute("SELECT value FROM responses ORDER BY rowid"):
            try:
                reply = json.loads(json.loads(value)["content"])
                question = reply["question"]
                copies = [r["content"] for r in reply["references"]]
            except (ValueError, KeyError, TypeError):
                continue  # another request's reply (a critique, an answer, a sampled question)
            if isinstance(question, str) and copies and all(isinstance(c, str) for c in copies) \
                    and question not in seen:
                seen.add(question)
                replies.append({"question": question, "copies": copies})
    output.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in replies), encoding="utf-8")
    print(f"{output}: {len(replies)} distinct replies of the question request, from {path}")


def measure(replies_path: Path, output: Path) -> None:
    import numpy as np

    from tuner import load_corpus
    from tuner.data.generate import passages
    from tuner.data.generate.filters import question_flaw
    from tuner.embedding import EmbeddingCache
    from tuner.embedding.config import EmbedderConfig

    texts = {(name, d.id): d.text for name in CORPORA for d in load_corpus(BENCH / name / "raw", name)}
    runs = collections.defaultdict(list)
    for key, text in texts.items():
        words = [(m.start(), m.group().lower()) for m in _WORD.finditer(text)]
        for i in range(len(words) - 3):
            runs[" ".join(w for _, w in words[i:i + 4])].append((key, words[i][0]))

    def passage_of(copy: str):
        words = [w.lower() for w in _WORD.findall(copy)]
        votes = collections.Counter((key, at // BUCKET) for i in range(len(words) - 3)
                                    for key, at in runs.get(" ".join(words[i:i + 4]), [])[:20])
        if not votes:
            return None
        (key, bucket), _ = votes.most_common(1)[0]
        return key, (max(0, bucket * BUCKET - REACH), min(len(texts[key]), (bucket + 1) * BUCKET + REACH))

    anchor_near = passages.near_copy
    embedder = EmbedderConfig().build(EmbeddingCache())
    counts, kept = collections.Counter(), []
    for line in replies_path.read_text(encoding="utf-8").splitlines():
        reply = json.loads(line)
        counts["replies"] += 1
        located, near = [], False
        for copy in reply["copies"]:
            placed = passage_of(copy)
            if placed is None:
                break
            key, window = placed
            passages.near_copy = lambda *_: None  # the locator as it was
            try:
                before = passages.locate(texts[key], copy, window)
            finally:
                passages.near_copy = anchor_near
            found = before or passages.locate(texts[key], copy, window)
            if found is None:
                break
            near = near or before is None
            located.append((key, found))
        if len(located) < len(reply["copies"]):
            counts["not located"] += 1
            continue
        if not near:
            counts["located as before"] += 1
            continue
        counts["located only as a near copy"] += 1
        excerpts = [texts[key][a:b] for key, (a, b) in located]
        if flaw := question_flaw(reply["question"], " ".join(excerpts)):
            counts[f"near copy, then: {flaw}"] += 1
            continue
        vectors = embedder.embed([reply["question"], *excerpts])
        if float(np.min(vectors[1:] @ vectors[0])) < 0.3:  # generate's default relevance threshold
            counts["near copy, then: weakest reference too dissimilar"] += 1
            continue
        counts["near copy, kept"] += 1
        kept.append({"id": f"n{len(kept) + 1:03d}", "question": reply["question"], "corpus": located[0][0][0],
                     "references": [{"document": key[1], "start_index": a, "end_index": b,
                                     "content": texts[key][a:b]} for key, (a, b) in located],
                     "copies": reply["copies"]})
    output.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in kept), encoding="utf-8")
    for reason, count in counts.items():
        print(f"{reason:55} {count}")
    print(f"{output}: the {len(kept)} kept near-copy questions")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    collect_parser = commands.add_parser("collect", help="the question request's replies in this machine's LLM cache")
    collect_parser.add_argument("-o", "--output", type=Path, required=True)
    measure_parser = commands.add_parser("measure", help="locate each copy without and with near copies")
    measure_parser.add_argument("replies", type=Path)
    measure_parser.add_argument("-o", "--output", type=Path, required=True)
    return parser


def main() -> int:
    args = parser().parse_args()
    try:
        if args.command == "collect":
            collect(args.output)
        else:
            measure(args.replies, args.output)
    except (OSError, sqlite3.Error) as exc:
        print(f"near_copies: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
