"""What ranking dense candidates by exact float64 cosines costs a search (the CI fix of 2026-11-28).

A dense search used to rank every row by a float32 matrix product alone (``top_rows``); it now
takes the top ``k`` plus :data:`~tuner.retrieval.ranking.RESCORE_MARGIN` that way and ranks those by
:func:`~tuner.retrieval.ranking.exact_cosines`, so an evaluation and a production collection
order near ties alike. This times both side by side in one process, on random unit vectors of
MiniLM's dimension, medians of ``--repeats`` interleaved runs, and prints the load average beside
them.

    python benchmarks/speed/exact_rescore.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

#: (chunks, questions, depth): a chroma-dev corpus at k=5 and at a hybrid's depth of 100, and a
#: corpus ten times larger.
CASES = ((5_000, 300, 5), (5_000, 300, 100), (50_000, 300, 100))


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    return parser


def main() -> None:
    args = parser().parse_args()
    from tuner.retrieval.indexes import NumpyIndex
    from tuner.retrieval.ranking import top_rows

    rng = np.random.default_rng(0)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| chunks | questions | depth | float32 only (ms) | with exact rescoring (ms) | ratio |")
    print("|---|---|---|---|---|---|")
    for chunks, questions, depth in CASES:
        vectors = rng.normal(size=(chunks, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        queries = rng.normal(size=(questions, 384)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        index = NumpyIndex(vectors)
        before, after = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            top_rows(queries @ index.vectors.T, depth)
            before.append(time.perf_counter() - start)
            start = time.perf_counter()
            index.search_scored(queries, depth)
            after.append(time.perf_counter() - start)
        old, new = statistics.median(before) * 1000, statistics.median(after) * 1000
        print(f"| {chunks:,} | {questions} | {depth} | {old:.1f} | {new:.1f} | {new / old:.2f} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
