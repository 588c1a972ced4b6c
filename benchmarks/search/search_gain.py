"""What the search adds over the baselines, out of sample, per corpus (issue 50).

Runs one study per corpus (the default space, ``fidelity: auto``, validation 25%, MiniLM, a time
budget per corpus), then prints, per corpus, the study's recommendation and its summary's
cross-validated gain (:func:`tuner.tuning.scoring.crossval.search_gain`: 5 folds x 5 repeats over
all questions; the study's choice on four folds scored on the fifth) over the best baseline and
over the token 800/400 default, with 95% intervals; how often the search's own choice was a
baseline; and how many questions would tell the gain over the best baseline from none.

Corpora: chroma-dev's three (``--data``), and with ``--realdocs ROOT`` / ``--valgrind ROOT`` /
``--rustbook ROOT`` the realdocs, Valgrind and Rust book benchmarks (``benchmarks/corpora/realdocs.py
fetch`` + ``build``; ``benchmarks/corpora/valgrind.py build``; ``benchmarks/corpora/rustbook.py
build``). The table is printed as markdown and written as JSON (``--out``).

    python benchmarks/search/search_gain.py --budget 6m --realdocs ~/.cache/chunkwise-bench/realdocs \\
        --valgrind ~/.cache/chunkwise-bench/valgrind --out benchmarks/results/search_gain.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path

import optuna

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, chroma_dev_questions, require_chroma_dev


def parse_budget(text: str) -> float:
    """``6m`` -> 360 seconds (``s``, ``m`` or ``h``; a bare number is seconds)."""
    units = {"s": 1, "m": 60, "h": 3600}
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


def questions_for(args: argparse.Namespace, corpora: tuple[tuple[str, str], ...], folder: Path) -> str:
    """chroma-dev's questions, only those of ``corpora`` when ``--corpora`` chose some."""
    if not args.corpora:
        return str(args.data / "questions.csv")
    return str(chroma_dev_questions(args.data, {name for name, _ in corpora}, folder / "questions.csv"))


def specs(args: argparse.Namespace, storage: str, folder: Path) -> list:
    from tuner.tuning import StudySpec

    budget = parse_budget(args.budget)
    out = []
    corpora = tuple((p.stem, str(p)) for p in sorted((args.data / "corpora").glob("*.md"))
                    if not args.corpora or p.stem in args.corpora)
    if corpora:
        # A run's budget is shared among its corpora: each of the three gets ``budget``.
        out.append(StudySpec(name="gain", corpora=corpora, queries=questions_for(args, corpora, folder),
                             space=args.space, storage=storage, timeout=budget * len(corpora), seed=args.seed,
                             validation=0.25, full_budget=not args.checkpoint))
    for root, name in ((args.realdocs, "realdocs"), (args.valgrind, "valgrind"), (args.rustbook, "rustbook")):
        if root and (not args.corpora or name in args.corpora):
            out.append(StudySpec(name="gain", corpora=((name, str(root / "raw")),),
                                 queries=str(root / "questions.jsonl"), space=args.space, storage=storage,
                                 timeout=budget, seed=args.seed, validation=0.25, full_budget=not args.checkpoint))
    return out


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--realdocs", type=Path, metavar="ROOT")
    parser.add_argument("--valgrind", type=Path, metavar="ROOT")
    parser.add_argument("--rustbook", type=Path, metavar="ROOT")
    parser.add_argument("--corpora", nargs="*", help="only these corpora")
    parser.add_argument("--budget", default="6m", help="time budget per corpus (default 6m)")
    parser.add_argument("--space", default="default", help="search space (default: the default space)")
    parser.add_argument("--storage", help="study storage (default: a temporary SQLite file)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the table as JSON")
    parser.add_argument("--checkpoint", action="store_true",
                        help="let each run judge the search half-way and stop where it is futile, as a run does by "
                             "default (without it, each study spends its whole budget: what the search adds at the "
                             "full budget)")
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")

    from tuner.tuning import run_study_spec

    rows = []
    with tempfile.TemporaryDirectory(prefix="search-gain-") as tmp:
        storage = args.storage or f"sqlite:///{tmp}/gain.db"
        for spec in specs(args, storage, Path(tmp)):
            for outcome in run_study_spec(spec, progress=True, echo=lambda line: print(line, file=sys.stderr)):
                verdict = outcome.recommendation
                gain = None if verdict is None else verdict.gain
                study = optuna.load_study(study_name=outcome.study, storage=storage)
                rows.append({"corpus": outcome.corpus, "trials": len(study.trials), "stopped_early": outcome.futile,
                             "recommended": None if verdict is None else verdict.recommended.label(),
                             "recommended_is_baseline": None if verdict is None else verdict.recommended.baseline,
                             "gain": None if gain is None else asdict(gain)})
    print(f"\nWhat the search adds, cross-validated (5 folds x 5 repeats over all questions), budget {args.budget} "
          f"per corpus, space {args.space}, seed {args.seed}\n")
    print("| corpus | questions | trials | recommended | search's choice a baseline | over the best baseline: "
          "score; recall points [95%] | over token 800/400: score; recall points [95%] | questions to tell "
          "the first score gain |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        gain = row["gain"]
        if gain is None:
            print(f"| {row['corpus']} | | {row['trials']} | {row['recommended']} | (no cross-validated gain) | | | |")
            continue
        best, default = gain["over_best_baseline"], gain["over_default"]
        print(f"| {row['corpus']} | {gain['questions']} | {row['trials']} | {row['recommended']}"
              f"{' (a baseline)' if row['recommended_is_baseline'] else ''} | "
              f"{gain['picked_baseline']} of {gain['folds'] * gain['repeats']} | {_cell(best)} | "
              f"{_cell(default) if default else 'n/a'} | {best['questions_to_tell'] or '-'} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"budget": args.budget, "space": args.space, "seed": args.seed, "rows": rows},
                                       indent=1) + "\n", encoding="utf-8")
    return 0


def _cell(gain: dict) -> str:
    return (f"{gain['score']:+.3f} [{gain['score_low']:+.3f}, {gain['score_high']:+.3f}]; "
            f"{gain['recall'] * 100:+.1f} [{gain['recall_low'] * 100:+.1f}, {gain['recall_high'] * 100:+.1f}]")


if __name__ == "__main__":
    sys.exit(main())
