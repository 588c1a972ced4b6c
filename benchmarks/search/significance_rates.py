"""How often "significant" is said when nothing differs: the sign-flip test against the paired
percentile bootstrap it replaced (issue 50).

Per number of questions, ``--simulations`` pairs of configurations that do not differ (per question
a difficulty; each configuration's recall drawn alike from it: 1 often, 0 sometimes, a skewed value
between, so many questions tie; IoU small and skewed; equal modelled latency and cost), compared by
:func:`tuner.tuning.scoring.comparisons.compare`: the share called significantly better or worse
by the sign-flip test (what chunkwise says) and by the bootstrap interval excluding 0 (what it
said before), under recall-only and under the default weights. Then the tie gate over several
equal configurations: the share of studies in which one is left out of the tie set, with the
level shared among every pair (chunkwise) and among the comparisons with the best only (Holm).

    python benchmarks/search/significance_rates.py [--simulations 3000]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tuner.tuning.core.objective import Scales, Weights
from tuner.tuning.scoring.comparisons import CONFIDENCE, Candidate, compare, recommend
from tuner.tuning.scoring.significance import sign_flip_tests

RECALL_ONLY = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)


def exchangeable(rng: np.random.Generator, questions: int, configurations: int) -> list[Candidate]:
    """Configurations that do not differ (the same draw as ``tests/tuning/test_significance.py``)."""
    difficulty = rng.beta(0.6, 0.4, size=questions)
    out = []
    for number in range(configurations):
        u = rng.random(questions)
        recall = np.where(u < 0.8 * difficulty, 1.0, np.where(u > 0.9, 0.0, rng.beta(2, 5, size=questions)))
        out.append(Candidate(number, recall, recall * rng.beta(1, 12, size=questions), 0.2, 0.15, 100))
    return out


def holm_only_tie_gate(candidates: list[Candidate]) -> bool:
    """The tie gate corrected for its own comparisons only (Holm): True when it leaves one out."""
    observed = [c.score(RECALL_ONLY, Scales()) for c in candidates]
    best = int(np.argmax(observed))
    others = [i for i in range(len(candidates)) if i != best]
    differences = np.array([candidates[best].differences(candidates[i], RECALL_ONLY, Scales()) for i in others]).T
    p = sorted(t.p_value for t in sign_flip_tests(differences))
    return p[0] <= (1 - CONFIDENCE) / len(p)  # Holm rejects something iff its first step does


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=3000)
    return parser


def main() -> int:
    args = parser().parse_args()
    print("| weights | questions | sign-flip test: significant | paired bootstrap: significant |")
    print("|---|---|---|---|")
    for name, weights in (("recall only", RECALL_ONLY), ("default", Weights())):
        for questions in (6, 8, 10, 17, 30, 100):
            rng = np.random.default_rng(questions)
            test = bootstrap = 0
            for _ in range(args.simulations):
                a, b = exchangeable(rng, questions, 2)
                comparison = compare(a, b, weights, Scales())
                test += comparison.better or comparison.worse
                bootstrap += comparison.low > 1e-6 or comparison.high < -1e-6
            print(f"| {name} | {questions} | {test / args.simulations:.1%} | {bootstrap / args.simulations:.1%} |")
    print("\n| questions | equal configurations | studies | left out, level shared among every pair | "
          "left out, Holm over the comparisons with the best |")
    print("|---|---|---|---|---|")
    for questions, configurations, studies in ((17, 5, 600), (30, 5, 600), (30, 30, 300)):
        rng = np.random.default_rng(configurations)
        shared = holm = 0
        for _ in range(studies):
            candidates = exchangeable(rng, questions, configurations)
            shared += len(recommend(candidates, RECALL_ONLY, Scales(), samples=20).tied) < configurations
            holm += holm_only_tie_gate(candidates)
        print(f"| {questions} | {configurations} | {studies} | {shared / studies:.1%} | {holm / studies:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
