"""The retriever around the chunks: dense, BM25 and hybrid retrieval, with and without context
headers, on chroma-dev and the bundled handbook.

Three parts (``--part fixed|studies|parity``, all by default):

* ``fixed``: a few chunkings, each scored with every retrieval method and context (pooled
  retrieval, MiniLM, k=5, cl100k tokens), and the warm time of one evaluation per method;
* ``studies``: per corpus, studies with the same trial budget over four spaces sharing the
  chunkers, sizes, overlaps and ``k`` of ``search_spaces/default-grid.yaml``: dense only;
  dense with context; every method (dense, bm25, hybrid rrf/weighted); every method with
  context. Reported: the best weighted score (search questions), its recall and IoU, its
  held-out score, and the median time of a trial by method (a BM25 trial embeds nothing);
* ``parity``: a collection built by ``build_collection`` from chroma-dev's corpora, queried
  with every question, against the evaluation's top 5 (real MiniLM vectors, HNSW).

    python benchmarks/retrieval/retrieval_methods.py [--part fixed] [--trials 30] [--seed 0]
        [--data ../shared/datasets/chroma-dev] [--storage-dir retrieval-studies]
        [--spaces dense "all methods"] [--sets chroma-dev]
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

import optuna
import yaml

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, ROOT, require_chroma_dev

HANDBOOK = (("handbook", str(ROOT / "examples" / "handbook")),)
HANDBOOK_QUERIES = str(ROOT / "examples" / "handbook-queries.jsonl")
METHODS = {"method": ["dense", "bm25", "hybrid"], "fusion": ["rrf", "weighted"],
           "alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1}, "rrf_k": [10, 30, 60, 100]}
CONTEXT = {"context": ["none", "title", "headings"]}
SPACES = {"dense": {}, "dense + context": CONTEXT, "all methods": METHODS, "all methods + context": {**METHODS,
                                                                                                  **CONTEXT}}
VARIANTS = {
    "dense": {},
    "bm25": {"method": "bm25"},
    "hybrid rrf(60)": {"method": "hybrid"},
    "hybrid weighted(0.5)": {"method": "hybrid", "fusion": "weighted"},
    "dense + title": {"context": "title"},
    "dense + headings": {"context": "headings"},
    "bm25 + headings": {"method": "bm25", "context": "headings"},
    "hybrid rrf(60) + headings": {"method": "hybrid", "context": "headings"},
}
CHUNKINGS = [("recursive", {"size": 250, "overlap": 0}), ("token", {"size": 250, "overlap": 0}),
             ("recursive", {"size": 100, "overlap": 0})]


def chroma_dev_data(path: Path) -> tuple[tuple[tuple[str, str], ...], str]:
    return tuple((p.stem, str(p)) for p in sorted((path / "corpora").glob("*.md"))), str(path / "questions.csv")


def fixed(data: dict, out) -> None:
    import tuner

    print("## Fixed chunkings, every retrieval method (pooled, MiniLM, k=5, cl100k tokens)\n", file=out)
    for name, (corpora, queries) in data.items():
        loaded = [tuner.load_corpus(path, corpus) for corpus, path in corpora]
        evalset = tuner.load_evaluation_set(queries, loaded)
        print(f"**{name}** ({len(evalset)} questions)\n", file=out)
        print("| chunking | retrieval | recall | IoU | precision-Ω | warm evaluation s |", file=out)
        print("|---|---|---|---|---|---|", file=out)
        for chunker, params in CHUNKINGS:
            for label, retrieval in VARIANTS.items():
                kwargs = dict(chunker=chunker, k=5, **params, **retrieval)
                tuner.evaluate(loaded, evalset, **kwargs)  # fills the cache: the timing below is warm
                started = time.perf_counter()
                result = tuner.evaluate(loaded, evalset, **kwargs)
                seconds = time.perf_counter() - started
                overall = result.metrics["overall"]
                print(f"| {chunker} {params['size']}/{params['overlap']} | {label} | "
                      f"{overall['recall']['mean']:.1%} | {overall['iou']['mean']:.2%} | "
                      f"{overall['precision_omega']['mean']:.1%} | {seconds:.2f} |", file=out, flush=True)
        print(file=out)


def studies(data: dict, args: argparse.Namespace, out) -> None:
    from tuner.tuning import StudySpec, run_study_spec
    from tuner.tuning.core.records import records
    from tuner.tuning.study.storage import make_storage

    grid = yaml.safe_load((ROOT / "search_spaces" / "default-grid.yaml").read_text(encoding="utf-8"))
    folder = Path(args.storage_dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    print(f"## Studies: {args.trials} trials per corpus and space, seed {args.seed}, default weights, "
          "validation 25%\n", file=out)
    print("| data | corpus | space | best score (search) | recall | IoU | held-out score | best configuration |",
          file=out)
    print("|---|---|---|---|---|---|---|---|", file=out)
    means: dict[tuple[str, str], list[float]] = {}
    seconds: dict[str, list[float]] = {}
    for name, (corpora, queries) in data.items():
        for label, retrieval in SPACES.items():
            if label not in args.spaces:
                continue
            space = folder / f"{label.replace(' + ', '-').replace(' ', '-')}.yaml"
            content = {**grid, **({"retrieval": retrieval} if retrieval else {})}
            space.write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
            run = f"{name}-{space.stem}-s{args.seed}"
            spec = StudySpec(name=run, corpora=corpora, queries=queries, space=str(space),
                             storage=f"sqlite:///{folder / run}.db", trials=args.trials, seed=args.seed)
            outcomes = run_study_spec(spec, progress=True, echo=lambda line: print(line, file=sys.stderr))
            for outcome in outcomes:
                best = outcome.best
                means.setdefault((name, label), []).append(best.score)
                print(f"| {name} | {outcome.corpus} | {label} | {best.score:.4f} | {best.recall:.1%} | "
                      f"{best.iou:.2%} | {best.validation_score:.4f} | {best.describe()} |", file=out, flush=True)
                study = optuna.load_study(study_name=outcome.study,
                                          storage=make_storage(spec.storage, heartbeat_interval=None))
                for record in records(study):
                    if record.evaluated:
                        method = str(record.attrs.get("retrieval", "dense")).split(" ")[0]
                        warm = record.metrics.get("cache_hit_rate", 0) == 1.0 or method == "bm25"
                        seconds.setdefault(f"{method} ({'warm' if warm else 'cold'})", []).append(
                            record.metrics["eval_seconds"])
    print("\nMean best score over corpora:\n", file=out)
    print("| data | " + " | ".join(args.spaces) + " |", file=out)
    print("|---" * (len(args.spaces) + 1) + "|", file=out)
    for name in data:
        print(f"| {name} | " + " | ".join(f"{statistics.mean(means[(name, s)]):.4f}" for s in args.spaces) + " |",
              file=out)
    print("\nTime of one trial's evaluation (chunk, embed or tokenise, index, retrieve, score), median over the "
          "trials above:\n", file=out)
    print("| trials | n | median s | max s |", file=out)
    print("|---|---|---|---|", file=out)
    for key in sorted(seconds):
        values = seconds[key]
        print(f"| {key} | {len(values)} | {statistics.median(values):.2f} | {max(values):.2f} |", file=out)
    print(file=out)


def parity(data_path: Path, out) -> None:
    import tuner
    from tuner.deploy.production import build_collection, chunk_id

    corpora, queries = chroma_dev_data(data_path)
    loaded = [tuner.load_corpus(path, corpus) for corpus, path in corpora]
    evalset = tuner.load_evaluation_set(queries, loaded)
    print("## Production parity on chroma-dev (MiniLM, chromadb HNSW, 276 questions)\n", file=out)
    print("| configuration | questions whose production top 5 equals the evaluated top 5 |", file=out)
    print("|---|---|", file=out)
    with tempfile.TemporaryDirectory() as tmp:
        for label, retrieval in [("recursive 250/0, dense", {}), ("recursive 250/0, bm25", {"method": "bm25"}),
                                 ("recursive 250/0, hybrid rrf(60) + title", {"method": "hybrid", "context": "title"}),
                                 ("token 100/0, hybrid weighted(0.3)",
                                  {"method": "hybrid", "fusion": "weighted", "alpha": 0.3})]:
            chunker = ({"name": "token", "params": {"size": 100, "overlap": 0}} if label.startswith("token")
                       else {"name": "recursive", "params": {"size": 250, "overlap": 0}})
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps({"chunker": chunker, "retrieval": {"k": 5, **retrieval}}), encoding="utf-8")
            config = tuner.load_config(path)
            result = tuner.evaluate(loaded, evalset, config.config)
            ids = [chunk_id(corpus, c) for c, corpus in zip(result.chunks, result.chunk_corpora)]
            collection = build_collection(config, [p for _, p in corpora], Path(tmp) / "db", "chromadev", replace=True)
            same = 0
            for query, row in zip(evalset, result.ranking):
                got = [f"{h['corpus']}/{h['document']}:{h['start_index']}-{h['end_index']}"
                       for h in collection.query(query.question)]
                same += got == [ids[r] for r in row if r >= 0]
            print(f"| {label} ({len(result.chunks)} chunks) | {same} / {len(evalset)} |", file=out, flush=True)
    print(file=out)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("fixed", "studies", "parity", "all"), default="all")
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage-dir", default="retrieval-studies", help="kept, so a re-run resumes")
    parser.add_argument("--spaces", nargs="+", choices=list(SPACES), default=list(SPACES), metavar="SPACE",
                        help=f"studies' spaces (default: all of {', '.join(SPACES)})")
    parser.add_argument("--sets", nargs="+", choices=("chroma-dev", "handbook"), default=["chroma-dev", "handbook"],
                        help="data sets of the fixed and studies parts (default: both)")
    return parser


def main() -> int:
    args = parser().parse_args()
    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    data = {"chroma-dev": chroma_dev_data(args.data), "handbook": (HANDBOOK, HANDBOOK_QUERIES)}
    data = {name: value for name, value in data.items() if name in args.sets}
    if args.part in ("fixed", "all"):
        fixed(data, sys.stdout)
    if args.part in ("studies", "all"):
        studies(data, args, sys.stdout)
    if args.part in ("parity", "all"):
        parity(args.data, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
