"""Proxy agreement (issue 28): do cheap proxies rank chunking configurations as the full model
does, and what does one more configuration cost with each?

**Paths**, each scoring every configuration of the grid on each chroma-dev corpus on its own
(one study per corpus), dense retrieval, k = 5, recall in cl100k tokens:

* *full*: all-MiniLM-L6-v2 (fp32) embeds each configuration's chunks, cold (no cache): what a
  trial pays today;
* *late*: late chunking (``tuner/embedding/late.py``): MiniLM reads each document once, in
  overlapping windows (*the proxy pass*), and a configuration's chunk vectors are pooled from
  those token embeddings, each from what the model reads of its chunk (its first 254 word pieces),
  as a study's proxy rung scores it (``evaluate_rungs`` behind ``fidelity: {proxy: late}``);
  questions are embedded once (cached), as a study does;
* *late-bf16*: the late path with the pass at bf16 (``torch.autocast``), measured only where the
  CPU computes bf16 natively (the pass is the proxy's whole model cost; its questions are
  embedded at bf16 too, as the whole proxy runs at one precision);
* *static*: a model2vec static model distilled from the same MiniLM (``tuner/embedding/static.py``;
  *the proxy pass* is the distillation, once per model, kept in the cache folder), chunks and
  questions embedded by it.

``--realdocs ROOT`` adds the realdocs benchmark (``benchmarks/corpora/realdocs.py fetch``/``build``: its
60 documents under ``ROOT/raw`` and 68 questions) as a fourth corpus.
``--valgrind ROOT`` adds Valgrind's manual (``benchmarks/corpora/valgrind.py build``: 11 pages under
``ROOT/raw`` and 26 hand-written questions), a corpus nobody tuned chunkwise on, as a fifth.

**Reported** per corpus and proxy: Spearman's rank correlation of the proxy's mean recall with
the full path's over the grid, whether the full path's best configuration is in the proxy's top
10% (at least one configuration), the mean and largest recall difference in points; then the
proxy pass's seconds and the median seconds ``tuner.evaluate`` takes per configuration on each
path (chunking, embedding or pooling, retrieval and scoring; measured on this machine, whatever
else runs on it).

**The decision bar** (``--judge``): per corpus and proxy, with per-question recall as the score,
``benchmarks/decision_bar.py``'s :func:`decision_bar` (the proxy *instead of* the full model: is
its recommendation in the full path's tie set and the other way round?),
:func:`judge_fidelity` with the proxy as a first rung (a study that screens every trial with the
proxy and climbs to full fidelity by successive halving; the rung's work is the proxy's
per-configuration time over the full path's), and :func:`judge_confirmed` for the product's own
design, ``fidelity: {proxy: ..., confirm: N}`` (every trial stops at the proxy; the proxy's best N
are evaluated at full fidelity and only they are recommended from), for N = 1 and 3.

``--grid quick`` (or ``--quick``) scores 6 configurations (minutes on two cores, the static
model's first distillation included); the default grid, ``full``, is 59 (token and recursive,
sizes 100-1000 by 100, overlap 0 and a quarter; sentence windows of 1-10 sentences, overlap 0
and 1); ``half`` is every other size and window of it, 29 (for a larger corpus such as realdocs).

    python benchmarks/scale/proxy_agreement.py --quick [--data DIR]
    python benchmarks/scale/proxy_agreement.py [--out FILE] [--judge] [--realdocs ROOT] [--valgrind ROOT] \\
        [--corpora NAME ...]
    python benchmarks/scale/proxy_agreement.py --tables FILE [--judge]   # report again from --out
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, chroma_dev_sets, chunking_label, require_chroma_dev

#: Every proxy path, in the tables' order (``late-bf16`` only where the CPU computes bf16 natively).
PROXIES = ("late", "late-bf16", "static")
#: Configurations each simulated ``confirm`` study evaluates at full fidelity.
CONFIRMS = (1, 3)
#: The adaptive rule's (least, most) confirmations (:func:`decision_bar.judge_adaptive`).
ADAPTIVE = (1, 10)
K = 5
#: Share of the grid a proxy's top must hold the full path's best in.
TOP_SHARE = 0.1
QUICK = (("token", {"size": 128, "overlap": 0}), ("token", {"size": 256, "overlap": 64}),
         ("recursive", {"size": 200, "overlap": 0}), ("recursive", {"size": 400, "overlap": 100}),
         ("sentence", {"sentences": 4, "overlap": 0}), ("sentence", {"sentences": 8, "overlap": 2}))


GRIDS = ("quick", "half", "full")


def grid(name: str) -> list[tuple[str, dict[str, int]]]:
    """The configurations of grid ``name`` (:data:`GRIDS`; see the module docstring)."""
    if name == "quick":
        return list(QUICK)
    step = {"full": 1, "half": 2}[name]
    out: list[tuple[str, dict[str, int]]] = []
    for chunker in ("token", "recursive"):
        for size in range(100, 1001, 100 * step):
            out += [(chunker, {"size": size, "overlap": overlap}) for overlap in (0, size // 4)]
    for sentences in range(1, 11, step):
        out += [("sentence", {"sentences": sentences, "overlap": overlap}) for overlap in (0, 1) if overlap < sentences]
    return out


def load_corpora(args: argparse.Namespace) -> list[tuple[Any, Any]]:
    """(corpus, evaluation set) of each chroma-dev corpus asked for, then realdocs if given."""
    import tuner

    out = chroma_dev_sets(args.data, args.corpora)
    for root, name in ((args.realdocs, "realdocs"), (args.valgrind, "valgrind")):
        if root and (not args.corpora or name in args.corpora):
            corpus = tuner.load_corpus(root / "raw", name=name)
            out.append((corpus, tuner.load_evaluation_set(root / "questions.jsonl", corpus)))
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """``{"corpora": {corpus: {path: {config: {"recall", "per_question", "seconds"}}}}, "pass": {...}}``."""
    import tuner
    from tuner.chunkers.config import ChunkerConfig
    from tuner.embedding import EmbedderConfig, EmbeddingCache, SentenceTransformerEmbedder, StaticEmbedder
    from tuner.embedding.late import LateChunkingEmbedder, TokenEmbeddingCache
    from tuner.embedding.sentence_transformers import cpu_supports_bf16
    from tuner.evaluation.config import EvaluationConfig
    from tuner.evaluation.evaluator import evaluate_rungs
    from tuner.evaluation.fidelity import Fidelity
    from tuner.retrieval.config import RetrievalConfig
    from tuner.text.tokens import count_tokens

    work = Path(tempfile.mkdtemp(prefix="chunkwise-proxy-"))
    full = SentenceTransformerEmbedder(precision="fp32")
    full.embed_uncached(["warm up"])  # the model loads before anything is timed
    questions = EmbeddingCache(work / "questions.sqlite3")
    embedders: dict[str, tuple[Any, Any]] = {"full": (full, EmbedderConfig(precision="fp32"))}
    lates = {"late": "fp32", "late-bf16": "bf16"} if cpu_supports_bf16() else {"late": "fp32"}
    for path, precision in lates.items():
        # The whole proxy runs at its precision: the pass over the documents and the questions.
        base = SentenceTransformerEmbedder(precision=precision, cache=questions)
        late = LateChunkingEmbedder(base, tokens=TokenEmbeddingCache(work / f"tokens-{precision}"))
        late.document_tokens("warm up")
        embedders[path] = (late, EmbedderConfig(precision=precision))  # scored as the proxy rung (below)
    static = StaticEmbedder(folder=args.static_folder) if args.static_folder else StaticEmbedder()
    passes: dict[str, Any] = {}
    started = time.perf_counter()
    static.embed_uncached(["warm up"])  # distils the model unless it was kept
    passes["static"] = {"seconds": time.perf_counter() - started, "distilled": static.path.name}
    embedders["static"] = (static, EmbedderConfig(precision="fp32"))
    out: dict[str, Any] = {"corpora": {}, "pass": passes, "grid": args.grid}
    for corpus, evalset in load_corpora(args):
        for path in lates:
            late = embedders[path][0]
            started = time.perf_counter()
            for document in corpus:
                late.document_tokens(document.text)
            passes.setdefault(path, {})[corpus.name] = {"seconds": time.perf_counter() - started,
                                                        "tokens": sum(count_tokens(d.text) for d in corpus)}
        table = out["corpora"][corpus.name] = {path: {} for path in embedders}
        for name, params in grid(args.grid):
            for path, (model, embedder) in embedders.items():
                config = EvaluationConfig(ChunkerConfig(name, params).resolved(), embedder, RetrievalConfig(k=K))
                started = time.perf_counter()
                if path in lates:  # the proxy rung of a study, as the product scores it
                    result = next(evaluate_rungs(corpus, evalset, config, Fidelity(proxy="late"), embedder=model.base,
                                                 proxy=model))
                else:
                    result = tuner.evaluate(corpus, evalset, config, embedder=model, cache=None)
                seconds = time.perf_counter() - started
                per_question = result.scores.at(K)["recall"]
                table[path][chunking_label(name, params)] = {"recall": float(per_question.mean()), "seconds": seconds,
                                                    "per_question": [round(float(v), 6) for v in per_question]}
            print(f"  {corpus.name} {chunking_label(name, params)}: "
                  + ", ".join(f"{p} {table[p][chunking_label(name, params)]['seconds']:.1f} s" for p in embedders),
                  file=sys.stderr, flush=True)
    return out


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def agreement(full: dict[str, dict[str, Any]], proxy: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How a proxy's mean recall per configuration agrees with the full path's: Spearman's rank
    correlation; where the full path's best configuration ranks among the proxy's (1 + the
    configurations the proxy scores strictly higher: a tie counts for it) and whether that is in
    the proxy's top :data:`TOP_SHARE` (at least one configuration); the recall differences in points."""
    names = sorted(full)
    reference = [full[n]["recall"] for n in names]
    scores = [proxy[n]["recall"] for n in names]
    best = max(names, key=lambda n: (full[n]["recall"], n))
    rank = 1 + sum(s > proxy[best]["recall"] for s in scores)
    top = max(1, math.ceil(TOP_SHARE * len(names)))
    diffs = [abs(a - b) * 100 for a, b in zip(scores, reference)]
    return {"configurations": len(names), "spearman": spearman(scores, reference), "rank": rank, "top": top,
            "best_in_top": rank <= top, "full_best": best,
            "proxy_best": max(names, key=lambda n: (proxy[n]["recall"], n)),
            "mean_diff": statistics.mean(diffs), "max_diff": max(diffs)}


def report(tables: dict[str, Any]) -> None:
    print(f"\nrecall@{K}, dense, per corpus ({tables['grid']} grid); proxies against the full model "
          "(all-MiniLM-L6-v2 fp32, each configuration embedded cold)\n")
    print("| corpus | proxy | configurations | Spearman vs full | full best in proxy's top 10% "
          "| full best / proxy best | mean / max abs recall diff (points) |")
    print("|---|---|---|---|---|---|---|")
    for corpus, paths in tables["corpora"].items():
        for proxy in proxies(paths):
            said = agreement(paths["full"], paths[proxy])
            print(f"| {corpus} | {proxy} | {said['configurations']} | {said['spearman']:.3f} "
                  f"| {'yes' if said['best_in_top'] else 'no'} (rank {said['rank']}, top {said['top']}) "
                  f"| {said['full_best']} / {said['proxy_best']} "
                  f"| {said['mean_diff']:.1f} / {said['max_diff']:.1f} |")
    print("\n| corpus | path | the pass over the corpus | s / configuration (median) |")
    print("|---|---|---|---|")
    passes = tables["pass"]
    for corpus, paths in tables["corpora"].items():
        median = {p: statistics.median(v["seconds"] for v in paths[p].values()) for p in paths}
        for path in paths:
            done = passes.get(path, {}).get(corpus, {})
            pass_s = f"{done['seconds']:.1f} s ({done['tokens']:,} tokens)" if done else ""
            less = f" ({median['full'] / median[path]:.0f}x less)" if path != "full" else ""
            print(f"| {corpus} | {path} | {pass_s} | {median[path]:.2f}{less} |")
    static = passes.get("static", {})
    print(f"\nstatic proxy pass (distillation, once per model, kept in the cache folder; near 0 when kept): "
          f"{static.get('seconds', float('nan')):.1f} s")


def proxies(paths: dict[str, Any]) -> list[str]:
    """The proxy paths a corpus's table holds, in :data:`PROXIES`' order."""
    return [proxy for proxy in PROXIES if proxy in paths]


def judge(tables: dict[str, Any], trials: int, simulations: int) -> None:
    """The decision bar: each proxy instead of the full model, as a screening rung, and as the
    product's ``fidelity: {proxy: ..., confirm: N}``."""
    from benchmarks.decision_bar import decision_bar as bar
    from benchmarks.decision_bar import judge_adaptive, judge_confirmed, judge_fidelity

    print("\nDecision bar on per-question recall: the proxy instead of the full model (recommendation in the "
          "other's tie set both ways; mean |diff| < 0.1 x median CI half-width), and the proxy as a first rung "
          f"before full fidelity (successive halving, reduction 3, {simulations:,} orders of up to {trials} "
          "configurations: recommendation in the full-fidelity tie set in >= 95%)\n")
    print("| corpus | proxy | full recommends (tied) | proxy recommends (tied) | recommendation kept both ways "
          "| mean abs diff vs 0.1 x median CI half-width | instead of full | as a first rung: in ties, work share |")
    print("|---|---|---|---|---|---|---|---|")
    for corpus, paths in tables["corpora"].items():
        full = {n: v["per_question"] for n, v in paths["full"].items()}
        full_seconds = statistics.median(v["seconds"] for v in paths["full"].values())
        for proxy in proxies(paths):
            scores = {n: v["per_question"] for n, v in paths[proxy].items()}
            verdict = bar(full, scores)
            share = min(max(statistics.median(v["seconds"] for v in paths[proxy].values()) / full_seconds, 0.001), 0.99)
            means = {n: statistics.mean(v) for n, v in scores.items()}
            rung = judge_fidelity(full, {share: means}, (share, 1.0), 3, trials=trials, simulations=simulations)
            print(f"| {corpus} | {proxy} | {verdict.reference.recommended} ({len(verdict.reference.tied)}) "
                  f"| {verdict.fast.recommended} ({len(verdict.fast.tied)}) "
                  f"| {'yes' if verdict.recommendation_kept else 'no'} "
                  f"| {verdict.mean_abs_difference:.4f} vs {verdict.threshold:.4f} "
                  f"| {'PASS' if verdict.passed else 'FAIL'} "
                  f"| {'PASS' if rung.passed else 'FAIL'}: {rung.in_ties:.1%} of {rung.simulations:,} orders of "
                  f"{rung.trials}, work {rung.work:.2f} (rung {share:.3f}) |")
    print(f"\nThe product's design, `fidelity: {{proxy: P, confirm: N}}`: every one of {trials} trials (a random "
          f"order of the grid, {simulations:,} orders) stops at the proxy, the proxy's best N are evaluated at full "
          "fidelity and the tie gate recommends among them only (no baseline counted); the bar: the recommendation "
          "lies in the tie set of the same trials all at full fidelity in >= 95% of the orders. *adaptive*: "
          f"the proxy's best {ADAPTIVE[0]}, then its next best while it could still tie the best confirmed one "
          f"(its proxy recall plus the largest full - proxy difference among those confirmed reaches the best's full "
          f"recall less its 95% interval's half-width), at most {ADAPTIVE[1]}; in brackets the mean number confirmed\n")
    print("| corpus | proxy | " + " | ".join(f"confirm {n}" for n in CONFIRMS) + " | adaptive |")
    print("|---|---|" + "---|" * (len(CONFIRMS) + 1))
    for corpus, paths in tables["corpora"].items():
        full = {n: v["per_question"] for n, v in paths["full"].items()}
        for proxy in proxies(paths):
            means = {n: v["recall"] for n, v in paths[proxy].items()}
            cells = []
            for confirm in CONFIRMS:
                said = judge_confirmed(full, means, confirm, trials=trials, simulations=simulations)
                cells.append(f"{'PASS' if said.passed else 'FAIL'} {said.in_ties:.1%}")
            said = judge_adaptive(full, means, least=ADAPTIVE[0], most=ADAPTIVE[1], trials=trials,
                                  simulations=simulations)
            cells.append(f"{'PASS' if said.passed else 'FAIL'} {said.in_ties:.1%} ({said.work * said.trials:.1f})")
            print(f"| {corpus} | {proxy} | " + " | ".join(cells) + " |")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--grid", choices=GRIDS, default="full", help="configurations: 6, 29 or 59 (default: full)")
    parser.add_argument("--quick", dest="grid", action="store_const", const="quick", help="the same as --grid quick")
    parser.add_argument("--corpora", nargs="+",
                        help="only these corpora (default: the three of chroma-dev, and realdocs with --realdocs)")
    parser.add_argument("--realdocs", type=Path, metavar="ROOT",
                        help="add the realdocs benchmark (its ROOT/raw and ROOT/questions.jsonl) as a corpus")
    parser.add_argument("--valgrind", type=Path, metavar="ROOT",
                        help="add the Valgrind manual benchmark (benchmarks/corpora/valgrind.py build: ROOT/raw and "
                             "ROOT/questions.jsonl), a corpus nobody tuned on")
    parser.add_argument("--static-folder", type=Path, help="where distilled static models are kept "
                        "(default: static-models in the cache folder)")
    parser.add_argument("--out", type=Path, help="write the measured tables as JSON")
    parser.add_argument("--tables", type=Path, help="report from tables written by --out (no evaluation)")
    parser.add_argument("--judge", action="store_true", help="apply the decision bar (benchmarks/decision_bar.py)")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--simulations", type=int, default=1000)
    return parser


def main() -> int:
    args = parser().parse_args()
    warnings.simplefilter("ignore")
    if args.tables:
        tables = json.loads(args.tables.read_text(encoding="utf-8"))
    else:
        require_chroma_dev(args.data)
        tables = measure(args)
        if args.out:
            args.out.write_text(json.dumps(tables), encoding="utf-8")
    report(tables)
    if args.judge:
        judge(tables, args.trials, args.simulations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
