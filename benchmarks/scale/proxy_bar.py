"""The decision bar on what ``fidelity: auto`` screens (issue 51), with what chance alone achieves.

``auto`` screens dense and hybrid trials with the late-chunking proxy and confirms the proxy's best
three at full fidelity (:data:`tuner.tuning.study.settings.AUTO_CONFIRM`). The earlier bar
(``benchmarks/scale/proxy_agreement.py --judge``) judged dense grids at k = 5 on recall alone. This one
judges the trials ``auto`` actually screens:

* **the grid** (:data:`CHUNKINGS` x :data:`RETRIEVALS` x :data:`KS`, 180 configurations): token,
  recursive, sentence and markdown chunkings, without and with a title header (markdown also with
  its heading path), retrieved dense, hybrid by reciprocal-rank fusion (60) and hybrid by weighted
  fusion (alpha 0.5), at k = 3, 5 and 10;
* **the score**: the product's default weighted score (recall 1, IoU 0.5, latency 0.1, cost 0.1;
  :func:`tuner.tuning.scoring.measures.trial_attributes`), per question, for both paths;
* **the paths**: *full* (all-MiniLM-L6-v2 fp32 embeds every chunk, headers included) and *late*
  (the proxy rung a study scores, ``evaluate_rungs`` behind ``fidelity: {proxy: late}``).
  A configuration at k = 3 or 5 is its k = 10 ranking cut there, as the product's grid scores it.

**The judgement** (:func:`decision_bar.judge_rules`, 1,000 simulated studies, the product's tie
gate): a study draws ``trials`` configurations (60, or half the rows of a smaller part), and a rule
picks three to confirm at full fidelity; the bar: the recommendation among them lies in the
full-fidelity tie set of all the study's trials in >= 95% of the studies. Rules, on the same studies:

* *proxy*: the proxy's best three (the product's rule);
* *distinct*: the proxy's best three whose chunkings differ (issue 51, item 2);
* *random*: three at random: what chance alone achieves.

Studies are drawn *uniformly*, and *clustered* as a sampler led by the proxy draws them (each
configuration with probability ``2 ** (-8 * rank / n)`` by its proxy rank: the proxy's top eighth
twice as likely as the next, so a study holds many near neighbours of the proxy's favourites,
as TPE's do). Each cell gives the share of studies in the tie set and the mean regret (points of
the score lost against the study's best at full fidelity). Parts: the whole grid, then each kind
of trial alone (dense, hybrid, a header, each k), as a study of that kind would see it.

**Verdict per kind** (:func:`verdict`): the proxy is kept for a kind when, on every corpus, it passes
the bar in both draws and beats chance by a clear margin: where chance fails the bar, the proxy's
share of studies outside the tie set is at most :data:`CLEAR_SHARE` of chance's; where chance passes
too (most configurations tie), the bar cannot tell them apart, and the proxy's regret must be at most
that share of chance's. For item 2 each cell also says the fewest
confirmations (1-3) with which the proxy's best, and the best of distinct chunkings, pass the bar.

    python benchmarks/scale/proxy_bar.py measure --corpora chatlogs state_of_the_union wikitexts --out chroma.json
    python benchmarks/scale/proxy_bar.py measure --realdocs ~/.cache/chunkwise-bench/realdocs --out realdocs.json
    python benchmarks/scale/proxy_bar.py judge chroma.json realdocs.json [--simulations 1000]
    python benchmarks/scale/proxy_bar.py judge benchmarks/results/proxy-bar/*.json.gz   # the measured scores, kept
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, chroma_dev_sets, chunking_label

#: (chunker, parameters, contexts): the chunkings and the headers each is indexed with.
CHUNKINGS: tuple[tuple[str, dict[str, int], tuple[str, ...]], ...] = (
    ("token", {"size": 200, "overlap": 0}, ("none", "title")),
    ("token", {"size": 400, "overlap": 100}, ("none", "title")),
    ("token", {"size": 800, "overlap": 0}, ("none", "title")),
    ("recursive", {"size": 300, "overlap": 0}, ("none", "title")),
    ("recursive", {"size": 600, "overlap": 150}, ("none", "title")),
    ("sentence", {"sentences": 5, "overlap": 1}, ("none",)),
    ("markdown", {"size": 200, "overlap": 0}, ("none", "title", "headings")),
    ("markdown", {"size": 400, "overlap": 100}, ("none", "title", "headings")),
    ("markdown", {"size": 800, "overlap": 200}, ("none", "title", "headings")),
)
#: (label, RetrievalConfig keywords); the hybrids share one evaluation (same method and context).
RETRIEVALS = (("dense", {"method": "dense"}),
              ("hybrid-rrf", {"method": "hybrid", "fusion": "rrf", "rrf_k": 60}),
              ("hybrid-weighted", {"method": "hybrid", "fusion": "weighted", "alpha": 0.5}))
KS = (3, 5, 10)
CONFIRM = 3
#: Beating chance by a clear margin: where chance fails the bar, the proxy's share of studies outside
#: the tie set at most this share of chance's; where chance passes it too, the proxy's regret.
CLEAR_SHARE = 0.5
#: The most trials a simulated study draws (a part with fewer rows draws half of them).
TRIALS = 60


def load(args: argparse.Namespace) -> list[tuple[Any, Any]]:
    """(corpus, evaluation set) of each corpus asked for."""
    import tuner

    out = chroma_dev_sets(args.data, args.corpora) if args.corpora else []
    for root in args.realdocs or []:
        corpus = tuner.load_corpus(root / "raw", name=root.name)
        out.append((corpus, tuner.load_evaluation_set(root / "questions.jsonl", corpus)))
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """``{corpus: {"configs": {label: {"chunking", "kind", "context", "k", "full": [...], "late": [...]}}}}``:
    per-question weighted scores of each configuration on both paths."""
    from tuner.chunkers.config import ChunkerConfig
    from tuner.embedding import EmbedderConfig, EmbeddingCache
    from tuner.embedding.late import late_chunking_embedder
    from tuner.evaluation.config import EvaluationConfig
    from tuner.evaluation.evaluator import evaluate_rungs
    from tuner.evaluation.fidelity import Fidelity
    from tuner.retrieval.config import RetrievalConfig
    from tuner.tuning.core.objective import Rates, Scales, Weights
    from tuner.tuning.scoring.measures import resolve_rates, trial_attributes

    work = Path(tempfile.mkdtemp(prefix="chunkwise-proxy-bar-"))
    cache = EmbeddingCache(work / "full.sqlite3")
    model = EmbedderConfig(precision="fp32").build(cache)
    proxy = late_chunking_embedder(model, cache)
    rates = resolve_rates(Rates(), model, "sentence-transformers")
    weights, scales = Weights(), Scales()
    out: dict[str, Any] = {}
    for corpus, evalset in load(args):
        started = time.perf_counter()
        table: dict[str, Any] = {}
        chars = sum(len(d.text) for d in corpus)
        out[corpus.name] = {"configs": table, "questions": len(evalset), "characters": chars}
        for chunker, params, contexts in CHUNKINGS:
            chunking = ChunkerConfig(chunker, params).resolved()
            for context in contexts:
                for method in ("dense", "hybrid"):
                    retrievals = [(label, RetrievalConfig(k=max(KS), context=context, **keywords))
                                  for label, keywords in RETRIEVALS if keywords["method"] == method]
                    config = EvaluationConfig(chunking, retrieval=retrievals[0][1])
                    variants = [r for _, r in retrievals[1:]]
                    rungs = evaluate_rungs(corpus, evalset, config, Fidelity(proxy="late"), embedder=model,
                                           proxy=proxy, variants=variants)
                    late, full = next(rungs), next(rungs)
                    for (label, _), late_one, full_one in zip(retrievals, (late, *late.variants),
                                                              (full, *full.variants)):
                        for k in KS:
                            name = f"{chunking_label(chunker, params)} {context} {label} k={k}"
                            row = table[name] = {"chunking": chunking_label(chunker, params), "kind": label,
                                                 "context": context, "k": k}
                            for path, result in (("full", full_one), ("late", late_one)):
                                row[path] = [round(float(v), 7) for v in per_question(result, k, rates, weights,
                                                                                     scales, trial_attributes)]
            print(f"  {corpus.name} {chunking_label(chunker, params)}: {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)
        out[corpus.name]["seconds"] = time.perf_counter() - started
    return out


def per_question(result: Any, k: int, rates: Any, weights: Any, scales: Any, trial_attributes: Any) -> Any:
    """The product's weighted score of each question at cut-off ``k`` (its modelled latency and cost
    are the configuration's, the same on every question)."""
    from tuner.tuning.core.objective import weighted_score

    attrs = trial_attributes(result, rates, weights, scales, k=k)
    scores = result.scores.at(k)
    return weighted_score(scores["recall"], scores["iou"], attrs["latency_ms"] / 1000,
                          attrs["cost_usd_per_1k_queries"], weights, scales)


def parts(configs: dict[str, Any]) -> dict[str, list[str]]:
    """The whole grid, then each kind of trial alone."""
    names = sorted(configs)
    out = {"all": names,
           "dense": [n for n in names if configs[n]["kind"] == "dense"],
           "hybrid (both fusions)": [n for n in names if configs[n]["kind"] != "dense"],
           "title header": [n for n in names if configs[n]["context"] == "title"],
           "heading header": [n for n in names if configs[n]["context"] == "headings"],
           "markdown": [n for n in names if configs[n]["chunking"].startswith("markdown")]}
    for k in KS:
        out[f"k={k}"] = [n for n in names if configs[n]["k"] == k]
    return out


def setting(name: str) -> str:
    """A configuration's setting: its name but for ``k`` (what a confirmation that chooses k evaluates)."""
    return name.rsplit(" k=", 1)[0]


def every_k(pick: Any, ordered: list[str]) -> Any:
    """``pick``'s rows, each with every k of its setting: a confirmation that chooses k at full fidelity
    (the product's since issue 51) ranks once at the largest k and scores every smaller one."""
    rows: dict[str, list[int]] = {}
    for row, name in enumerate(ordered):
        rows.setdefault(setting(name), []).append(row)
    return lambda chosen, rng: sorted({r for row in pick(chosen, rng) for r in rows[setting(ordered[row])]})


def judge_part(configs: dict[str, Any], names: list[str], simulations: int,
               confirm: int = CONFIRM, choose_k: bool = False) -> dict[str, dict[str, Any]]:
    """Every rule's verdict on one part of a corpus's grid, studies drawn uniformly and clustered. With
    ``choose_k``, every rule confirms ``confirm`` distinct settings, each at every k (:func:`every_k`)."""
    from benchmarks.decision_bar import at_random, judge_rules, top_by

    full = {n: configs[n]["full"] for n in names}
    proxy = {n: statistics.fmean(configs[n]["late"]) for n in names}
    chunking = {n: configs[n]["chunking"] for n in names}
    ordered = sorted(names)
    settings = {n: setting(n) for n in names} if choose_k else None  # choose_k: one confirmation per setting

    def chance(chosen: list[int], rng: Any) -> list[int]:  # distinct settings at random, with choose_k
        return top_by({n: rng.random() for n in ordered}, ordered, confirm, settings)(chosen, rng)

    confirmed = (lambda pick: every_k(pick, ordered)) if choose_k else (lambda pick: pick)
    picks = {"random": confirmed(chance if choose_k else at_random(confirm))}
    for count in range(1, confirm + 1):
        picks[f"proxy {count}"] = confirmed(top_by(proxy, ordered, count, settings))
        picks[f"distinct {count}"] = confirmed(top_by(proxy, ordered, count, chunking))
    trials = min(TRIALS, max(confirm + 1, len(names) // 2))
    rank = {n: i for i, n in enumerate(sorted(names, key=lambda n: (-proxy[n], n)))}
    clustered = [2.0 ** (-8 * rank[n] / len(names)) for n in ordered]
    out = {}
    for draw, weights in (("uniform", None), ("clustered", clustered)):
        said = judge_rules(full, picks, trials=trials, simulations=simulations, weights=weights, widen=choose_k)
        out[draw] = {rule: {"in_ties": v.in_ties, "regret": v.regret, "trials": v.trials} for rule, v in said.items()}
    return out


def verdict(cells: dict[str, dict[str, Any]], confirm: int = CONFIRM) -> tuple[bool, str]:
    """Whether the proxy's rule holds on one part of one corpus (the module docstring), and why not."""
    for draw, rules in cells.items():
        proxy, chance = rules[f"proxy {confirm}"], rules["random"]
        if proxy["in_ties"] < 0.95:
            return False, f"fails the bar ({draw})"
        if chance["in_ties"] < 0.95 and 1 - proxy["in_ties"] > CLEAR_SHARE * (1 - chance["in_ties"]):
            return False, f"misses the tie set more than half as often as chance ({draw})"
        if chance["in_ties"] >= 0.95 and proxy["regret"] > CLEAR_SHARE * chance["regret"]:
            return False, f"chance passes too, and the proxy loses more than half what chance loses ({draw})"
    return True, ""


def fewest(cells: dict[str, dict[str, Any]], rule: str, confirm: int = CONFIRM) -> int | None:
    """The fewest confirmations with which ``rule`` passes the bar in every draw (None: not even
    ``confirm``)."""
    return next((n for n in range(1, confirm + 1)
                 if all(rules[f"{rule} {n}"]["in_ties"] >= 0.95 for rules in cells.values())), None)


def judge(files: list[Path], simulations: int, confirm: int = CONFIRM, choose_k: bool = False) -> dict[str, Any]:
    measured: dict[str, Any] = {}
    for file in files:  # as measure wrote them, or gzipped (benchmarks/results/proxy-bar/ keeps them so)
        raw = gzip.decompress(file.read_bytes()) if file.suffix == ".gz" else file.read_bytes()
        measured.update(json.loads(raw.decode("utf-8")))
    kinds: dict[str, list[tuple[str, bool, str, int | None, int | None]]] = {}
    compact: dict[str, dict[str, str]] = {}
    print(f"\nThe decision bar on `fidelity: auto`'s trials: {confirm} confirmed of each simulated study "
          f"({simulations:,} studies per cell); in the tie set of the study's trials at full fidelity "
          "(bar 95%) / mean regret in points of the weighted score\n")
    print(f"| corpus | part (trials) | draw | proxy best {confirm} | distinct chunkings, {confirm} | "
          f"random {confirm} (chance) | fewest "
          "passing: proxy / distinct | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for corpus, data in measured.items():
        configs = data["configs"]
        for part, names in parts(configs).items():
            if len(names) < 2 * confirm or (choose_k and part.startswith("k=")):  # a part of one k has no other
                continue
            cells = judge_part(configs, names, simulations, confirm, choose_k)
            ok, why = verdict(cells, confirm)
            least = {rule: fewest(cells, rule, confirm) for rule in ("proxy", "distinct")}
            compact.setdefault(corpus, {})[part] = " / ".join(
                f"{100 * cells[draw][f'proxy {confirm}']['in_ties']:.0f} ({100 * cells[draw]['random']['in_ties']:.0f})"
                for draw in cells) + ("" if ok else " **x**")
            kinds.setdefault(part, []).append((corpus, ok, why, least["proxy"], least["distinct"]))
            for draw, rules in cells.items():
                shown = " | ".join(f"{100 * rules[r]['in_ties']:.1f}% / {rules[r]['regret']:.2f}"
                                   for r in (f"proxy {confirm}", f"distinct {confirm}", "random"))
                first = draw == "uniform"
                said = ("keep" if ok else f"**drop**: {why}") if first else ""
                counts = " / ".join(str(least[r] or "-") for r in ("proxy", "distinct")) if first else ""
                trials = rules["random"]["trials"]
                print(f"| {corpus} | {part} ({trials} of {len(names)}) | {draw} | {shown} | {counts} | {said} |",
                      flush=True)
    names = list(next(iter(compact.values()), {}))
    print(f"\nIn short: the proxy's best {confirm} in the tie set, % of studies (chance's in brackets), uniform / "
          "clustered draws; **x**: the verdict drops the proxy for that kind on that corpus\n")
    print("| corpus | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for corpus, row in compact.items():
        print(f"| {corpus} | " + " | ".join(row.get(name, "") for name in names) + " |")
    print("\nPer kind of trial, over the corpora:\n")
    for part, said in kinds.items():
        failed = [f"{corpus} ({why})" for corpus, ok, why, _, _ in said if not ok]
        need = {rule: [row[3 + i] for row in said] for i, rule in enumerate(("proxy", "distinct"))}
        least = {rule: "-" if None in counts else max(counts) for rule, counts in need.items()}
        print(f"- {part}: " + ("proxy kept on every corpus" if not failed else "fails on " + ", ".join(failed))
              + f"; fewest confirmations passing on every corpus: proxy {least['proxy']}, distinct chunkings "
              f"{least['distinct']}")
    return {"kinds": {part: [list(v) for v in said] for part, said in kinds.items()}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("measure", help="score the grid on both paths and write the per-question scores")
    run.add_argument("--data", type=Path, default=CHROMA_DEV)
    run.add_argument("--corpora", nargs="*", default=[], help="chroma-dev corpora (chatlogs, state_of_the_union, "
                     "wikitexts...)")
    run.add_argument("--realdocs", type=Path, nargs="*", metavar="ROOT",
                     help="benchmark roots holding raw/ and questions.jsonl (realdocs, valgrind, rustbook); the "
                          "folder's name names the corpus")
    run.add_argument("--out", type=Path, required=True)
    said = sub.add_parser("judge", help="judge measured files")
    said.add_argument("files", type=Path, nargs="+")
    said.add_argument("--simulations", type=int, default=1000)
    said.add_argument("--choose-k", action="store_true",
                      help="each rule confirms distinct settings (configurations but for k), each at every k, as "
                           "the product's confirmations do since issue 51; without it, configurations at their own k")
    said.add_argument("--confirm", type=int, default=CONFIRM,
                      help=f"configurations each rule confirms ({CONFIRM}, the product's AUTO_CONFIRM)")
    return parser


def main() -> int:
    args = parser().parse_args()
    warnings.simplefilter("ignore")
    if args.command == "measure":
        tables = measure(args)
        args.out.write_text(json.dumps(tables), encoding="utf-8")
        return 0
    judge(args.files, args.simulations, args.confirm, args.choose_k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
