"""Does the sampler find the best weighted score within 60 trials?

On each corpus of chroma-dev, every point of the discretised default space
(``search_spaces/default-grid.yaml``: 2 chunkers x 20 sizes x 3 overlaps x 10 values of
k = 1200 configurations) is evaluated exhaustively with the real pipeline (MiniLM,
cl100k-token metrics, modelled latency and cost, default weights); each chunking is
scored at every k from one ranking. Then 60-trial studies run against that table, under
the default weights and under recall-only weights, with:

* chunkwise's ``WeightedScoreSampler`` (TPE on the weighted score);
* Optuna's default multi-objective TPE on (recall, IoU), best trial by weighted score;
* random search;

three seeds each (``--seeds``). Reported: best score found / exhaustive best, mean over
seeds.

    python benchmarks/search/sampler_efficiency.py [--data ../shared/datasets/chroma-dev] [--trials 60] [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import optuna

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, ROOT, require_chroma_dev

SEEDS = (0, 1, 2)


def exhaustive_table(corpus, evalset, space, embedder, rates, weights, scales) -> dict[tuple, dict]:
    """Every grid point's attributes, keyed by (chunker, size, overlap, k)."""
    from tuner import evaluate
    from tuner.tuning.scoring.measures import trial_attributes
    from tuner.tuning.search.domains import fraction_value

    max_k = max(space.k.grid_values("k"))
    table = {}
    for name, domains in space.chunkers.items():
        for size in domains["size"].grid_values("size"):
            for share in domains["overlap"].grid_values("overlap"):
                overlap = fraction_value(share, size)
                result = evaluate(corpus, evalset, chunker=name, size=size, overlap=overlap, k=max_k,
                                  embedder=embedder)
                for k in range(1, max_k + 1):
                    table[(name, size, overlap, k)] = trial_attributes(result, rates, weights, scales, k)
    return table


def run_sampler(sampler: optuna.samplers.BaseSampler, space, table: dict, trials: int) -> list[float]:
    """Best score after each evaluated trial of a study that looks configurations up in ``table``.

    As in ``chunkwise tune``, a proposal of an already evaluated configuration is pruned
    without evaluation and does not count: every sampler gets ``trials`` evaluations.
    """
    from tuner.tuning.core.records import DUPLICATE_ATTR, SCORE_ATTR

    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    best, curve = float("-inf"), []
    claimed: dict[tuple, int] = {}  # what the ledger's claims do for `chunkwise tune`

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        chunker, k, _ = space.sample(trial)  # the same define-by-run sampling as `chunkwise tune`
        key = (chunker.name, chunker.params["size"], chunker.params["overlap"], k)
        if key in claimed:
            trial.set_user_attr(DUPLICATE_ATTR, claimed[key])
            raise optuna.TrialPruned(f"same configuration as trial {claimed[key]}")
        claimed[key] = trial.number
        attrs = table[key]
        trial.set_user_attr(SCORE_ATTR, attrs["score"])
        return attrs["recall"], attrs["iou"]

    def track(study, trial):
        nonlocal best
        if trial.state == optuna.trial.TrialState.COMPLETE:
            best = max(best, trial.user_attrs["score"])
            curve.append(best)
            if len(curve) >= trials:
                study.stop()

    study.optimize(objective, n_trials=trials * 20, callbacks=[track])
    # A sampler that keeps re-proposing evaluated points (20 proposals per trial) ends early.
    return curve + [curve[-1]] * (trials - len(curve))


WEIGHT_SETS = {
    "default weights": dict(recall=1.0, iou=0.5, latency=0.1, cost=0.1),
    "recall only": dict(recall=1.0, iou=0.0, latency=0.0, cost=0.0),
}


def rescore(table: dict, weights, scales) -> dict:
    """The same table under other weights (recall, IoU, latency and cost do not change)."""
    from tuner.tuning.core.objective import weighted_score

    return {key: {**a, "score": weighted_score(a["recall"], a["iou"], a["latency_ms"] / 1000,
                                               a["cost_usd_per_1k_queries"], weights, scales)}
            for key, a in table.items()}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=3, help="seeds per sampler (3)")
    parser.add_argument("--cache", help="embedding cache file (default: the user cache)")
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")

    from tuner import EmbedderConfig, load_corpus, load_evaluation_set
    from tuner.embedding import EmbeddingCache
    from tuner.tuning import Rates, Scales, Weights, load_search_space
    from tuner.tuning.scoring.measures import resolve_rates
    from tuner.tuning.search.samplers import WeightedScoreSampler

    space = load_search_space(ROOT / "search_spaces" / "default-grid.yaml")
    embedder = EmbedderConfig().build(EmbeddingCache(args.cache) if args.cache else EmbeddingCache())
    rates = resolve_rates(Rates(), embedder, "sentence-transformers")
    scales = Scales()
    samplers = {
        "chunkwise (TPE on score)": lambda seed: WeightedScoreSampler(seed=seed),
        "Optuna MO-TPE (recall, IoU)": lambda seed: optuna.samplers.TPESampler(seed=seed),
        "random search": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    }
    seeds = range(args.seeds)
    print(f"{args.trials} trials; seeds 0..{args.seeds - 1}; embed throughput {rates.embed_tokens_per_s:.0f} tokens/s")
    tables = {}
    for path in sorted((args.data / "corpora").glob("*.md")):
        corpus = load_corpus(path)
        evalset = load_evaluation_set(args.data / "questions.csv", corpus, ignore_other_corpora=True)
        started = time.perf_counter()
        tables[corpus.name] = exhaustive_table(corpus, evalset, space, embedder, rates, Weights(), scales)
        print(f"{corpus.name}: {len(tables[corpus.name])} grid points evaluated in "
              f"{time.perf_counter() - started:.0f} s")
    ok = True
    for label, values in WEIGHT_SETS.items():
        weights = Weights(**values)
        summary: dict[str, list[float]] = {name: [] for name in samplers}
        print(f"\n{label} {values}\n")
        print(f"| corpus | grid best | sampler | best/grid best at {args.trials // 2} trials | "
              f"at {args.trials} trials (mean of {args.seeds} seeds) | worst seed |")
        print("|---|---|---|---|---|---|")
        for corpus, raw in tables.items():
            table = rescore(raw, weights, scales)
            best_key = max(table, key=lambda key: table[key]["score"])
            grid_best = table[best_key]["score"]
            for name, make in samplers.items():
                curves = [run_sampler(make(seed), space, table, args.trials) for seed in seeds]
                final = statistics.mean(c[-1] for c in curves) / grid_best
                half = statistics.mean(c[args.trials // 2 - 1] for c in curves) / grid_best
                summary[name].append(final)
                print(f"| {corpus} | {grid_best:.4f} {best_key} | {name} | {half:.2%} | {final:.2%} "
                      f"| {min(c[-1] for c in curves) / grid_best:.2%} |")
        means = {name: statistics.mean(v) for name, v in summary.items()}
        print("\nmean over corpora:", ", ".join(f"{name} {m:.2%}" for name, m in means.items()))
        ours = summary["chunkwise (TPE on score)"]
        met = min(ours) >= 0.98 and means["chunkwise (TPE on score)"] > means["random search"]
        wins = sum(a > b for a, b in zip(ours, summary["random search"]))
        print(f"requirement (>= 98% of the grid best on every corpus; beats random search on the mean): "
              f"{'met' if met else 'NOT met'}; better than random on {wins} of {len(ours)} corpora")
        ok = ok and met
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
