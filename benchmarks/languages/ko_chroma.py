"""Korean: dense, BM25 and hybrid recall for all-MiniLM-L6-v2 against the multilingual models (issue 53).

The corpus is the Korean translation of Chroma's technical report (one markdown document,
``../shared/datasets/ko-chroma/chroma-report-ko.md``, read where it lies, never copied into the
repository); the 20 questions were written by hand for this benchmark
(``benchmarks/data/ko/questions.yaml``), each with one or two verbatim excerpts.

    python benchmarks/languages/ko_chroma.py build [--root DIR] [--source FILE]
    python benchmarks/languages/ko_chroma.py run [--root DIR] [--source FILE] [--embedders minilm e5 use] [-k 5]
    python benchmarks/languages/ko_chroma.py study [--root DIR] [--source FILE] [--name ko-default]

``build`` loads the document as chunkwise does (corpus ``ko``), locates every excerpt exactly once
(``_corpus.locate``), writes ``ROOT/questions.jsonl`` (default ``~/.cache/chunkwise-bench/ko-chroma``)
and ends with ``chunkwise validate``. ``run`` builds first, then scores each chunking of
:data:`CHUNKINGS` with every embedder (a fresh embedding cache per embedder, so the dense run's
embedding time is a cold pass over the chunks and the questions) by dense and hybrid (rrf 60)
retrieval, and BM25 once per chunking, which embeds nothing: as chunkwise now reads Korean
(character bigrams of Hangul runs) and as it read it before issue 53 (whitespace words, English
stemmer; the bigram rule switched off in this process only). It prints a markdown table: mean
token-level recall and IoU at k, the embedding seconds of the dense run, and the embedder's own
tokens per cl100k token of the chunks (what a size means to it).

``study`` (issue 63) tunes the corpus as a user would, with no option: ``chunkwise tune --name NAME
--corpus ko=SOURCE --queries QUESTIONS`` (the default space, 30 trials, a quarter of the questions held
out), in a new study stored at ``ROOT/NAME.db`` (an existing one is removed first), so the default space
chooses its embedders for Korean (:mod:`tuner.tuning.search.languages`: multilingual-e5-small beside
MiniLM when the ``multilingual`` extra is installed). It then prints, from the study, the
recommendation's recall on the held-out questions and on the search ones, beside the best dense trial
of each embedder (by the study's score, as the summary picks an embedder's best), and whether the
recommendation's held-out recall is at least :data:`STUDY_BAR` points above MiniLM's best dense trial's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA, ROOT
from benchmarks._corpus import BenchError, locate, tuner_command, write_questions

CORPUS = "ko"
QUESTIONS = DATA / "ko" / "questions.yaml"
DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / "ko-chroma"
DEFAULT_SOURCE = ROOT.parent / "shared" / "datasets" / "ko-chroma" / "chroma-report-ko.md"
#: The chunkings of the issue's own check (sizes in cl100k tokens), and recursive 512: larger chunks,
#: which a multilingual model reads whole (MiniLM truncates them).
CHUNKINGS = [("token", {"size": 256, "overlap": 0}), ("recursive", {"size": 256, "overlap": 0}),
             ("sentence", {"sentences": 3, "overlap": 0}), ("recursive", {"size": 512, "overlap": 0})]
EMBEDDERS = {"minilm": "sentence-transformers", "e5": "multilingual-e5", "use": "use-multilingual"}
#: Issue 63's bar: the recommendation's held-out recall at least this many points above MiniLM's best dense trial's.
STUDY_BAR = 20.0


def build(root: Path, source: Path) -> Path:
    import yaml

    import tuner

    if not source.is_file():
        raise BenchError(f"{source} not found: give --source (the ko-chroma dataset's chroma-report-ko.md)")
    corpus = tuner.load_corpus(source, name=CORPUS)
    (document,) = list(corpus)
    records, problems = [], []
    for question in yaml.safe_load(QUESTIONS.read_text(encoding="utf-8")):
        references = []
        for excerpt in question["excerpts"]:
            found = locate(document.text, excerpt)
            if isinstance(found, str):
                problems.append(f"{question['id']}: excerpt {excerpt[:40]!r}...: {found}")
                break
            start, end = found
            references.append({"document": document.id, "start_index": start, "end_index": end,
                               "content": document.text[start:end]})
        else:
            records.append({"id": question["id"], "question": question["question"], "corpus": CORPUS,
                            "references": references})
    if problems:
        raise BenchError("\n".join(["excerpts not located:", *problems]))
    root.mkdir(parents=True, exist_ok=True)
    output = write_questions(root / "questions.jsonl", records)
    print(f"corpus {CORPUS}: {len(document.text):,} characters in {source}; wrote {len(records)} questions "
          f"to {output}", file=sys.stderr)
    if tuner_command("validate", "--corpus", f"{CORPUS}={source}", "--queries", str(output)).returncode != 0:
        raise BenchError(f"chunkwise validate refused {output}")
    return output


def run(root: Path, source: Path, embedders: list[str], k: int) -> None:
    import tuner

    queries = build(root, source)
    corpus = tuner.load_corpus(source, name=CORPUS)
    evalset = tuner.load_evaluation_set(queries, [corpus])
    print(f"Korean (ko-chroma), {len(evalset)} questions, k={k}, pooled; "
          f"`python benchmarks/languages/ko_chroma.py run --embedders {' '.join(embedders)} -k {k}`, "
          f"{dt.date.today().isoformat()}\n")
    score([corpus], evalset, CHUNKINGS, embedders, k)


def score(corpora: list, evalset, chunkings: list, embedders: list[str], k: int) -> None:
    """Print the table of the module docstring for ``corpora`` and ``evalset`` (pooled)."""
    import tuner
    from tuner.embedding import EmbedderConfig, EmbeddingCache
    from tuner.text import terms

    print("| chunking | embedder | retrieval | recall | IoU | dense embedding s (cold) | model tokens / cl100k |")
    print("|---|---|---|---|---|---|---|")

    def row(chunking: str, embedder: str, retrieval: str, result, seconds: str = "", ratio: str = "") -> None:
        overall = result.metrics["overall"]
        print(f"| {chunking} | {embedder} | {retrieval} | {overall['recall']['mean']:.1%} | "
              f"{overall['iou']['mean']:.1%} | {seconds} | {ratio} |", flush=True)

    for chunker, params in chunkings:
        label = f"{chunker} {params.get('size', params.get('sentences'))}"
        kwargs = dict(chunker=chunker, k=k, **params)
        row(label, "-", "bm25 (bigrams)", tuner.evaluate(corpora, evalset, method="bm25", cache=False, **kwargs))
        bigrams = terms.BIGRAM_RUN
        terms.BIGRAM_RUN = re.compile(r"(?!)")  # never matches: whitespace words, as before issue 53
        try:
            row(label, "-", "bm25 (words, before)", tuner.evaluate(corpora, evalset, method="bm25", cache=False,
                                                                   **kwargs))
        finally:
            terms.BIGRAM_RUN = bigrams
        for name in embedders:
            config = EmbedderConfig.parse(EMBEDDERS[name])
            with tempfile.TemporaryDirectory() as folder:
                cache = EmbeddingCache(Path(folder) / "cache.sqlite")
                dense = tuner.evaluate(corpora, evalset, embedder=config, cache=cache, **kwargs)
                ratio = dense.window.get("tokens_per_cl100k")
                row(label, config.model, "dense", dense, f"{dense.timings['embedding']:.1f}",
                    "" if ratio is None else f"{ratio:.2f}")
                row(label, config.model, "hybrid rrf(60)",
                    tuner.evaluate(corpora, evalset, embedder=config, cache=cache, method="hybrid", **kwargs))


def study(root: Path, source: Path, name: str) -> bool:
    """Tune with no option and compare the recommendation with each embedder's best dense trial (see
    the module docstring); whether the recommendation clears :data:`STUDY_BAR`."""
    import tuner
    from tuner.tuning.core.records import recommendable

    queries = build(root, source)
    database = root / f"{name}.db"
    database.unlink(missing_ok=True)
    storage = f"sqlite:///{database}"
    started = dt.datetime.now(dt.timezone.utc)
    if tuner_command("tune", "--name", name, "--corpus", f"{CORPUS}={source}", "--queries", str(queries),
                     "--storage", storage).returncode != 0:
        raise BenchError("chunkwise tune failed")
    minutes = (dt.datetime.now(dt.timezone.utc) - started).total_seconds() / 60
    run = tuner.load_run(name, storage)
    optuna_study = run.study(CORPUS)
    settings = optuna_study.user_attrs["settings"]
    recommended = run.recommended

    def described(record) -> str:
        config = record.config or {}
        retrieval, embedder = config.get("retrieval") or {}, config.get("embedder") or {}
        chunker = config.get("chunker") or {}
        params = ", ".join(f"{key}={value}" for key, value in (chunker.get("params") or {}).items()
                           if key != "separators")
        method = retrieval.get("method", "dense")
        model = "" if method == "bm25" else f" {embedder.get('model', '?')}"
        return f"{chunker.get('name', record.chunker)}({params}) k={record.k} {method}{model}"

    best_dense: dict[str, object] = {}
    for record in recommendable(optuna_study):
        config = record.config or {}
        if (config.get("retrieval") or {}).get("method", "dense") != "dense":
            continue
        model = (config.get("embedder") or {}).get("model", "?")
        if model not in best_dense or record.score > best_dense[model].score:
            best_dense[model] = record
    print(f"\n`python benchmarks/languages/ko_chroma.py study --name {name}`, {started:%Y-%m-%d %H:%M} UTC, "
          f"{minutes:.1f} minutes; {settings['queries']} questions, {len(settings['validation'].get('queries', []))} "
          f"held out; the space's embedders: "
          f"{', '.join(e['model'] for e in settings['space'].get('embedders', [])) or 'the study embedder only'}; "
          f"recorded choice: {settings.get('embedder_choice')}\n")
    held_out = len(settings["validation"].get("queries", []))
    searched = settings["queries"] - held_out
    print(f"| trial | configuration | held-out recall ({held_out}) | search recall ({searched}, in-sample) | "
          f"all {settings['queries']} (in-sample) |")
    print("|---|---|---|---|---|")
    rows = [("the recommendation", recommended)] + [(f"best dense {model}", record)
                                                    for model, record in sorted(best_dense.items())]
    for label, record in rows:
        pooled = (record.recall * searched + record.validation_recall * held_out) / settings["queries"]
        print(f"| {label} (trial {record.number}) | {described(record)} | {record.validation_recall:.1%} | "
              f"{record.recall:.1%} | {pooled:.1%} |")
    minilm = best_dense.get("all-MiniLM-L6-v2")
    if minilm is None:
        print("\nno dense MiniLM trial in the study: nothing to compare with")
        return False
    gap = (recommended.validation_recall - minilm.validation_recall) * 100
    met = gap >= STUDY_BAR
    print(f"\nthe recommendation against MiniLM's best dense trial, held out: {gap:+.1f} points "
          f"(bar: +{STUDY_BAR:.0f}): {'met' if met else 'not met'}")
    return met


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in ("build", "run", "study"):
        sub = commands.add_parser(command)
        sub.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"where to build ({DEFAULT_ROOT})")
        sub.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help=f"the document ({DEFAULT_SOURCE})")
        if command == "run":
            sub.add_argument("--embedders", nargs="+", choices=sorted(EMBEDDERS), default=["minilm", "e5", "use"])
            sub.add_argument("-k", type=int, default=5)
        if command == "study":
            sub.add_argument("--name", default="ko-default", help="the study's name (ko-default)")
    return parser


def main() -> int:
    args = parser().parse_args()
    try:
        if args.command == "build":
            build(args.root.expanduser().resolve(), args.source)
        elif args.command == "study":
            return 0 if study(args.root.expanduser().resolve(), args.source, args.name) else 1
        else:
            run(args.root.expanduser().resolve(), args.source, args.embedders, args.k)
    except BenchError as exc:
        print(f"ko_chroma: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
