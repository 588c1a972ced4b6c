"""Trials per minute of ``tune``, with 1 and 2 workers, cold and warm, for one or two checkouts.

Each measurement is a fresh Python process that runs ``tuner.tuning.tune`` through the
public API only (cold and warm each in their own process, as two ``chunkwise tune`` runs
are), so the same driver measures an older checkout too: pass ``--before DIR``
(e.g. made with ``git worktree add /tmp/before <commit>``) and the two are run interleaved,
``--repeats`` times, and compared by median. Cold: an empty embedding cache. Warm: the same
study spec (same seed) again into a new study, on the cache the cold run filled.

    python benchmarks/speed/trial_throughput.py [--before DIR] [--data handbook|chroma-dev] [--trials 12]
        [--space quick] [--repeats 3]

The bundled handbook (small documents, fast trials) makes per-trial overhead (storage,
claims, process start-up) most visible; chroma-dev shows realistic trial times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, ROOT, require_chroma_dev

# Runs inside the measured checkout (PYTHONPATH), one phase per process, as a user's `chunkwise
# tune` is one process per run (a pool kept alive between two run_study_spec() calls in one process, as
# joblib's reusable loky executor did, would make the warm run skip starting its workers);
# prints {"wall": s, "trials": n}.
DRIVER = r"""
import json, sys, time, warnings
import optuna
warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)
try:
    from tuner.tuning import StudySpec, run_study_spec
except ImportError:  # a checkout from before the rename
    from tuner.tuning import StudySpec, tune as run_study_spec
args = json.loads(sys.argv[1])
phase = args["phase"]
spec = StudySpec(name=phase, corpora=tuple(map(tuple, args["corpora"])), queries=args["queries"],
                 space=args["space"], storage=f"sqlite:///{args['tmp']}/{phase}.db", trials=args["trials"],
                 jobs=args["jobs"], seed=1, cache=args["cache"])
started = time.perf_counter()
outcomes = run_study_spec(spec, progress=False, echo=lambda _: None)
print(json.dumps({"wall": time.perf_counter() - started, "trials": sum(o.complete for o in outcomes)}))
"""


def measure(code: Path, args: argparse.Namespace, corpora, queries: str, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        payload = {"corpora": corpora, "queries": queries, "space": args.space, "trials": args.trials,
                   "jobs": jobs, "tmp": tmp, "cache": f"{tmp}/cache.sqlite3"}
        env = {**os.environ, "PYTHONPATH": str(code), "CHUNKWISE_CACHE_DIR": f"{tmp}/cachedir"}
        result = {}
        for phase in ("cold", "warm"):  # warm: a new process on the cache the cold one filled
            out = subprocess.run([sys.executable, "-c", DRIVER, json.dumps({**payload, "phase": phase})], env=env,
                                 check=True, capture_output=True, text=True).stdout
            measured = json.loads(out.strip().splitlines()[-1])
            result[phase], result["trials"] = measured["wall"], measured["trials"]
        return result


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="checkout of the code to compare with (default: none)")
    parser.add_argument("--data", default="handbook", help="handbook (bundled) or chroma-dev")
    parser.add_argument("--trials", type=int, default=12, help="trials per corpus")
    parser.add_argument("--space", default=str(ROOT / "search_spaces" / "quick.yaml"))
    parser.add_argument("--repeats", type=int, default=3)
    return parser


def main() -> int:
    args = parser().parse_args()
    if args.data == "chroma-dev":
        require_chroma_dev(CHROMA_DEV)
        corpora = [(p.stem, str(p)) for p in sorted((CHROMA_DEV / "corpora").glob("*.md"))]
        queries = str(CHROMA_DEV / "questions.csv")
    else:
        corpora = [("handbook", str(ROOT / "examples" / "handbook"))]
        queries = str(ROOT / "examples" / "handbook-queries.jsonl")
    versions = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    rates: dict[tuple, list[float]] = {}
    for repeat in range(args.repeats):
        order = list(versions.items())
        if repeat % 2:
            order.reverse()  # alternate which version runs first
        for label, code in order:
            for jobs in (1, 2):
                result = measure(code, args, corpora, queries, jobs)
                for phase in ("cold", "warm"):
                    rate = result["trials"] / result[phase] * 60
                    rates.setdefault((label, jobs, phase), []).append(rate)
                    print(f"repeat {repeat + 1}: {label} --jobs {jobs} {phase}: {rate:.1f} trials/min",
                          file=sys.stderr)
    print(f"{args.data}, {args.trials} trials per corpus, space {Path(args.space).name}, "
          f"median of {args.repeats} interleaved repeats (trials/min)\n")
    header = "| run | " + " | ".join(versions) + (" | after / before |" if args.before else "")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for jobs in (1, 2):
        for phase in ("cold", "warm"):
            medians = {label: statistics.median(rates[(label, jobs, phase)]) for label in versions}
            cells = " | ".join(f"{medians[label]:.1f}" for label in versions)
            ratio = f" | {medians['after'] / medians['before']:.2f}x" if args.before else ""
            print(f"| {phase}, --jobs {jobs} | {cells}{ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
