"""Does the sampler find the best weighted score within 60 trials?

On each corpus of chroma-dev, every point of the discretised default space
(``search_spaces/default-grid.yaml``: 2 chunkers x 8 sizes x 3 overlaps x 10 values of
k = 480 configurations) is evaluated exhaustively with the real pipeline (MiniLM,
cl100k-token metrics, modelled latency and cost, default weights); each chunking is
scored at every k from one ranking. Then 60-trial studies run against that table with:

* chunkwise's ``WeightedScoreSampler`` (TPE on the weighted score);
* Optuna's default multi-objective TPE on (recall, IoU), best trial by weighted score;
* random search;

three seeds each. Reported: best score found / exhaustive best, mean over seeds.

    python benchmarks/sampler_efficiency.py [--data ../shared/datasets/chroma-dev] [--trials 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import optuna

from _common import CHROMA_DEV, ROOT, require_chroma_dev

SEEDS = (0, 1, 2)


def exhaustive_table(corpus, evalset, space, embedder, rates, weights, scales) -> dict[tuple, dict]:
    """Every grid point's attributes, keyed by (chunker, size, overlap share, k)."""
    from tuner import evaluate
    from tuner.tuning.objective import trial_attributes
    from tuner.tuning.space import fraction_value

    max_k = max(space.k.grid_values("k"))
    table = {}
    for name, domains in space.chunkers.items():
        for size in domains["size"].grid_values("size"):
            for share in domains["overlap"].grid_values("overlap"):
                result = evaluate(corpus, evalset, chunker=name, size=size, overlap=fraction_value(share, size),
                                  k=max_k, embedder=embedder)
                for k in range(1, max_k + 1):
                    table[(name, size, share, k)] = trial_attributes(result, rates, weights, scales, k)
    return table


def run_sampler(sampler: optuna.samplers.BaseSampler, table: dict, trials: int) -> list[float]:
    """Best score after each trial of a study that looks configurations up in ``table``."""
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    best, curve = float("-inf"), []

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        name = trial.suggest_categorical("chunker", ["token", "recursive"])
        size = trial.suggest_categorical(f"{name}.size", [50, 100, 200, 300, 400, 600, 800, 1000])
        share = trial.suggest_categorical(f"{name}.overlap_fraction", [0.0, 0.25, 0.5])
        k = trial.suggest_int("k", 1, 10)
        attrs = table[(name, size, share, k)]
        trial.set_user_attr("score", attrs["score"])
        return attrs["recall"], attrs["iou"]

    def track(study, trial):
        nonlocal best
        best = max(best, trial.user_attrs.get("score", float("-inf")))
        curve.append(best)

    study.optimize(objective, n_trials=trials, callbacks=[track])
    return curve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--cache", help="embedding cache file (default: the user cache)")
    args = parser.parse_args()
    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")

    from tuner import EmbedderConfig, load_corpus, load_evaluation_set
    from tuner.embedding import EmbeddingCache
    from tuner.tuning import Rates, Scales, Weights, load_search_space
    from tuner.tuning.objective import resolve_rates
    from tuner.tuning.samplers import WeightedScoreSampler

    space = load_search_space(ROOT / "search_spaces" / "default-grid.yaml")
    embedder = EmbedderConfig().build(EmbeddingCache(args.cache) if args.cache else EmbeddingCache())
    rates = resolve_rates(Rates(), embedder, "sentence-transformers")
    weights, scales = Weights(), Scales()
    samplers = {
        "chunkwise (TPE on score)": lambda seed: WeightedScoreSampler(seed=seed),
        "Optuna MO-TPE (recall, IoU)": lambda seed: optuna.samplers.TPESampler(seed=seed),
        "random search": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    }
    print(f"weights {weights}; {args.trials} trials; seeds {SEEDS}; "
          f"embed throughput {rates.embed_tokens_per_s:.0f} tokens/s\n")
    summary: dict[str, list[float]] = {name: [] for name in samplers}
    rows = []
    for path in sorted((args.data / "corpora").glob("*.md")):
        corpus = load_corpus(path)
        evalset = load_evaluation_set(args.data / "questions.csv", corpus, ignore_other_corpora=True)
        started = time.perf_counter()
        table = exhaustive_table(corpus, evalset, space, embedder, rates, weights, scales)
        grid_best_key = max(table, key=lambda key: table[key]["score"])
        grid_best = table[grid_best_key]["score"]
        print(f"{corpus.name}: {len(table)} grid points in {time.perf_counter() - started:.0f} s; "
              f"best {grid_best:.4f} at {grid_best_key}")
        for name, make in samplers.items():
            curves = [run_sampler(make(seed), table, args.trials) for seed in SEEDS]
            final = statistics.mean(c[-1] for c in curves) / grid_best
            half = statistics.mean(c[args.trials // 2 - 1] for c in curves) / grid_best
            summary[name].append(final)
            rows.append((corpus.name, name, half, final, min(c[-1] for c in curves) / grid_best))
    print(f"\n| corpus | sampler | best/grid best at {args.trials // 2} trials | at {args.trials} trials "
          "(mean of 3 seeds) | worst seed |")
    print("|---|---|---|---|---|")
    for corpus, name, half, final, worst in rows:
        print(f"| {corpus} | {name} | {half:.2%} | {final:.2%} | {worst:.2%} |")
    print("\nmean over corpora at", args.trials, "trials:",
          ", ".join(f"{name} {statistics.mean(v):.2%}" for name, v in summary.items()))
    ours, random_search = summary["chunkwise (TPE on score)"], summary["random search"]
    ok = all(v >= 0.98 for v in ours) and all(a > b for a, b in zip(ours, random_search))
    print("requirement (>= 98% of the grid best on every corpus, and better than random):",
          "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
