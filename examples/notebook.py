"""Tune the bundled handbook from Python, as a notebook would, then use what the run found.

    python examples/notebook.py            # from the repository root, with chunkwise installed

Runs 10 trials of the quick space (a minute or two on two cores, no network), keeps the study in
``studies/handbook.db`` (run it again to add 10 more), exports the recommended configuration and
chunks a new text with it.
"""

from __future__ import annotations

from pathlib import Path

import tuner

ROOT = Path(__file__).resolve().parents[1]

corpus = tuner.load_corpus(ROOT / "examples" / "handbook")
queries = tuner.load_evaluation_set(ROOT / "examples" / "handbook-queries.jsonl", corpus)

run = tuner.tune(corpus, queries, space="quick", n_trials=10)
print(run.summary())

chosen = run.recommended
print(f"\nrecommended: {chosen.describe()} (trial {chosen.number}), recall {chosen.recall:.1%}, "
      f"score {chosen.score:.4f}")
frame = run.trials_dataframe()
print(frame[["number", "user_attrs_score", "user_attrs_recall", "user_attrs_chunker"]]
      .sort_values("user_attrs_score", ascending=False).head().to_string(index=False))
print(f"\n{len(run.pareto_front())} trials on the recall/IoU Pareto front")

run.export("handbook-best.json")
pipeline = tuner.load_chunker("handbook-best.json")
chunks = pipeline.chunk("Jobs retry three times by default. Captured logs are kept for 14 days.", document="note.md")
print(f"\nhandbook-best.json chunks a new note into {len(chunks)} chunk(s); first: {chunks[0].text!r}")
