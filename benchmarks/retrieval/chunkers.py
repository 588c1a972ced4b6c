"""Every chunker on chroma-dev at report-like settings: quality and chunking cost.

Pooled retrieval over the three corpora, all-MiniLM-L6-v2, k=5, scored in characters
(as Chroma's report) and tokens. Chunking time is split into the time spent embedding
units (sentences, windows or pieces), cold (empty cache) and warm (cached), and the
segmentation itself. Then the cluster DP alone on the whole wikitexts corpus with
size=400, piece_size=50 (warm), whose segmentation must take under 1 s.

    python benchmarks/retrieval/chunkers.py [--data ../shared/datasets/chroma-dev]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, require_chroma_dev

CONFIGS = [
    ("recursive", {"size": 250, "overlap": 125}),
    ("recursive", {"size": 200, "overlap": 0}),
    ("token", {"size": 250, "overlap": 0}),
    ("sentence", {"sentences": 5, "overlap": 1}),
    ("kamradt", {"buffer_size": 1, "threshold_type": "percentile", "threshold": 95.0}),
    ("kamradt_bounded", {"size": 300, "buffer_size": 1}),
    ("cluster", {"size": 250, "piece_size": 50}),
    ("cluster", {"size": 200, "piece_size": 50}),
    ("double_pass", {"size": 300}),
    ("clustering", {"method": "single_linkage", "size": 250, "stop_distance": 0.6, "positional_weight": 0.5}),
    ("clustering", {"method": "dbscan", "eps": 0.3, "min_samples": 2, "positional_weight": 0.5}),
]


def label(name: str, params: dict) -> str:
    return f"{name} " + ", ".join(f"{k}={v}" for k, v in params.items() if k != "threshold_type")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--only", metavar="NAME", help="run only this chunker's rows (and skip the DP timing)")
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    warnings.simplefilter("ignore")
    import tuner
    from tuner.data.evalset import load_chroma_dataset
    from tuner.embedding import EmbeddingCache

    corpora, evalset = load_chroma_dataset(args.data)
    print("| chunker | recall | IoU | precision-Ω | recall (tokens) | IoU (tokens) | chunks | mean tokens "
          "| unit embedding cold s | unit embedding warm s | segmentation s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, params) in enumerate(CONFIGS):
            if args.only and name != args.only:
                continue
            # A cache of its own: the cold run embeds this chunker's units from scratch.
            embedder = tuner.EmbedderConfig().build(EmbeddingCache(Path(tmp) / f"cache-{i}.sqlite3"))
            cold = tuner.evaluate(corpora, evalset, chunker=name, k=5, unit="chars", embedder=embedder, **params)
            warm = tuner.evaluate(corpora, evalset, chunker=name, k=5, unit="chars", embedder=embedder, **params)
            tokens = tuner.evaluate(corpora, evalset, chunker=name, k=5, unit="tokens", embedder=embedder,
                                    **params).metrics["overall"]
            m = warm.metrics["overall"]
            print(f"| {label(name, params)} | {m['recall']['mean']:.1%} | {m['iou']['mean']:.2%} "
                  f"| {m['precision_omega']['mean']:.1%} | {tokens['recall']['mean']:.1%} "
                  f"| {tokens['iou']['mean']:.2%} | {warm.chunk_stats['chunks']} "
                  f"| {warm.chunk_stats['mean_chunk_tokens']:.0f} | {cold.timings['unit_embedding']:.2f} "
                  f"| {warm.timings['unit_embedding']:.2f} | {warm.timings['segmentation']:.3f} |", flush=True)

        if args.only:
            return 0
        wikitexts = next(c for c in corpora if c.name == "wikitexts")
        document = wikitexts.documents[0]
        embedder = tuner.EmbedderConfig().build(EmbeddingCache(Path(tmp) / "cache-dp.sqlite3"))
        chunker = tuner.make_chunker("cluster", size=400, piece_size=50).bind(embedder)
        chunker.split(document)  # cold: embeds the pieces
        document.tokens  # noqa: B018  (computed once per document, shared by every trial)
        before = embedder.stats.seconds
        started = time.perf_counter()
        chunks = chunker.split(document)
        total = time.perf_counter() - started
        units = embedder.stats.seconds - before
        print(f"\ncluster size=400, piece_size=50 on wikitexts ({len(document.text):,} characters, "
              f"{len(document.tokens):,} tokens): {len(chunks)} chunks; warm chunking {total:.3f} s = "
              f"{units:.3f} s cached unit lookups + {total - units:.3f} s segmentation (requirement: < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
