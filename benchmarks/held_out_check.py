"""The winner's curse on chroma-dev: search vs held-out score of the winner, the tie gate, and
the cross-validated gain of tuning over the token 800/400 default.

Runs one study per chroma-dev corpus (``--trials`` trials, validation 25%, MiniLM), then per
corpus reports: the best trial's score on the search questions and on the held-out ones (the
optimism gap), the recommendation of the tie gate, and the gain over token 800/400 k=5
estimated by 5-fold cross-validation from the trials' stored per-question scores, beside the
naive gain (choosing and scoring on the same questions).

    python benchmarks/held_out_check.py [--data ../shared/datasets/chroma-dev] [--trials 60]
        [--space search_spaces/default-grid.yaml] [--storage sqlite:///held-out.db]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import optuna

from _common import CHROMA_DEV, ROOT, require_chroma_dev


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--space", default=str(ROOT / "search_spaces" / "default-grid.yaml"))
    parser.add_argument("--storage", default="sqlite:///held-out.db", help="kept, so a re-run resumes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")

    from tuner.chunkers.config import ChunkerConfig
    from tuner.evaluation.config import EvaluationConfig
    from tuner.evaluation.evaluator import evaluate
    from tuner.retrieval.config import RetrievalConfig
    from tuner.tuning import StudySpec, run_study_spec
    from tuner.tuning.scoring.comparisons import Candidate, candidate, cross_validated_gain
    from tuner.tuning.scoring.measures import trial_attributes
    from tuner.tuning.study.opening import load_study_inputs
    from tuner.tuning.study.records import TrialRecord, evaluated
    from tuner.tuning.study.settings import StudySettings

    corpora = tuple((p.stem, str(p)) for p in sorted((args.data / "corpora").glob("*.md")))
    spec = StudySpec(name="heldout", corpora=corpora, queries=str(args.data / "questions.csv"), space=args.space,
                     storage=args.storage, trials=args.trials, seed=args.seed, validation=0.25)
    outcomes = run_study_spec(spec, progress=True, echo=lambda line: print(line, file=sys.stderr))
    print(f"chroma-dev, {args.trials} trials per corpus, space {Path(args.space).name}, validation 25%, "
          "MiniLM, weights 1/0.5/0.1/0.1\n")
    print("| corpus | questions (search + held-out) | best trial | search score | held-out score | optimism gap | "
          "tied with best | recommended | CV gain over token 800/400 (score; recall pts) | naive gain |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for outcome in outcomes:
        study = optuna.load_study(study_name=outcome.study, storage=spec.storage)
        settings = StudySettings.of(study)
        corpus, evalset = load_study_inputs(settings, study.study_name)
        best = outcome.best
        weights, scales = settings.weights, settings.scales
        first = EvaluationConfig.from_dict(best.config)
        base_config = EvaluationConfig(ChunkerConfig("token", {"size": 800, "overlap": 400}).resolved(),
                                       first.embedder, RetrievalConfig(k=5), first.unit, first.copies)
        result = evaluate(corpus, evalset, base_config)
        rates = settings.rates_for(first.embedder)
        search = settings.search_mask(len(evalset))
        base = TrialRecord.from_attrs(-1, trial_attributes(result, rates, weights, scales, search=search))
        per_query = result.scores.at(5)
        default = Candidate(-1, per_query["recall"], per_query["iou"], base.latency_ms / 1000,
                            base.cost_usd_per_1k_queries, int(base.metric("chunks")))
        candidates = [c for c in (candidate(r) for r in evaluated(study)) if c is not None]
        gain = cross_validated_gain(candidates, default, weights, scales, seed=args.seed)
        verdict = outcome.recommendation.recommendation
        held_out = int((~search).sum())
        print(f"| {outcome.corpus} | {search.sum()} + {held_out} | {best.label()} | {best.score:.4f} | "
              f"{best.validation_score:.4f} | {best.score - best.validation_score:+.4f} | {len(verdict.tied)} | "
              f"{outcome.recommended.label()} | {gain.gain:+.4f}; {gain.recall_gain * 100:+.1f} | "
              f"{gain.naive_gain:+.4f} |")
        print(f"|   | questions to separate the top two: {verdict.questions_to_separate} | | | | | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
