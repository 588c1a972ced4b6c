"""What the search adds, checked by simulation: does the cross-validated interval cover, does the
half-way checkpoint keep winning searches, and does a modelled cost make recall ties significant?
(issue 60)

Every simulated study holds 40-60 configurations, 5 of them baselines (the first is the token
800/400 default), scored on ``n`` questions. Recall per question is 0, 0.5 or 1 with ties as real
recall has them: each question has a difficulty and a shared outcome that most configurations
get; the others draw their own from the difficulty. IoU is small and follows recall. Modelled
latency and cost are equal unless said (the default weights: recall 1, IoU 0.25, latency 0.1,
cost 0.1).

- **null**: every configuration is drawn alike (nothing truly differs). The product's
  :func:`~tuner.tuning.scoring.crossval.search_gain` is called on them: the share of studies
  whose 95% interval over the best baseline excludes 0, and whose verdict says the search beats
  the best baseline, should be at most 5% (6.5% with the Monte Carlo margin).
- **null, modelled costs differ**: the same, with each configuration's modelled latency drawn
  apart (0.05-0.4 s): the questions still score them alike.
- **winner**: one searched configuration is promoted one recall step (0 to 0.5, 0.5 to 1) on
  45% of the questions it does not already answer fully: about 8.5 recall points more than every
  baseline. The share of studies in which the half-way checkpoint
  (:func:`~tuner.tuning.outcome.futility.futile`) would stop the search, beside the share of null
  studies it stops, with the rule chunkwise uses and the others tried.
- **ties**: two configurations whose recall is truly equal, one modelled slower by a constant of
  0.0001-0.001 of score: the share of comparisons (:func:`~tuner.tuning.scoring.comparisons.compare`)
  called significant, at 6, 10 and 17 questions.

    python benchmarks/search/crossval_coverage.py --simulations 2000 --out benchmarks/results/crossval_coverage.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from tuner.tuning.core.objective import Scales, Weights, modelled_utilities
from tuner.tuning.outcome.futility import RULES, futile
from tuner.tuning.scoring.comparisons import Candidate, compare
from tuner.tuning.scoring.crossval import search_gain

WEIGHTS = Weights()
SCALES = Scales()
BASELINES = 5
#: The share of the questions it does not answer fully on which the winner is one recall step better.
WINNER_LIFT = 0.45


def recall_table(rng: np.random.Generator, questions: int, configurations: int) -> np.ndarray:
    """Recall in {0, 0.5, 1}, ``configurations x questions``, every configuration drawn alike."""
    difficulty = rng.beta(2.0, 1.2, size=questions)  # the chance of a full answer

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        u = rng.random(shape)
        return np.where(u < difficulty, 1.0, np.where(u < difficulty + (1 - difficulty) / 2, 0.5, 0.0))

    shared = draw((questions,))
    own = draw((configurations, questions))
    keeps_shared = rng.random((configurations, questions)) < 0.7
    return np.where(keeps_shared, shared, own)


def study(rng: np.random.Generator, questions: int, *, winner: bool = False,
          modelled: bool = False) -> tuple[list[Candidate], list[Candidate], Candidate]:
    """(candidates, baselines, default) of one simulated study."""
    configurations = int(rng.integers(40, 61))
    recall = recall_table(rng, questions, configurations)
    if winner:  # the last configuration, never a baseline: one step up on 25% of what it misses
        row = recall[-1]
        lift = (row < 1.0) & (rng.random(questions) < WINNER_LIFT)
        recall[-1] = np.where(lift, row + 0.5, row)
    iou = recall * rng.beta(1.5, 12.0, size=(configurations, questions))
    latency = rng.uniform(0.05, 0.4, size=configurations) if modelled else np.full(configurations, 0.2)
    candidates = [Candidate(i, recall[i], iou[i], float(latency[i]), 0.15, 100) for i in range(configurations)]
    return candidates, candidates[:BASELINES], candidates[0]


def null_and_winner(simulations: int, sizes: tuple[int, ...]) -> dict:
    """Coverage under the null and the checkpoint's stops, per number of questions."""
    out = {}
    for questions in sizes:
        row = {}
        for kind in ("null", "null, modelled costs differ", "winner"):
            rng = np.random.default_rng(1000 * questions + len(kind))
            excludes = beats = 0
            half_widths, gains = [], []
            stops = dict.fromkeys(RULES, 0)
            for _ in range(simulations):
                candidates, baselines, default = study(rng, questions, winner=kind == "winner",
                                                       modelled="modelled" in kind)
                gain = search_gain(candidates, baselines, default, WEIGHTS, SCALES)
                over = gain.over_best_baseline
                excludes += over.score_low > 0 or over.score_high < 0
                beats += gain.beats
                half_widths.append((over.score_high - over.score_low) / 2)
                gains.append(over.recall)
                for rule in RULES:
                    stops[rule] += futile(gain, rule).futile
            row[kind] = {"interval excludes 0": excludes / simulations, "beats": beats / simulations,
                         "median half-width": float(np.median(half_widths)),
                         "mean out-of-fold recall gain": float(np.mean(gains)),
                         "checkpoint stops": {rule: count / simulations for rule, count in stops.items()}}
            print(f"n={questions} {kind}: {row[kind]}", file=sys.stderr, flush=True)
        out[str(questions)] = row
    return out


def true_gain_of_winner(samples: int = 200_000) -> float:
    """The winner's recall over a baseline, in expectation (a large draw)."""
    rng = np.random.default_rng(7)
    recall = recall_table(rng, samples, 2)
    lift = (recall[1] < 1.0) & (rng.random(samples) < WINNER_LIFT)
    return float(np.mean(np.where(lift, 0.5, 0.0)))


def latency_for(gap: float) -> float:
    """The modelled latency whose latency utility is ``gap / latency weight share`` below 0.2 s's:
    a constant score difference of ``gap`` between two otherwise equal configurations."""
    share = WEIGHTS.latency / WEIGHTS.total
    base = modelled_utilities(0.2, 0.15, SCALES)["latency"]
    target = base - gap / share
    return SCALES.latency_half_s / target - SCALES.latency_half_s


def ties(simulations: int) -> dict:
    """How often a constant modelled difference makes truly equal recall "significant"."""
    out = {}
    for gap in (0.0, 0.0001, 0.001):
        slower = latency_for(gap)
        for questions in (6, 10, 17):
            rng = np.random.default_rng(questions)
            significant = 0
            for _ in range(simulations):
                recall = recall_table(rng, questions, 2)
                iou = recall * rng.beta(1.5, 12.0, size=(2, questions))
                a = Candidate(0, recall[0], iou[0], 0.2, 0.15, 100)
                b = Candidate(1, recall[1], iou[1], slower, 0.15, 100)
                significant += compare(a, b, WEIGHTS, SCALES, samples=200).significant
            out[f"{gap:g} at n={questions}"] = significant / simulations
    wins_and_ties = np.array([1.0, 1.0, 1.0, 0.5, 0.5, 0.5])
    equal_after = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    one_ms = compare(Candidate(0, wins_and_ties, np.zeros(6), 0.200, 0.15, 1),
                     Candidate(1, equal_after, np.zeros(6), 0.201, 0.15, 1), WEIGHTS, SCALES)
    out["3 wins + 3 ties, 1 ms slower: p"] = one_ms.test.p_value
    return out


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=2000)
    parser.add_argument("--sizes", default="20,40,100", help="numbers of questions, comma-separated")
    parser.add_argument("--out", help="write the figures as JSON here")
    return parser


def main() -> int:
    cli = parser()
    args = cli.parse_args()
    if args.simulations < 1:
        cli.error(f"--simulations={args.simulations} is invalid; allowed: an integer >= 1")
    started = time.monotonic()
    result = {"simulations": args.simulations, "winner's true recall gain": true_gain_of_winner(),
              "ties": ties(args.simulations),
              "studies": null_and_winner(args.simulations, tuple(int(s) for s in args.sizes.split(",")))}
    result["seconds"] = round(time.monotonic() - started)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
