"""Compare chunkwise's metrics with Chroma's reference figures on chroma-dev.

Pooled retrieval over the three corpora, all-MiniLM-L6-v2, k=5, as in
``shared/datasets/chroma-dev/reference-results.md``; scored in characters (Chroma's
unit) and in cl100k tokens. Then times a cold and a warm evaluation of one
configuration (fresh cache vs. the cache that run filled).

    python benchmarks/exactness/chroma_reference.py [--data ../shared/datasets/chroma-dev]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, require_chroma_dev

CONFIGS = [("recursive", 250, 125), ("token", 250, 125), ("recursive", 250, 0),
           ("token", 250, 0), ("recursive", 200, 0), ("token", 200, 0), ("token", 800, 400)]


def reference_figures(data: Path) -> dict[tuple[str, int, int], dict[str, float]]:
    """The overall table of reference-results.md, in percent, keyed by (chunker, size, overlap)."""
    figures = {}
    row = re.compile(r"^\| (\w+) \| (\d+)/(\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$")
    for line in (data / "reference-results.md").read_text(encoding="utf-8").splitlines():
        match = row.match(line)
        if match:
            name, size, overlap, *values = match.groups()
            figures[(name, int(size), int(overlap))] = dict(
                zip(("recall", "precision", "iou", "precision_omega"), map(float, values)))
    return figures


def evaluate_configs(data: Path, configs, cache_path: Path, units=("chars", "tokens", "chars-marked")):
    """Yield (config, unit, overall metrics in percent, result) for each config and unit
    (``chars-marked``: characters, each reference at its marked copy only)."""
    import tuner
    from tuner.data.evalset import load_chroma_dataset
    from tuner.embedding import EmbeddingCache

    corpora, evalset = load_chroma_dataset(data)
    # fp32 on every machine: the figures compared with Chroma's (BENCHMARKS.md) were measured at fp32.
    embedder = tuner.EmbedderConfig(precision="fp32").build(EmbeddingCache(cache_path))
    for name, size, overlap in configs:
        for unit in units:
            scoring, _, copies = unit.partition("-")
            result = tuner.evaluate(corpora, evalset, chunker=name, size=size, overlap=overlap,
                                    k=5, unit=scoring, embedder=embedder, copies=copies or "any")
            overall = {m: v["mean"] * 100 for m, v in result.metrics["overall"].items()}
            yield (name, size, overlap), unit, overall, result


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    reference = reference_figures(args.data)
    rows: dict = {}
    repeats = None
    with tempfile.TemporaryDirectory() as tmp:
        for config, unit, overall, result in evaluate_configs(args.data, CONFIGS, Path(tmp) / "c.sqlite3"):
            rows.setdefault(config, {})[unit] = overall
            repeats = result.repeats
        timing = time_cold_and_warm(args.data, Path(tmp) / "timing.sqlite3")

    print(f"repeated references: {repeats.repeated_references} of {repeats.references} occur more than once in "
          f"their corpus ({repeats.queries_with_repeats} queries); scored at any copy (default), and at the "
          "marked copy only in the last column\n")
    print("| chunker | size/overlap | recall ref / ours (Δ) | IoU ref / ours (Δ) | precision ref / ours "
          "| precision-Ω ref / ours | tokens: recall / IoU / precision-Ω | marked only: recall / IoU |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for (name, size, overlap), units in rows.items():
        ref, ours, tok = reference[(name, size, overlap)], units["chars"], units["tokens"]
        d_recall, d_iou = ours["recall"] - ref["recall"], ours["iou"] - ref["iou"]
        worst = max(worst, abs(d_recall), abs(d_iou))
        print(f"| {name} | {size}/{overlap} | {ref['recall']:.1f} / {ours['recall']:.2f} ({d_recall:+.2f}) "
              f"| {ref['iou']:.2f} / {ours['iou']:.2f} ({d_iou:+.2f}) "
              f"| {ref['precision']:.2f} / {ours['precision']:.2f} "
              f"| {ref['precision_omega']:.1f} / {ours['precision_omega']:.1f} "
              f"| {tok['recall']:.2f} / {tok['iou']:.2f} / {tok['precision_omega']:.1f} "
              f"| {units['chars-marked']['recall']:.2f} / {units['chars-marked']['iou']:.2f} |")
    print(f"\nlargest recall/IoU difference: {worst:.2f} points (requirement: <= 2)")
    cold, warm = timing
    print("\n`chunkwise evaluate` recursive 250/0 on chroma-dev, fresh process each, MiniLM on CPU:")
    print(f"  cold (empty cache): {cold['seconds']:.2f} s, cache hit rate {cold['hit_rate']:.0%}, "
          f"{cold['computed']} texts embedded")
    print(f"  warm (same cache):  {warm['seconds']:.2f} s, cache hit rate {warm['hit_rate']:.0%}, "
          f"{warm['computed']} texts embedded  -> {cold['seconds'] / warm['seconds']:.0f}x faster")
    return 0 if worst <= 2 else 1


def time_cold_and_warm(data: Path, cache_path: Path) -> tuple[dict, dict]:
    """Wall time of ``chunkwise evaluate`` in a fresh process, twice on one cache file.

    The first run starts with an empty cache (it loads the model and embeds every chunk
    and query); the second finds every vector cached and never loads the model.
    """
    command = [sys.executable, "-m", "tuner", "evaluate", "--queries", str(data / "questions.csv"),
               "--chunker", "recursive", "-p", "size=250", "-p", "overlap=0", "--unit", "chars",
               "--cache", str(cache_path), "--json"]
    for corpus in sorted((data / "corpora").glob("*.md")):
        command += ["--corpus", str(corpus)]
    out = []
    for _ in range(2):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - started
        embedding = json.loads(done.stdout)["embedding"]
        out.append({"seconds": seconds, "hit_rate": embedding["cache_hit_rate"],
                    "computed": embedding["computed_texts"]})
    return out[0], out[1]


if __name__ == "__main__":
    sys.exit(main())
