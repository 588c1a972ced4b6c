"""Embedding throughput by batch order and precision, and whether bf16 or int8 change decisions.

**Throughput** (``--part throughput``): the chunks of recursive 250/0 on chroma-dev's three
corpora, embedded by all-MiniLM-L6-v2 with no cache, four ways, interleaved ``--repeats``
times (model loaded and warmed first, so load time is not counted):

* *shipped*: batches of 64 in request (document) order, as ``Embedder.embed`` did before
  length-sorted batching (sentence-transformers still sorts inside each batch);
* *sorted fp32*: ``Embedder.embed`` now, batches of similar length by the model's tokenizer;
* *sorted bf16*, *sorted int8*: the same with ``precision="bf16"`` / ``"int8"``.

Reported: median seconds, median per-round speed-up over *shipped*, the padding factor
(word pieces the model processes, padding included, over real word pieces) and the cosine
of each variant's vectors with fp32's.

**Agreement** (``--part agreement``): every point of ``search_spaces/default-grid.yaml``
(``--grid full``: token and recursive, sizes 50-1000 by 50, overlaps 0, 1/4 and 1/2 of the
size, k = 1-10: 1,200 points) or of a smaller grid (``--grid small``: sizes 100, 200, 400,
800, overlaps 0 and 1/4: 160 points) is evaluated with ``tuner.evaluate`` at k = 10 and read
at every k with ``EvaluationResult.metrics_at``, once per precision; pooled over the three
corpora and for each corpus on its own (as one study per corpus sees it), in cl100k tokens.
Reported per precision against fp32: the largest and mean absolute difference of recall
and IoU in points, and whether the top-5 configurations by recall and by IoU are the same.
The bar for a faster default: every configuration within 0.3 points, same top-5.

    python benchmarks/exactness/embedding_precision.py --part throughput [--repeats 5]
    python benchmarks/exactness/embedding_precision.py --part agreement --grid full [--cache-dir DIR] [--out FILE]
    python benchmarks/exactness/embedding_precision.py --part agreement --tables FILE   # report again from --out
    python benchmarks/exactness/embedding_precision.py --part agreement --judge --grid small --out FILE

``--cache-dir`` keeps one embedding cache per precision, so a second run only re-scores.

**The decision bar** (``--judge``, issue 21): each point also keeps its per-question weighted
scores (default weights and scales; each question's recall and IoU with the configuration's
modelled latency and cost, priced with one fixed embedding throughput for every precision so
only the vectors differ) and its cheapness (cost, latency, chunks), every question of the
corpus counted; ``benchmarks/decision_bar.py`` then judges each precision against fp32 on each
corpus (one study per corpus). The pooled scope is left out: users tune one corpus at a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, chroma_dev_sets, grid_configs, require_chroma_dev

PRECISIONS = ("fp32", "bf16", "int8")
BAR_POINTS = 0.3
TOP = 5
#: Tokens per second the latency model prices every precision at (fp32's measured throughput on
#: 2 cores, BENCHMARKS.md): the same for all, so the judged difference is the vectors' alone.
JUDGE_TOKENS_PER_S = 5500.0


def available_precisions() -> list[str]:
    from tuner.embedding.sentence_transformers import cpu_supports_bf16

    out = ["fp32"]
    if cpu_supports_bf16():
        out.append("bf16")
    else:
        print("this CPU has no native bf16: bf16 skipped", file=sys.stderr)
    out.append("int8")
    return out


# --- throughput -----------------------------------------------------------------------------


def padding_factor(lengths: list[int], batch_size: int) -> float:
    """Word pieces processed (each batch padded to its longest text) over real word pieces."""
    padded = sum(max(lengths[i:i + batch_size]) * len(lengths[i:i + batch_size])
                 for i in range(0, len(lengths), batch_size))
    return padded / sum(lengths)


def throughput(args: argparse.Namespace) -> None:
    import tuner
    from tuner.data.evalset import load_chroma_dataset
    from tuner.embedding import SentenceTransformerEmbedder

    corpora, _ = load_chroma_dataset(args.data)
    chunker = tuner.make_chunker("recursive", size=250, overlap=0)
    texts = list(dict.fromkeys(c.text for corpus in corpora for doc in corpus for c in chunker.split(doc)))
    models = {p: SentenceTransformerEmbedder(precision=p) for p in available_precisions()}
    for model in models.values():
        model.embed_uncached(texts[:8])  # load and warm up
    batch = models["fp32"].batch_size
    lengths = models["fp32"]._batch_lengths(texts)
    print(f"{len(texts)} texts (recursive 250/0 chunks of chroma-dev), {sum(lengths):,} word pieces; "
          f"padding factor {padding_factor(lengths, batch):.2f} in document order, "
          f"{padding_factor(sorted(lengths, reverse=True), batch):.2f} sorted\n")

    def shipped() -> np.ndarray:
        return models["fp32"].embed_uncached(texts)  # document order, batch_size texts per call

    variants = {"shipped (document order, fp32)": shipped}
    for precision, model in models.items():
        variants[f"sorted {precision}"] = lambda m=model: m.embed(texts)
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, run in variants.items():
            started = time.perf_counter()
            vectors[name] = np.asarray(run(), dtype=np.float32)
            seconds[name].append(time.perf_counter() - started)
    reference = vectors["shipped (document order, fp32)"]
    reference = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    base = seconds["shipped (document order, fp32)"]
    print(f"median of {args.repeats} interleaved rounds\n")
    print("| variant | median s | texts/s | speed-up over shipped (median of per-round ratios) "
          "| cos with fp32 shipped: min / mean |")
    print("|---|---|---|---|---|")
    for name, values in seconds.items():
        cos = np.sum(vectors[name] * reference, axis=1)
        ratio = statistics.median(b / v for b, v in zip(base, values))
        print(f"| {name} | {statistics.median(values):.2f} | {len(texts) / statistics.median(values):.1f} "
              f"| {ratio:.2f}x | {cos.min():.7f} / {cos.mean():.7f} |")


# --- agreement ------------------------------------------------------------------------------


def agreement_tables(args: argparse.Namespace, precision: str, cache_dir: Path) -> dict[str, dict[str, Any]]:
    """``{scope: {"chunker size overlap k": {"recall", "iou"}}}`` for one precision, in points;
    with ``--judge`` also ``"per_question"`` (weighted scores) and ``"cheapness"`` per point."""
    import tuner
    from tuner.data.evalset import load_chroma_dataset
    from tuner.embedding import EmbeddingCache
    from tuner.tuning.core.objective import Rates, Scales, Weights, weighted_score
    from tuner.tuning.scoring.measures import resolve_rates, trial_attributes

    corpora, pooled_set = load_chroma_dataset(args.data)
    embedder = tuner.EmbedderConfig(precision=precision).build(EmbeddingCache(cache_dir / f"{precision}.sqlite3"))
    rates = resolve_rates(Rates(embed_tokens_per_s=JUDGE_TOKENS_PER_S), embedder, "sentence-transformers")
    weights, scales = Weights(), Scales()
    scopes = [] if args.judge else [("pooled", corpora, pooled_set)]
    scopes += [(corpus.name, corpus, evalset) for corpus, evalset in chroma_dev_sets(args.data, args.corpora, corpora)]
    tables: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for scope, data, evalset in scopes:
        table = tables.setdefault(scope, {})
        for name, size, overlap in grid_configs(args.grid):
            result = tuner.evaluate(data, evalset, chunker=name, size=size, overlap=overlap, k=10, embedder=embedder)
            for k in range(1, 11):
                overall = result.metrics_at(k)["overall"]
                point = table[f"{name} {size}/{overlap} k={k}"] = {"recall": 100 * overall["recall"]["mean"],
                                                                    "iou": 100 * overall["iou"]["mean"]}
                if args.judge:
                    attrs = trial_attributes(result, rates, weights, scales, k=k)
                    latency, cost = attrs["latency_ms"] / 1000, attrs["cost_usd_per_1k_queries"]
                    per_query = result.scores.at(k)
                    scores = weighted_score(per_query["recall"], per_query["iou"], latency, cost, weights, scales)
                    point["per_question"] = [round(float(v), 7) for v in scores]
                    point["cheapness"] = [cost, latency, attrs["chunks"]]
        print(f"  {precision} {scope}: {len(table)} points ({time.perf_counter() - started:.0f} s so far)",
              file=sys.stderr, flush=True)
    return tables


def top(table: dict[str, dict[str, float]], metric: str) -> list[str]:
    """The best configurations by ``metric`` (ties broken by name, so the order is stable)."""
    return sorted(table, key=lambda key: (-round(table[key][metric], 9), key))[:TOP]


def tied_top(table: dict[str, dict[str, float]], metric: str) -> set[str]:
    """Every configuration scoring at least the fifth best (ties at 100% recall are common)."""
    fifth = table[top(table, metric)[-1]][metric]
    return {key for key, value in table.items() if round(value[metric], 9) >= round(fifth, 9)}


def agreement(args: argparse.Namespace) -> dict[str, Any]:
    if args.tables:
        results = json.loads(args.tables.read_text())
    else:
        cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="chunkwise-precision-"))
        cache_dir.mkdir(parents=True, exist_ok=True)
        chosen = available_precisions()
        if args.precisions:
            chosen = [p for p in chosen if p == "fp32" or p in args.precisions]
        results = {p: agreement_tables(args, p, cache_dir) for p in chosen}
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))
    reference = results["fp32"]
    points = len(next(iter(reference.values())))
    print(f"\n{points} points per scope; differences in points (percent) against fp32; top-5: the same five "
          "(in order), the same set, the same when ties with the fifth are included, or not\n")
    print("| precision | scope | recall max / mean abs diff | configs > 0.3 (recall / IoU) | IoU max / mean abs diff "
          "| same top-5 by recall | same top-5 by IoU | within the bar |")
    print("|---|---|---|---|---|---|---|---|")
    for precision in (p for p in results if p != "fp32"):
        for scope, table in results[precision].items():
            ref = reference[scope]
            diffs = {m: [abs(table[key][m] - ref[key][m]) for key in ref] for m in ("recall", "iou")}
            over = {m: sum(d > BAR_POINTS for d in diffs[m]) for m in diffs}
            said = {}
            for m in ("recall", "iou"):
                if top(table, m) == top(ref, m):
                    said[m] = "yes"
                elif set(top(table, m)) == set(top(ref, m)):
                    said[m] = "same set, other order"
                else:
                    said[m] = "with ties" if tied_top(table, m) == tied_top(ref, m) else "no"
            ok = not any(over.values()) and all(v != "no" for v in said.values())
            print(f"| {precision} | {scope} | {max(diffs['recall']):.3f} / {statistics.mean(diffs['recall']):.3f} "
                  f"| {over['recall']} / {over['iou']} "
                  f"| {max(diffs['iou']):.3f} / {statistics.mean(diffs['iou']):.3f} | {said['recall']} "
                  f"| {said['iou']} | {'yes' if ok else 'no'} |")
    for scope in reference:
        print(f"\nfp32 top-5 ({scope}) by recall: {top(reference[scope], 'recall')}; "
              f"by IoU: {top(reference[scope], 'iou')}")
        for precision in (p for p in results if p != "fp32"):
            for m in ("recall", "iou"):
                if top(results[precision][scope], m) != top(reference[scope], m):
                    shown = [f"{key} ({results[precision][scope][key][m]:.2f}; fp32 {reference[scope][key][m]:.2f})"
                             for key in top(results[precision][scope], m)]
                    print(f"  {precision} top-5 by {m}: {shown}")
    return results


def judge(results: dict[str, Any]) -> None:
    """The decision bar (``benchmarks/decision_bar.py``) for each precision against fp32, per corpus."""
    from benchmarks.decision_bar import decision_bar, studies_kept

    reference = results["fp32"]
    print("\nDecision bar (issue 21), per corpus against fp32: criterion 1, the recommendation inside the other's "
          "tie set both ways (paired bootstrap, 95%, top 30, cheapest tied recommended); criterion 2, mean |weighted "
          "score difference| over the grid < 0.1 x median half-width of fp32's per-configuration 95% CIs; last "
          "column: criterion 1 on 1,000 seeded random sets of 60 grid points (a study's trials)\n")
    print("| precision | corpus | points x questions | fp32 recommends (tied) | precision recommends (tied) "
          "| criterion 1 | mean abs diff | 0.1 x median CI half-width | criterion 2 | verdict "
          "| criterion 1 in 60-trial studies |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for precision in (p for p in results if p != "fp32"):
        for scope, table in results[precision].items():
            ref = reference[scope]
            if "per_question" not in next(iter(ref.values())):
                raise SystemExit("these tables have no per-question scores: run again with --judge")
            paths = ({key: point["per_question"] for key, point in ref.items()},
                     {key: point["per_question"] for key, point in table.items()})
            cheapness = {key: tuple(point["cheapness"]) for key, point in ref.items()}
            verdict = decision_bar(*paths, cheapness=cheapness)
            studies = studies_kept(*paths, cheapness=cheapness)
            print(f"| {precision} | {scope} | {verdict.configurations} x {verdict.questions} "
                  f"| {verdict.reference.recommended} ({len(verdict.reference.tied)}) "
                  f"| {verdict.fast.recommended} ({len(verdict.fast.tied)}) "
                  f"| {'yes' if verdict.recommendation_kept else 'no'} "
                  f"| {verdict.mean_abs_difference:.5f} | {verdict.threshold:.5f} "
                  f"| {'yes' if verdict.scores_kept else 'no'} | {'PASS' if verdict.passed else 'FAIL'} "
                  f"| {studies:.1%} |")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--part", choices=("throughput", "agreement", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", choices=("full", "small"), default="full")
    parser.add_argument("--cache-dir", type=Path, help="embedding caches, one per precision (default: temporary)")
    parser.add_argument("--out", type=Path, help="write the agreement tables as JSON")
    parser.add_argument("--tables", type=Path, help="report from tables written by --out (no evaluation)")
    parser.add_argument("--judge", action="store_true",
                        help="keep per-question scores (per corpus only) and apply the decision bar")
    parser.add_argument("--corpora", nargs="+", help="only these chroma-dev corpora (default: all three)")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS,
                        help="the precisions to evaluate (default: every one this CPU runs well; fp32 always)")
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    warnings.simplefilter("ignore")
    if args.part in ("throughput", "all"):
        throughput(args)
    if args.part in ("agreement", "all"):
        results = agreement(args)
        if args.judge:
            judge(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
