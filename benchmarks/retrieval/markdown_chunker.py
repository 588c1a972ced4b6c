"""The markdown chunker beside the recursive chunker at equal size and overlap.

Two datasets: chroma-dev (three corpora, 276 queries, pooled retrieval, as in Chroma's report;
its texts have no markdown headings) and the bundled handbook (five markdown documents with
headings, 30 queries). all-MiniLM-L6-v2, k=5; recall and IoU in cl100k tokens (chunkwise's
default unit) and, for chroma-dev, in characters (Chroma's unit).

    python benchmarks/retrieval/markdown_chunker.py [--data ../shared/datasets/chroma-dev]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, ROOT, require_chroma_dev

SETTINGS = [(200, 0), (250, 0), (400, 0), (250, 125)]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    warnings.simplefilter("ignore")
    import tuner
    from tuner.data.evalset import load_chroma_dataset
    from tuner.embedding import EmbeddingCache

    chroma = load_chroma_dataset(args.data)
    handbook = tuner.load_corpus(ROOT / "examples" / "handbook")
    handbook_set = tuner.load_evaluation_set(ROOT / "examples" / "handbook-queries.jsonl", handbook)
    print("| dataset | size/overlap | chunker | recall (tokens) | IoU (tokens) | recall (chars) | IoU (chars) "
          "| chunks | mean tokens |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        embedder = tuner.EmbedderConfig().build(EmbeddingCache(Path(tmp) / "cache.sqlite3"))
        for label, (corpora, evalset) in (("chroma-dev", chroma), ("handbook", ([handbook], handbook_set))):
            for size, overlap in SETTINGS:
                for name in ("recursive", "markdown"):
                    cells = []
                    for unit in ("tokens", "chars"):
                        result = tuner.evaluate(corpora, evalset, chunker=name, size=size, overlap=overlap, k=5,
                                                unit=unit, embedder=embedder)
                        m = result.metrics["overall"]
                        cells += [f"{m['recall']['mean']:.1%}", f"{m['iou']['mean']:.2%}"]
                    print(f"| {label} | {size}/{overlap} | {name} | {' | '.join(cells)} "
                          f"| {result.chunk_stats['chunks']} | {result.chunk_stats['mean_chunk_tokens']:.0f} |",
                          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
