"""English: what all-mpnet-base-v2 changes against all-MiniLM-L6-v2, per corpus pass (issue 53).

chroma-dev's three corpora (state_of_the_union, wikitexts, chatlogs) and their questions, pooled,
k=5: each chunking of :data:`CHUNKINGS` scored with each embedder by dense and hybrid (rrf 60)
retrieval, with a fresh embedding cache per embedder and chunking, so the dense run's embedding
time is a cold pass over the chunks and the questions (the price of one corpus pass), and its
throughput in cl100k tokens per second.

    python benchmarks/languages/english_embedders.py [--data ../shared/datasets/chroma-dev] [--embedders minilm mpnet]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, require_chroma_dev

CHUNKINGS = [("recursive", {"size": 256, "overlap": 0}), ("token", {"size": 256, "overlap": 0})]
EMBEDDERS = {"minilm": "sentence-transformers:all-MiniLM-L6-v2", "mpnet": "sentence-transformers:all-mpnet-base-v2",
             "e5": "multilingual-e5", "use": "use-multilingual"}


def run(data: Path, embedders: list[str]) -> None:
    import tuner
    from tuner.embedding import EmbedderConfig, EmbeddingCache

    corpora = [tuner.load_corpus(path, name=path.stem) for path in sorted((data / "corpora").glob("*.md"))]
    evalset = tuner.load_evaluation_set(str(data / "questions.csv"), corpora)
    print(f"chroma-dev ({', '.join(c.name for c in corpora)}), {len(evalset)} questions, k=5, pooled; "
          f"`python benchmarks/languages/english_embedders.py --embedders {' '.join(embedders)}`, "
          f"{dt.date.today().isoformat()}\n")
    print("| chunking | embedder | dense recall | dense IoU | hybrid recall | cold pass s | cl100k tokens/s |")
    print("|---|---|---|---|---|---|---|")
    for chunker, params in CHUNKINGS:
        for name in embedders:
            config = EmbedderConfig.parse(EMBEDDERS[name])
            with tempfile.TemporaryDirectory() as folder:
                cache = EmbeddingCache(Path(folder) / "cache.sqlite")
                dense = tuner.evaluate(corpora, evalset, chunker=chunker, k=5, embedder=config, cache=cache, **params)
                hybrid = tuner.evaluate(corpora, evalset, chunker=chunker, k=5, embedder=config, cache=cache,
                                        method="hybrid", **params)
            seconds = dense.embedding["model_seconds"]
            tokens = dense.embedding.get("computed_tokens") or dense.embedding.get("tokens", 0)
            overall, fused = dense.metrics["overall"], hybrid.metrics["overall"]
            print(f"| {chunker} {params['size']} | {config.model} | {overall['recall']['mean']:.1%} | "
                  f"{overall['iou']['mean']:.1%} | {fused['recall']['mean']:.1%} | {seconds:.1f} | "
                  f"{tokens / seconds if seconds else 0:,.0f} |", flush=True)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--embedders", nargs="+", choices=sorted(EMBEDDERS), default=["minilm", "mpnet"])
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    run(args.data, args.embedders)
    return 0


if __name__ == "__main__":
    sys.exit(main())
