"""What the search's choice is worth on questions it never saw (issue 60).

A study chooses on its questions; a user lives with the choice on the next ones. This benchmark
takes corpora with many questions, tunes on 40 of them, chooses as the product chooses, and scores
the choices on all the remaining questions, which no part of the choice saw.

**pool**: per corpus, a pool of configurations from the default space is scored once on every
question: the nine baselines (token 800/400, recursive and markdown 256/0, each with dense, BM25
and hybrid retrieval, k = 5) and ``--configurations`` random draws (a chunker, its size and
overlap, a retrieval method with its fusion; every k from 1 to 10 from one evaluation). Per entry
and k it keeps each question's recall and IoU and the modelled latency and cost (fixed rates, so
the figures do not depend on the machine). The pools are written as gzipped JSON
(``benchmarks/results/fresh-questions/``), so the draws can be re-run and checked without
re-embedding anything.

**draws**: per corpus, ``--draws`` random draws of ``--tune`` questions. Each draw is treated as a
study: its questions are split 75/25 into search and held-out questions as the product's default
validation does; each random configuration records the k that scores best on the search
questions (as a trial's inner loop does); then

- *the rule before issue 60*: the tie gate's choice on the search questions, recommended only
  when it is significantly better than the best baseline on the held-out questions (else the best
  baseline);
- *the rule now* (:func:`tuner.tuning.scoring.decision.decide`): the cross-validated gain over
  all the draw's questions decides between the search's choice and the best baseline;
- the cross-validated estimate of the search's gain over the best baseline with its 95% interval
  (:func:`tuner.tuning.scoring.crossval.search_gain`).

Each is then scored on the fresh questions: the realized gain of the search's choice over the
best baseline (both chosen on the draw's questions), whether the interval covered it, and the
fresh score of each rule's recommendation.

The pool is random, not steered by a sampler: it measures the choice, the interval and the rule,
not how much a sampler that saw the search questions flatters its own candidates.

    python benchmarks/search/fresh_questions.py pool --out benchmarks/results/fresh-questions
    python benchmarks/search/fresh_questions.py draws --pools benchmarks/results/fresh-questions --draws 15 \\
        --json benchmarks/results/fresh-questions/draws.json
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, chroma_dev_questions, require_chroma_dev

K_MAX = 10
#: Fixed rates (a MiniLM throughput of this machine's order), so no calibration runs.
RATES = {"embed_tokens_per_s": 2000.0}


def random_configuration(rng: np.random.Generator) -> dict:
    """One configuration of the default space (search_spaces/default.yaml), evaluated at k = 10."""
    name = str(rng.choice(["token", "recursive", "markdown", "sentence"]))
    if name == "sentence":
        sentences = int(rng.integers(1, 16))
        params = {"sentences": sentences, "overlap": math.floor(rng.uniform(0, 0.5) * sentences)}
    else:
        size = round(math.exp(rng.uniform(math.log(50), math.log(1000))))
        params = {"size": size, "overlap": math.floor(rng.uniform(0, 0.5) * size)}
    method = str(rng.choice(["dense", "bm25", "hybrid"]))
    retrieval: dict = {"method": method, "k": K_MAX}
    if method == "hybrid":
        retrieval["fusion"] = str(rng.choice(["rrf", "weighted"]))
        if retrieval["fusion"] == "weighted":
            retrieval["alpha"] = round(float(rng.integers(0, 11)) / 10, 1)
        else:
            retrieval["rrf_k"] = int(rng.choice([10, 30, 60, 100]))
    return {"chunker": {"name": name, "params": params}, "retrieval": retrieval}


def baselines() -> list[tuple[str, dict]]:
    from tuner.tuning.search.baselines import BASELINES

    out = []
    for baseline in BASELINES:
        config = {"chunker": {"name": baseline.chunker, "params": dict(baseline.params)},
                  "retrieval": {"method": baseline.method, "k": 5}}
        out.append((baseline.name, config))
    return out


def build_pool(corpus_path: Path, queries: Path, configurations: int, seed: int) -> dict:
    from tuner import EvaluationConfig, evaluate, load_corpus, load_evaluation_set
    from tuner.embedding.cache import EmbeddingCache
    from tuner.tuning.core.objective import Rates, Scales, Weights
    from tuner.tuning.scoring.measures import resolve_rates, trial_attributes

    corpus = load_corpus(corpus_path, name=corpus_path.stem)
    evalset = load_evaluation_set(queries, corpus)
    cache = EmbeddingCache(None)
    rng = np.random.default_rng(seed)
    rows = [(name, config) for name, config in baselines()]
    rows += [(None, random_configuration(rng)) for _ in range(configurations)]
    embedder = None
    entries = []
    for number, (baseline, data) in enumerate(rows):
        config = EvaluationConfig.from_dict(data)
        if embedder is None:
            embedder = config.embedder.build(cache)
            rates = resolve_rates(Rates(**RATES), embedder, config.embedder.provider)
        started = time.perf_counter()
        result = evaluate(corpus, evalset, config, embedder=embedder)
        ks = [5] if baseline else list(range(1, K_MAX + 1))
        entry = {"number": number, "baseline": baseline, "config": config.to_dict(), "k": ks,
                 "latency_s": [], "cost_usd_per_1k": [], "recall": [], "iou": []}
        for k in ks:
            attrs = trial_attributes(result, rates, Weights(), Scales(), k=k)
            per_query = result.scores.at(k)
            entry["latency_s"].append(attrs["latency_ms"] / 1000)
            entry["cost_usd_per_1k"].append(attrs["cost_usd_per_1k_queries"])
            entry["recall"].append([round(float(v), 5) for v in per_query["recall"]])
            entry["iou"].append([round(float(v), 6) for v in per_query["iou"]])
        entries.append(entry)
        print(f"  {number:3d}/{len(rows)} {baseline or ''} {json.dumps(data)} "
              f"recall@5 {np.mean(result.scores.at(5)['recall']):.1%} ({time.perf_counter() - started:.1f} s)",
              file=sys.stderr, flush=True)
    return {"corpus": corpus_path.stem, "questions": len(evalset.queries),
            "question_ids": [q.id for q in evalset.queries], "rates": RATES, "seed": seed, "entries": entries}


def pool_command(args: argparse.Namespace) -> int:
    require_chroma_dev(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.corpora.split(","):
            path = args.data / "corpora" / f"{name}.md"
            if not path.is_file():
                raise SystemExit(f"--corpora: {name} is not a chroma-dev corpus ({path} not found)")
            print(f"{name}:", file=sys.stderr, flush=True)
            questions = chroma_dev_questions(args.data, [name], Path(folder) / f"{name}.csv")
            pool = build_pool(path, questions, args.configurations, args.seed)
            with gzip.open(args.out / f"{name}.json.gz", "wt", encoding="utf-8") as handle:
                json.dump(pool, handle)
    return 0


# --- draws -------------------------------------------------------------------------------------------------------


def candidates_of(pool: dict, search: np.ndarray):
    """(candidates, baselines, default) with each random configuration at the k that scores best on
    the ``search`` questions (a trial's inner loop); every array over all the pool's questions."""
    from tuner.tuning.core.objective import Scales, Weights
    from tuner.tuning.scoring.comparisons import Candidate
    from tuner.tuning.search.baselines import DEFAULT_BASELINE

    weights, scales = Weights(), Scales()
    candidates, reference, default = [], [], None
    for entry in pool["entries"]:
        options = [Candidate(entry["number"], np.array(entry["recall"][i]), np.array(entry["iou"][i]),
                             entry["latency_s"][i], entry["cost_usd_per_1k"][i], 1)
                   for i in range(len(entry["k"]))]
        chosen = max(options, key=lambda c: c.score(weights, scales, search))
        candidates.append(chosen)
        if entry["baseline"]:
            reference.append(chosen)
            if entry["baseline"] == DEFAULT_BASELINE:
                default = chosen
    return candidates, reference, default


def _neighbourhood(entry: dict, k: int) -> tuple[tuple[str, str], np.ndarray]:
    """A configuration's kind (chunker, retrieval method) and where it lies among its kind: log size
    (25 tokens a sentence), twice the overlap share, k / 4."""
    chunker, retrieval = entry["config"]["chunker"], entry["config"]["retrieval"]
    params = chunker["params"]
    units = params.get("size", params.get("sentences", 1))
    size = params.get("size", params.get("sentences", 1) * 25)
    return ((chunker["name"], retrieval.get("method", "dense")),
            np.array([math.log(size), 2 * params.get("overlap", 0) / max(1, units), k / 4]))


def pooled_choice(pool: dict, candidates, questions: np.ndarray, bandwidth: float) -> int:
    """The remedy tried for a choice made on a noisy single score: each configuration's score on
    ``questions`` replaced by a kernel average over the configurations of its kind near it (a
    Gaussian of ``bandwidth`` in :func:`_neighbourhood`'s coordinates), the highest chosen."""
    from tuner.tuning.core.objective import Scales, Weights

    weights, scales = Weights(), Scales()
    places = []
    for entry, chosen in zip(pool["entries"], candidates):
        at = next(i for i in range(len(entry["k"])) if entry["latency_s"][i] == chosen.latency_s
                  and np.array_equal(entry["recall"][i], chosen.recall))
        places.append(_neighbourhood(entry, entry["k"][at]))
    scores = np.array([c.score(weights, scales, questions) for c in candidates])
    smoothed = np.empty(len(candidates))
    for i, (kind, where) in enumerate(places):
        near = np.array([math.exp(-float(np.sum((where - other) ** 2)) / (2 * bandwidth**2)) if other_kind == kind
                         else 0.0 for other_kind, other in places])
        smoothed[i] = float(np.sum(near * scores) / np.sum(near))
    return candidates[int(np.argmax(smoothed))].number


def old_rule(candidates, baselines, search_mask, weights, scales) -> tuple[int, int]:
    """(the recommendation, the tie gate's choice) under the rule before issue 60: the tie gate on
    the search questions, kept only when significantly better than the best baseline on the
    held-out questions."""
    from tuner.tuning.scoring.comparisons import TOP_CANDIDATES, compare, ranked, recommend

    on_search = [c.on(search_mask) for c in candidates]
    top = [candidates[i] for i in ranked(on_search, weights, scales)[:TOP_CANDIDATES]]
    verdict = recommend([c.on(search_mask) for c in top], weights, scales)
    tuned = next(c for c in candidates if c.number == verdict.recommended)
    best_base = max(baselines, key=lambda b: (b.score(weights, scales, search_mask), -b.number))
    if any(b.number == tuned.number for b in baselines):
        return tuned.number, tuned.number
    check = compare(tuned, best_base, weights, scales, ~search_mask)
    return (tuned.number if check.better else best_base.number), tuned.number


def one_draw(pool: dict, rng: np.random.Generator, tune: int) -> dict:
    from tuner.tuning.core.objective import Scales, Weights
    from tuner.tuning.scoring.crossval import search_gain
    from tuner.tuning.scoring.decision import DECISION_RULES, decide

    weights, scales = Weights(), Scales()
    n = pool["questions"]
    order = rng.permutation(n)
    tuned, fresh = np.sort(order[:tune]), np.sort(order[tune:])
    held = set(rng.permutation(tuned)[: round(tune * 0.25)].tolist())
    search_full = np.zeros(n, dtype=bool)
    search_full[[q for q in tuned if q not in held]] = True
    candidates, baselines, default = candidates_of(pool, search_full)
    # The study sees only its own questions: cut every candidate to them.
    mine = [c.on(tuned) for c in candidates]
    my_baselines = [c.on(tuned) for c in baselines]
    my_default = default.on(tuned)
    search = search_full[tuned]
    by_number = {c.number: c for c in candidates}
    old, tuned_old = old_rule(mine, my_baselines, search, weights, scales)
    gain = search_gain(mine, my_baselines, my_default, weights, scales)
    decision = decide(mine, my_baselines, gain, weights, scales)
    by_rule = {rule: decide(mine, my_baselines, gain, weights, scales, rule).recommended for rule in DECISION_RULES}

    def fresh_score(number: int) -> float:
        return by_number[number].score(weights, scales, fresh)

    def fresh_recall(number: int) -> float:
        return float(by_number[number].recall[fresh].mean())

    over = gain.over_best_baseline
    realized = fresh_score(decision.search_choice) - fresh_score(decision.best_baseline)
    predicted_low, predicted_high = over.prediction(len(fresh))
    return {
        "fresh questions": len(fresh),
        "search's choice": decision.search_choice, "best baseline": decision.best_baseline,
        "estimate": over.score, "low": over.score_low, "high": over.score_high, "p": over.p_value,
        "realized": realized, "covered": bool(over.score_low <= realized <= over.score_high),
        "prediction low": predicted_low, "prediction high": predicted_high,
        "prediction covered": bool(predicted_low <= realized <= predicted_high),
        "realized recall": fresh_recall(decision.search_choice) - fresh_recall(decision.best_baseline),
        "old rule": old, "old rule's tie-gate choice": tuned_old, "new rule": decision.recommended,
        "old rule fresh score": fresh_score(old), "new rule fresh score": fresh_score(decision.recommended),
        "old rule fresh recall": fresh_recall(old), "new rule fresh recall": fresh_recall(decision.recommended),
        "default fresh score": fresh_score(default.number),
        "beats": gain.beats,
        "rules": {rule: {"recommended": number, "fresh score": fresh_score(number),
                         "fresh recall": fresh_recall(number)} for rule, number in by_rule.items()},
        "best baseline fresh score": fresh_score(decision.best_baseline),
        "pooled choice fresh score": {str(h): fresh_score(pooled_choice(pool, candidates, tuned, h))
                                      for h in (0.3, 1.0)},
        "search's choice fresh score": fresh_score(decision.search_choice),
    }


def draws_command(args: argparse.Namespace) -> int:
    files = sorted(args.pools.glob("*.json.gz"))
    if not files:
        raise SystemExit(f"--pools: no *.json.gz pool in {args.pools} (run the pool command first)")
    report = {}
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            pool = json.load(handle)
        if pool["questions"] < args.tune + 10:
            print(f"{pool['corpus']}: {pool['questions']} questions, too few for {args.tune} + 10 fresh: skipped",
                  file=sys.stderr)
            continue
        rng = np.random.default_rng(args.seed)
        rows = [one_draw(pool, rng, args.tune) for _ in range(args.draws)]
        report[pool["corpus"]] = rows
    print_table(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def print_table(report: dict) -> None:
    """Per draw, then per corpus: the estimate and its intervals against the realized gain, and the
    fresh score of each rule's recommendation."""
    print("| corpus | draw | fresh questions | estimate [95%] (score, the search over the best baseline) | "
          "[95%] for that many new questions | realized on fresh | covered (estimate / new questions) | "
          "old rule: fresh score | new rule: fresh score |")
    print("|---|---|---|---|---|---|---|---|---|")
    for corpus, rows in report.items():
        for index, row in enumerate(rows, 1):
            marks = "/".join("yes" if row[key] else "no" for key in ("covered", "prediction covered"))
            print(f"| {corpus} | {index} | {row['fresh questions']} | {row['estimate']:+.4f} [{row['low']:+.4f}, "
                  f"{row['high']:+.4f}] | [{row['prediction low']:+.4f}, {row['prediction high']:+.4f}] | "
                  f"{row['realized']:+.4f} | {marks} | {row['old rule fresh score']:.4f} | "
                  f"{row['new rule fresh score']:.4f} |")
    rules = list(next(iter(report.values()))[0]["rules"])
    print("\n| corpus | draws | covered: estimate's interval | covered: new questions' interval | mean estimate | "
          "mean realized | old rule (held-out check) | " + " | ".join(f"rule '{rule}'" for rule in rules)
          + " | always the best baseline | always the search's choice | the choice pooled over neighbours, h = 0.3 "
            "/ 1.0 | draws: new rule worse / better than old |")
    print("|---|---|---|---|---|---|---|" + "---|" * (len(rules) + 4))
    for corpus, rows in report.items():
        cells = [str(sum(r["covered"] for r in rows)), str(sum(r["prediction covered"] for r in rows)),
                 f"{_mean([r['estimate'] for r in rows]):+.4f}", f"{_mean([r['realized'] for r in rows]):+.4f}",
                 f"{_mean([r['old rule fresh score'] for r in rows]):.4f}"]
        cells += [f"{_mean([r['rules'][rule]['fresh score'] for r in rows]):.4f}" for rule in rules]
        choice = _mean([r["search's choice fresh score"] for r in rows])
        cells += [f"{_mean([r['best baseline fresh score'] for r in rows]):.4f}", f"{choice:.4f}",
                  " / ".join(f"{_mean([r['pooled choice fresh score'][h] for r in rows]):.4f}" for h in ("0.3", "1.0"))]
        worse = sum(r["new rule fresh score"] < r["old rule fresh score"] - 1e-9 for r in rows)
        better = sum(r["new rule fresh score"] > r["old rule fresh score"] + 1e-9 for r in rows)
        print(f"| {corpus} | {len(rows)} | " + " | ".join(cells) + f" | {worse} / {better} |")


# --- real studies ------------------------------------------------------------------------------------------------


def _scored(result, k: int, rates, number: int):
    """A :class:`Candidate` of ``result`` at cut-off ``k`` (modelled latency and cost at fixed rates)."""
    from tuner.tuning.core.objective import Scales, Weights
    from tuner.tuning.scoring.comparisons import Candidate
    from tuner.tuning.scoring.measures import trial_attributes

    attrs = trial_attributes(result, rates, Weights(), Scales(), k=k)
    per_query = result.scores.at(k)
    return Candidate(number, np.asarray(per_query["recall"], dtype=float), np.asarray(per_query["iou"], dtype=float),
                     attrs["latency_ms"] / 1000, attrs["cost_usd_per_1k_queries"], 1)


def studies_command(args: argparse.Namespace) -> int:
    """Real studies: each draw's 40 questions tuned by ``chunkwise tune`` itself (its sampler steered by
    the search questions), the choices then scored on the other questions."""
    import optuna

    from tuner import EvaluationConfig, evaluate, load_corpus, load_evaluation_set
    from tuner.embedding.cache import EmbeddingCache
    from tuner.tuning import StudySpec, run_study_spec
    from tuner.tuning.core.objective import Rates, Scales, Weights
    from tuner.tuning.core.records import recommendable
    from tuner.tuning.outcome.selection import baseline_records
    from tuner.tuning.scoring.comparisons import candidate
    from tuner.tuning.scoring.measures import resolve_rates
    from tuner.tuning.study.settings import StudySettings

    require_chroma_dev(args.data)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    weights, scales = Weights(), Scales()
    path = args.data / "corpora" / f"{args.corpus}.md"
    rows = []
    with tempfile.TemporaryDirectory(prefix="fresh-studies-") as folder:
        folder = Path(folder)
        every = chroma_dev_questions(args.data, [args.corpus], folder / f"{args.corpus}.csv")
        with every.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            questions, fields = list(reader), reader.fieldnames
        corpus = load_corpus(path, name=args.corpus)
        evalset = load_evaluation_set(every, corpus)
        cache_path = folder / "embeddings.sqlite3"
        embedder, rates, scored = None, None, {}
        rng = np.random.default_rng(args.seed)
        for draw in range(args.draws):
            order = rng.permutation(len(questions))
            tuned = np.sort(order[: args.tune])
            fresh = np.sort(order[args.tune:])
            subset = folder / f"draw{draw}.csv"
            with subset.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=fields)
                writer.writeheader()
                writer.writerows(questions[i] for i in tuned)
            spec = StudySpec(name=f"fresh{draw}", corpora=((args.corpus, str(path)),), queries=str(subset),
                             space="default", storage=f"sqlite:///{folder}/studies.db", trials=args.trials,
                             seed=draw, validation=0.25, cache=str(cache_path))
            outcome = run_study_spec(spec, progress=False, echo=lambda line: None)[0]
            verdict = outcome.recommendation
            study = optuna.load_study(study_name=outcome.study, storage=spec.storage)
            settings = StudySettings.of(study)
            records = {r.number: r for r in recommendable(study)}
            baselines = [b for b in baseline_records(study) if b.stored_per_query is not None]
            search = settings.search_mask(args.tune)
            before, _ = old_rule([candidate(r) for r in records.values()], [candidate(b) for b in baselines],
                                 search, weights, scales)
            records.update({b.number: b for b in baselines})
            chosen = {"new rule": verdict.recommended.number, "old rule": before,
                      "search's choice": verdict.decision.search_choice,
                      "best baseline": verdict.decision.best_baseline}
            fresh_scores = {}
            for role, number in chosen.items():
                record = records[number]
                key = (record.config_key, record.k)
                if key not in scored:
                    config = EvaluationConfig.from_dict(record.config)
                    if embedder is None:
                        embedder = config.embedder.build(EmbeddingCache(str(cache_path)))
                        rates = resolve_rates(Rates(**RATES), embedder, config.embedder.provider)
                    result = evaluate(corpus, evalset, config, embedder=embedder)
                    scored[key] = _scored(result, record.k, rates, number)
                fresh_scores[role] = scored[key].score(weights, scales, fresh)
            over = verdict.gain.over_best_baseline
            realized = fresh_scores["search's choice"] - fresh_scores["best baseline"]
            low, high = over.prediction(len(fresh))
            rows.append({"draw": draw + 1, "trials": len(study.trials), "fresh questions": len(fresh),
                         "chosen": {role: records[n].label() for role, n in chosen.items()},
                         "fresh scores": fresh_scores, "estimate": over.score, "low": over.score_low,
                         "high": over.score_high, "prediction low": low, "prediction high": high,
                         "realized": realized, "covered": bool(over.score_low <= realized <= over.score_high),
                         "prediction covered": bool(low <= realized <= high)})
            row = rows[-1]
            print(f"| {args.corpus} | {draw + 1} | {row['trials']} | {over.score:+.4f} [{over.score_low:+.4f}, "
                  f"{over.score_high:+.4f}] | [{low:+.4f}, {high:+.4f}] | {realized:+.4f} | "
                  f"{fresh_scores['old rule']:.4f} | {fresh_scores['new rule']:.4f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"corpus": args.corpus, "tune": args.tune, "trials": args.trials,
                                         "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pool = commands.add_parser("pool", help="score a pool of configurations on every question, per corpus")
    pool.add_argument("--data", type=Path, default=CHROMA_DEV)
    pool.add_argument("--corpora", default="wikitexts,state_of_the_union,chatlogs")
    pool.add_argument("--configurations", type=int, default=60)
    pool.add_argument("--seed", type=int, default=0)
    pool.add_argument("--out", type=Path, required=True)
    draws = commands.add_parser("draws", help="tune on draws of questions, score the choices on the rest")
    draws.add_argument("--pools", type=Path, required=True)
    draws.add_argument("--draws", type=int, default=15)
    draws.add_argument("--tune", type=int, default=40)
    draws.add_argument("--seed", type=int, default=0)
    draws.add_argument("--json", type=Path)
    studies = commands.add_parser("studies", help="real studies on draws of questions, scored on the rest")
    studies.add_argument("--data", type=Path, default=CHROMA_DEV)
    studies.add_argument("--corpus", default="wikitexts")
    studies.add_argument("--draws", type=int, default=5)
    studies.add_argument("--tune", type=int, default=40)
    studies.add_argument("--trials", type=int, default=40, help="trials per study (the baselines among them)")
    studies.add_argument("--seed", type=int, default=0)
    studies.add_argument("--json", type=Path)
    return parser


def main() -> int:
    cli = parser()
    args = cli.parse_args()
    for name in ("configurations", "draws", "tune", "trials"):
        if getattr(args, name, 1) < 1:
            cli.error(f"--{name}={getattr(args, name)} is invalid; allowed: an integer >= 1")
    commands_run = {"pool": pool_command, "draws": draws_command, "studies": studies_command}
    return commands_run[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
