"""Trials per minute on chroma-dev, with 1 and 2 worker processes, cold and warm cache.

For each number of jobs, a study per corpus of chroma-dev (``--space``, default
``search_spaces/default.yaml``; MiniLM) runs ``--trials`` trials per corpus with an empty embedding cache (cold); then
the same configurations are enqueued into fresh studies and run again on the filled
cache (warm). Reported: trials per minute of wall time, and the share of trial time
spent inside the embedding model (the rest is chunking, scoring, storage and Optuna).

    python benchmarks/trial_throughput.py [--data ../shared/datasets/chroma-dev] [--trials 8] [--space FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState

from _common import CHROMA_DEV, ROOT, require_chroma_dev


def run(spec, enqueue: dict[str, list[dict]] | None = None) -> tuple[float, dict[str, list]]:
    """Run every corpus study of ``spec``; returns (wall seconds, complete trials per corpus)."""
    from tuner.tuning.runner import _run_workers, _store_resolved_rates
    from tuner.tuning.storage import make_storage
    from tuner.tuning.study import load_study_data, open_study, study_settings

    data = load_study_data(spec)
    storage = make_storage(spec.storage)
    studies = []
    for corpus in data.corpora:
        settings = study_settings(spec, corpus, data.evaluation_sets[corpus.name], data.space,
                                  dict(spec.corpora)[corpus.name])
        study = open_study(storage, spec.study_name(corpus.name), settings)
        _store_resolved_rates(study, spec)
        for params in (enqueue or {}).get(corpus.name, []):
            study.enqueue_trial(params)
        studies.append((corpus.name, study))
    started = time.perf_counter()
    for _, study in studies:
        _run_workers(spec, study.study_name, spec.trials, 0, progress=False)
    wall = time.perf_counter() - started
    return wall, {name: s.get_trials(states=(TrialState.COMPLETE,)) for name, s in studies}


def describe(label: str, wall: float, per_corpus: dict[str, list]) -> tuple[str, float]:
    trials = [t for ts in per_corpus.values() for t in ts]
    busy = sum((t.datetime_complete - t.datetime_start).total_seconds() for t in trials)
    model = sum(t.user_attrs["model_seconds"] for t in trials)
    evaluate = sum(t.user_attrs["eval_seconds"] for t in trials)
    hits = sum(t.user_attrs["cache_hit_rate"] for t in trials) / len(trials)
    rate = len(trials) / wall * 60
    return (f"| {label} | {len(trials)} | {wall:.1f} | {rate:.1f} | {model / busy:.0%} | "
            f"{(busy - evaluate) / busy:.0%} | {hits:.0%} |"), rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--trials", type=int, default=8, help="trials per corpus (3 corpora)")
    parser.add_argument("--space", type=Path, default=ROOT / "search_spaces" / "default.yaml",
                        help="search space (default: search_spaces/default.yaml)")
    args = parser.parse_args()
    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    from tuner.tuning import StudySpec

    corpora = tuple((p.stem, str(p)) for p in sorted((args.data / "corpora").glob("*.md")))
    rows, rates = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in (1, 2):
            cache = f"{tmp}/cache-{jobs}.sqlite3"
            spec = StudySpec(name=f"cold{jobs}", corpora=corpora, queries=str(args.data / "questions.csv"),
                             space=str(args.space), storage=f"sqlite:///{tmp}/b.db",
                             trials=args.trials, jobs=jobs, seed=jobs, cache=cache)
            wall, trials = run(spec)
            row, rates[("cold", jobs)] = describe(f"cold, --jobs {jobs}", wall, trials)
            rows.append(row)
            replay = {corpus: [t.params for t in ts] for corpus, ts in trials.items()}
            warm = spec.with_overrides(name=f"warm{jobs}")
            wall, trials = run(warm, enqueue=replay)
            row, rates[("warm", jobs)] = describe(f"warm, --jobs {jobs}", wall, trials)
            rows.append(row)
    print("| run | trials | wall s | trials/min | time in embedding model | outside evaluate() | cache hits |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n--jobs 2 / --jobs 1 throughput: cold {rates[('cold', 2)] / rates[('cold', 1)]:.2f}x, "
          f"warm {rates[('warm', 2)] / rates[('warm', 1)]:.2f}x; "
          f"warm / cold at --jobs 1: {rates[('warm', 1)] / rates[('cold', 1)]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
