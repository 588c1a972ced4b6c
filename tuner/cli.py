"""The ``chunkwise`` command line.

Each sub-command is a small function over the Python API. Problems with input raise
:class:`~tuner.errors.ChunkwiseError`; :func:`main` prints their message and exits
with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ._version import __version__
from .errors import ChunkwiseError, InvalidParameterError, environment_error_message
from .files import STDOUT, atomic_writer, check_writable, is_stdout
from .secrets import redact

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``chunkwise`` console script."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    _show_corpus_loading()
    try:
        return args.handler(args) or 0
    except ChunkwiseError as exc:
        print(f"chunkwise: error: {redact(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("chunkwise: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        # One rule for the environment's failures: a file system, database or chromadb error is
        # one clear message, not a traceback. Anything else is a bug and keeps its traceback.
        message = environment_error_message(exc)
        if message is None:
            raise
        print(f"chunkwise: error: {message}", file=sys.stderr)
        return EXIT_USAGE


class _StderrHandler(logging.Handler):
    """Prints a record as ``chunkwise: MESSAGE`` on the current ``sys.stderr`` (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"chunkwise: {record.getMessage()}", file=sys.stderr)


def _show_corpus_loading() -> None:
    """Print the corpus loader's one-line summaries (what a folder read and skipped, conversion
    warnings) on standard error, once per process however often :func:`main` runs."""
    logger = logging.getLogger("tuner.corpus")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chunkwise",
        description="Find the best chunking configuration for your documents.",
    )
    parser.add_argument("--version", action="version", version=f"chunkwise {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    evaluate = commands.add_parser(
        "evaluate", help="score one chunking configuration",
        description="Chunk the corpora, embed and index the chunks, retrieve the top k chunks "
                    "per query and print token-level recall, precision, IoU and precision-Omega.",
    )
    _add_data_arguments(evaluate)
    evaluate.add_argument("--config", metavar="FILE",
                          help="configuration file (YAML or JSON, chunkwise schema); flags override it")
    evaluate.add_argument("--chunker", help="chunker name (see `chunkwise chunkers`); default: recursive")
    evaluate.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                          help="chunker parameter, repeatable (e.g. -p size=250 -p overlap=0); "
                               "values are parsed as YAML (numbers, lists)")
    evaluate.add_argument("--embedder", metavar="PROVIDER[:MODEL]",
                          help="sentence-transformers[:MODEL_DIR] (default, bundled all-MiniLM-L6-v2) "
                               "or openai[:MODEL] (key from $OPENAI_API_KEY)")
    evaluate.add_argument("--base-url", help="OpenAI-compatible endpoint for --embedder openai")
    _add_precision_argument(evaluate)
    evaluate.add_argument("-k", type=int, help="chunks retrieved per query (default 5)")
    evaluate.add_argument("--unit", choices=("tokens", "chars"),
                          help="scoring unit: cl100k tokens (default) or characters")
    evaluate.add_argument("--copies", choices=("any", "marked"),
                          help="a reference whose text occurs more than once in its corpus is satisfied by any copy "
                               "(default) or only at its marked offsets")
    evaluate.add_argument("--scope", choices=("pooled", "per-corpus"),
                          help="retrieve from one index of all corpora (default) or per corpus")
    evaluate.add_argument("--index", choices=("numpy", "chroma"),
                          help="exact numpy search (default) or chromadb (HNSW)")
    evaluate.add_argument("--index-path", metavar="DIR",
                          help="persistent chromadb folder for --index chroma (default: in memory)")
    evaluate.add_argument("--method", choices=("dense", "bm25", "hybrid"),
                          help="retrieval: embeddings (dense, default), BM25 (embeds nothing), or both fused (hybrid)")
    evaluate.add_argument("--fusion", choices=("rrf", "weighted"),
                          help="how --method hybrid fuses: reciprocal-rank fusion (rrf, default) or weighted scores")
    evaluate.add_argument("--alpha", type=float, metavar="A",
                          help="weight of the dense score in --fusion weighted, in [0, 1] (0.5)")
    evaluate.add_argument("--rrf-k", type=int, metavar="K", help="constant of reciprocal-rank fusion, >= 0 (60)")
    evaluate.add_argument("--context", choices=("none", "title", "headings"),
                          help="header prepended to the text embedded and indexed (not to offsets or scores): "
                               "none (default), the document title, or the chunk's heading path")
    _add_cache_arguments(evaluate)
    evaluate.add_argument("--json", action="store_true", help="print machine-readable JSON")
    evaluate.set_defaults(handler=_cmd_evaluate)

    validate = commands.add_parser(
        "validate", help="check an evaluation set against its corpora; convert it to JSONL",
        description="Load an evaluation set (chunkwise JSONL or Chroma CSV), check that every "
                    "reference equals the document text at its offsets, and optionally write it "
                    "as chunkwise JSONL.",
    )
    _add_data_arguments(validate)
    validate.add_argument("-o", "--output", metavar="FILE", help="write the validated set as JSONL")
    validate.set_defaults(handler=_cmd_validate)

    chunkers = commands.add_parser("chunkers", help="list chunkers and their parameters")
    chunkers.set_defaults(handler=_cmd_chunkers)

    tune = commands.add_parser(
        "tune", help="search chunking configurations with Optuna (one study per corpus)",
        description="Run or resume one Optuna study per corpus: sample configurations from the search "
                    "space, score each on the evaluation set, and keep every result in SQL storage. "
                    "Re-running the same command resumes and adds --n-trials trials.",
    )
    tune.add_argument("study_file", nargs="?", metavar="STUDY.yaml",
                      help="study file (see studies/example.yaml); flags override its values")
    tune.add_argument("--name", help="study name (required without a study file)")
    tune.add_argument("--corpus", action="append", metavar="[NAME=]PATH",
                      help="a corpus to tune (repeatable); replaces the study file's corpora")
    tune.add_argument("--queries", metavar="FILE", help="evaluation set (JSONL or Chroma CSV)")
    _add_filter_arguments(tune)
    tune.add_argument("--space", metavar="FILE|NAME",
                      help="search space: a YAML file, or a bundled space by name (default, quick, semantic, llm, "
                           "structure, default-grid); default: default")
    tune.add_argument("--embedder", metavar="PROVIDER[:MODEL]", help="embedder for every trial")
    tune.add_argument("--base-url", help="OpenAI-compatible endpoint for --embedder openai")
    _add_precision_argument(tune)
    tune.add_argument("--unit", choices=("tokens", "chars"), help="scoring unit")
    tune.add_argument("--copies", choices=("any", "marked"),
                      help="repeated reference texts count at any copy (default) or only at the marked one")
    tune.add_argument("--validation", type=float, metavar="SHARE",
                      help="share of each corpus's questions held out of the search for the held-out check "
                           "(0.25; 0 turns it off)")
    tune.add_argument("--weights", metavar="recall=W,iou=W,latency=W,cost=W",
                      help="weights of the score (default 1, 0.5, 0.1, 0.1)")
    tune.add_argument("--fidelity", metavar="auto|full|RUNGS",
                      help="multi-fidelity search: 'full' evaluates every trial on the whole index; rungs such as "
                           "0.1,1 evaluate each trial on 10%% of the distractor chunks first and promote the best "
                           "third; 'auto' (default) uses 0.1,1 on corpora of 2 MB of text or more")
    tune.add_argument("--dry-run", action="store_true",
                      help="print what the run would embed and about how long it takes, then stop (no trial runs)")
    tune.add_argument("--repair-references", action="store_true",
                      help="re-locate references whose offsets do not match, when their text occurs exactly once "
                           "in the document (recorded in the study; workers repair the same way)")
    _add_run_arguments(tune)
    tune.set_defaults(handler=_cmd_tune)

    worker = commands.add_parser(
        "worker", help="join a running study from this machine",
        description="Run trials for an existing study (created by `chunkwise tune`) until it reaches its "
                    "target, e.g. on another machine sharing a PostgreSQL storage. The space, weights and "
                    "data paths come from the study; the data's hashes must match.",
    )
    worker.add_argument("--storage", required=True, metavar="URL", help="the study's SQLAlchemy URL")
    worker.add_argument("--study", required=True, metavar="NAME",
                        help="study name: NAME/CORPUS, or NAME for every corpus of that run")
    worker.add_argument("--corpus", metavar="PATH",
                        help="corpus path on this machine (default: the study's); its files are chosen with the "
                             "study's --include/--exclude patterns")
    worker.add_argument("--queries", metavar="FILE", help="evaluation set on this machine (default: the study's)")
    worker.add_argument("--n-trials", type=int, metavar="N",
                        help="raise the study's target by N trials (default: work toward the current target)")
    worker.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes on this machine (1)")
    worker.add_argument("--seed", type=int, default=None, help="sampler seed (default: random)")
    worker.add_argument("--cache", metavar="FILE", help="embedding cache file")
    worker.set_defaults(handler=_cmd_worker)

    dashboard = commands.add_parser(
        "dashboard", help="serve optuna-dashboard on a run's storage",
        description="Serve optuna-dashboard on the studies' storage: trials with their metrics as user "
                    "attributes, each corpus's Pareto front of recall against IoU, and a note per study.",
    )
    dashboard.add_argument("--storage", metavar="URL",
                           help="SQLAlchemy URL (default: the only studies/*.db in this folder)")
    dashboard.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    dashboard.add_argument("--port", type=int, default=8080, help="port (8080)")
    dashboard.set_defaults(handler=_cmd_dashboard)

    export = commands.add_parser(
        "export", help="write the best (or a chosen) trial's configuration to a file",
        description="Write a versioned configuration (chunker and parameters, embedder, k, the metrics it "
                    "scored, corpus and evaluation-set hashes, package versions). Load it in production "
                    "with tuner.load_chunker(PATH) or `chunkwise chunk --config PATH`.",
    )
    export.add_argument("--study", required=True, metavar="NAME", help="run name (or NAME/CORPUS)")
    export.add_argument("--corpus", metavar="ID", help="corpus of the run (optional when it has one)")
    export.add_argument("--trial", type=int, metavar="N",
                        help="trial number (default: the recommended one, the cheapest configuration statistically "
                             "tied with the best)")
    export.add_argument("--best", action="store_true", help="the highest-scoring trial instead of the recommended one")
    export.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///studies/NAME.db)")
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the JSON")
    export.set_defaults(handler=_cmd_export)

    chunk = commands.add_parser(
        "chunk", help="chunk documents with an exported configuration",
        description="Chunk new documents with an exported configuration and write JSONL (text, document, "
                    "start and end offsets, token count); optionally build a persistent chromadb collection "
                    "with the configured embedder (and the BM25 index a bm25 or hybrid configuration needs), "
                    "ready to query as the configuration was scored.",
    )
    chunk.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or quoted globs")
    chunk.add_argument("--config", required=True, metavar="FILE", help="exported configuration (best.json)")
    _add_filter_arguments(chunk)
    chunk.add_argument("-o", "--output", metavar="FILE", help="write chunks as JSONL here (default: stdout)")
    chunk.add_argument("--chroma", metavar="DIR", help="also build a persistent chromadb collection in DIR")
    chunk.add_argument("--collection", metavar="NAME", help="collection name (with --chroma)")
    chunk.add_argument("--replace", action="store_true", help="rebuild the collection if it exists")
    chunk.add_argument("--cache", metavar="FILE", help="embedding cache file (with --chroma)")
    chunk.set_defaults(handler=_cmd_chunk)

    report = commands.add_parser(
        "report", help="write Pareto plots and a markdown summary of a run",
        description="For each corpus of a run: Pareto fronts of recall against IoU and against cost (PNG and "
                    "interactive HTML) with the best configuration and well-known defaults marked, and a "
                    "markdown summary with the Pareto-optimal configurations, the best against the token "
                    "800/400 default, and bootstrap confidence intervals over queries.",
    )
    report.add_argument("--study", required=True, metavar="NAME", help="run name (or NAME/CORPUS)")
    report.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///studies/NAME.db)")
    report.add_argument("-o", "--output", default="report", metavar="DIR", help="output folder (./report)")
    report.add_argument("--top", type=int, default=5, help="configurations with confidence intervals (5)")
    report.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (2000)")
    report.add_argument("--cache", metavar="FILE", help="embedding cache file")
    report.add_argument("--plotly", choices=("inline", "cdn"), default="inline",
                        help="HTML plots embed plotly.js (inline: offline, ~4 MB each) or load it from its CDN")
    report.set_defaults(handler=_cmd_report)

    generate = commands.add_parser(
        "generate", help="generate an evaluation set from a corpus with an LLM",
        description="Ask an OpenAI-compatible model for specific questions about sampled passages and their exact "
                    "excerpts; keep a query only if every excerpt is found in the document, then drop "
                    "near-duplicates and weakly supported queries. Appends to the output, so re-running continues "
                    "toward --n.",
    )
    generate.add_argument("corpus", metavar="CORPUS", help="the corpus: a file, a folder or a quoted glob")
    generate.add_argument("-o", "--output", required=True, metavar="FILE", help="evaluation set (JSONL) to write")
    generate.add_argument("--name", help="corpus name (default: the file or folder name)")
    _add_filter_arguments(generate)
    generate.add_argument("--n", type=int, default=50, help="accepted queries wanted (50)")
    generate.add_argument("--model", help="LLM (default: $CHUNKWISE_LLM_MODEL or gpt-4o-mini)")
    generate.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI)")
    generate.add_argument("--passage-chars", type=int, default=4000, help="characters per sampled passage (4000)")
    generate.add_argument("--duplicate-threshold", type=float, default=0.9,
                          help="drop a question this similar to an earlier one (cosine, 0.9)")
    generate.add_argument("--relevance-threshold", type=float, default=0.3,
                          help="drop a query whose weakest excerpt is less similar to it (cosine, 0.3)")
    generate.add_argument("--embedder", metavar="PROVIDER[:MODEL]", help="embedder for the filters (bundled MiniLM)")
    generate.add_argument("--max-attempts", type=int, help="requests at most (5 x --n)")
    generate.add_argument("--price-in", type=float, default=0.15, help="$ per million prompt tokens (0.15)")
    generate.add_argument("--price-out", type=float, default=0.60, help="$ per million completion tokens (0.60)")
    generate.add_argument("--seed", type=int, default=0, help="passage sampling seed (0)")
    generate.add_argument("--calibrate", action="store_true",
                          help="print the similarity distributions of the output's queries instead of generating")
    generate.set_defaults(handler=_cmd_generate)

    convert = commands.add_parser(
        "convert", help="convert documents (PDF, HTML, DOCX, ...) to the text chunkwise reads",
        description="Convert a file, folder or glob of documents to text exactly as every other command reads them, "
                    "and write each document's text to DIR/<its path>.md (text files are copied as they are): "
                    "the text to read, and to write evaluation-set references against. References keep the "
                    "original path as their document id (report.pdf, not report.pdf.md).",
    )
    convert.add_argument("source", metavar="SRC", help="a file, a folder or a quoted glob")
    convert.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write the texts into")
    _add_filter_arguments(convert)
    convert.add_argument("--stats", action="store_true",
                         help="print per converted file the share of its text removed as furniture")
    convert.set_defaults(handler=_cmd_convert)
    return parser


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="URL",
                        help="SQLAlchemy URL (default: sqlite:///studies/NAME.db; postgresql+psycopg://... "
                             "to share a study between machines)")
    parser.add_argument("--n-trials", type=int, metavar="N", help="trials to add per corpus (30)")
    parser.add_argument("--jobs", type=int, metavar="N", help="worker processes sharing each study (1)")
    parser.add_argument("--seed", type=int, help="sampler seed; worker i uses seed + i (0)")
    parser.add_argument("--cache", metavar="FILE", help="embedding cache file")


def _add_precision_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", choices=("fp32", "bf16", "int8"),
                        help="numeric precision of a local model (default fp32; bf16 and int8 are faster but change "
                             "the vectors slightly, see BENCHMARKS.md; each has its own cache entries)")


def _add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include", action="append", metavar="GLOB",
                        help="read only the files of a folder or glob matching GLOB (repeatable; a pattern without / "
                             "matches file names, e.g. '*.pdf')")
    parser.add_argument("--exclude", action="append", metavar="GLOB",
                        help="leave out the files of a folder or glob matching GLOB (repeatable; e.g. 'drafts/*')")
    parser.add_argument("--keep-links", action="store_true",
                        help="converted HTML, DOCX and EPUB keep links as [text](url) (default: their text only)")


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", action="append", required=True, metavar="[NAME=]PATH",
                        help="a corpus: a file, a folder or a quoted glob; repeat for several corpora")
    _add_filter_arguments(parser)
    parser.add_argument("--queries", required=True, metavar="FILE",
                        help="evaluation set: chunkwise JSONL or Chroma CSV")
    parser.add_argument("--repair-references", action="store_true",
                        help="re-locate references whose offsets do not match, when their text "
                             "occurs exactly once in the document")


def _add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", metavar="FILE",
                        help="embedding cache file (default: $CHUNKWISE_CACHE_DIR/embeddings.sqlite3 "
                             "or ~/.cache/chunkwise/embeddings.sqlite3)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")


def _load_data(args: argparse.Namespace):
    from .corpus import load_corpus, parse_corpus_spec
    from .evalset import load_evaluation_set

    corpora = [load_corpus(path, name, include=args.include or (), exclude=args.exclude or (),
                           keep_links=args.keep_links) for name, path in map(parse_corpus_spec, args.corpus)]
    names = [c.name for c in corpora]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ChunkwiseError(
            f"several corpora are named {', '.join(duplicates)}; name them with --corpus NAME=PATH")
    evalset = load_evaluation_set(args.queries, corpora, repair=args.repair_references)
    if evalset.repaired:
        print(f"repaired {evalset.repaired} reference offset(s)", file=sys.stderr)
    return corpora, evalset


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from .config import EvaluationConfig
    from .embedding import EmbeddingCache
    from .evaluation import evaluate
    from .export import load_config

    config = load_config(args.config).config if args.config else EvaluationConfig()
    embedder = config.embedder.overridden(args.embedder, args.base_url, args.precision)
    params = dict(_parse_param(p) for p in args.param)
    corpora, evalset = _load_data(args)
    cache = None if args.no_cache else EmbeddingCache(args.cache) if args.cache else True
    result = evaluate(corpora, evalset, config, chunker=args.chunker, k=args.k, unit=args.unit,
                      scope=args.scope, index=args.index, embedder=embedder, cache=cache,
                      index_path=args.index_path, progress=not args.json, copies=args.copies, method=args.method,
                      fusion=args.fusion, alpha=args.alpha, rrf_k=args.rrf_k, context=args.context, **params)
    for note in result.notes:
        print(f"chunkwise: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_result(result))
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from .tuning import tune
    from .tuning.progress import format_summary
    from .tuning.study import build_spec

    spec = build_spec(args.study_file, name=args.name, corpora=args.corpus, queries=args.queries, space=args.space,
                      embedder=args.embedder, base_url=args.base_url, unit=args.unit, copies=args.copies,
                      validation=args.validation, weights=args.weights,
                      storage=args.storage, trials=args.n_trials, jobs=args.jobs, seed=args.seed, cache=args.cache,
                      repair_references=args.repair_references, include=args.include, exclude=args.exclude,
                      keep_links=args.keep_links, fidelity=args.fidelity, precision=args.precision)
    _quiet_optuna()
    if args.dry_run:
        from .tuning.plan import format_plan, plan_run

        print(format_plan(spec, plan_run(spec)))
        return 0
    try:
        outcomes = tune(spec, progress=True, echo=_print_err)
    except KeyboardInterrupt:
        from .tuning.storage import display_url

        _print_err(f"chunkwise: interrupted; completed trials are saved in {display_url(spec.storage)}. "
                   "Run the same command to resume.")
        return EXIT_INTERRUPTED
    print(format_summary(spec.name, spec.storage, outcomes))
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from .tuning import join_run
    from .tuning.storage import absolute_url

    _quiet_optuna()
    try:
        join_run(absolute_url(args.storage), args.study, n_trials=args.n_trials, jobs=args.jobs, seed=args.seed,
                 cache=args.cache, corpus_path=args.corpus, queries_path=args.queries, echo=_print_err)
    except KeyboardInterrupt:
        _print_err("chunkwise: interrupted; completed trials are saved in the study")
        return EXIT_INTERRUPTED
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from .tuning.storage import absolute_url, check_port_free, make_storage, only_local_storage

    url = absolute_url(args.storage) if args.storage else only_local_storage()
    check_port_free(args.host, args.port)
    storage = make_storage(url)
    import optuna_dashboard

    _print_err(f"optuna-dashboard on {storage.display_url}: http://{args.host}:{args.port}/ (Ctrl-C to stop)")
    try:
        optuna_dashboard.run_server(storage, host=args.host, port=args.port)
    except OSError as exc:
        raise ChunkwiseError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import export_run_trial

    exported = export_run_trial(args.study, args.output, corpus=args.corpus, trial=args.trial, best=args.best,
                                storage=args.storage)
    print(f"wrote {args.output}: trial {exported.record.number} of {exported.study} ({exported.why}), "
          f"{exported.record.describe()}, score {exported.record.score:.4f}",
          file=sys.stderr if is_stdout(args.output) else sys.stdout)
    return 0


def _cmd_chunk(args: argparse.Namespace) -> int:
    """Chunk documents; write JSONL (-o or stdout) and/or build a chromadb collection.

    With both -o and --chroma, the collection is built first and -o is written only once
    it is in place, so a failed build leaves neither; every check that needs no embedding
    (collection name, "exists without --replace", the -o folder) runs before any work.
    """
    from .embedding import EmbeddingCache
    from .export import load_config
    from .production import build_collection, check_collection_target, chunk_paths, write_chunks_jsonl

    if bool(args.chroma) != bool(args.collection):
        raise ChunkwiseError("--chroma DIR and --collection NAME go together")
    config = load_config(args.config)
    if args.output:
        check_writable(args.output)
    if args.chroma:
        check_collection_target(args.chroma, args.collection, replace=args.replace)
    chunks = list(chunk_paths(config, args.paths, include=args.include or (), exclude=args.exclude or (),
                              keep_links=args.keep_links))
    if args.chroma:
        cache = EmbeddingCache(args.cache) if args.cache else None
        collection = build_collection(config, args.paths, args.chroma, args.collection, cache=cache,
                                      replace=args.replace, chunks=chunks)
        print(f"collection {args.collection!r} in {args.chroma}: {collection.collection.count()} chunks, "
              f"query with {config.config.retrieval.describe()}, k={collection.k}", file=sys.stderr)
    if args.output or not args.chroma:
        try:
            with atomic_writer(args.output or STDOUT) as out:
                count = write_chunks_jsonl(chunks, out)
        except ChunkwiseError as exc:
            built = f" (collection {args.collection!r} in {args.chroma} was built)" if args.chroma else ""
            raise ChunkwiseError(f"{exc}{built}") from None
        if args.output and not is_stdout(args.output):
            print(f"wrote {count} chunks to {args.output}", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .embedding import EmbeddingCache
    from .report import write_report

    cache = EmbeddingCache(args.cache) if args.cache else None
    path = write_report(args.study, args.output, storage=args.storage, top=args.top, bootstrap=args.bootstrap,
                        cache=cache, plotly_js=args.plotly, echo=_print_err)
    _print_err(f"wrote {path} and its plots")
    return 0


def _print_err(message: str) -> None:
    print(message, file=sys.stderr)


def _quiet_optuna() -> None:
    import optuna

    # The progress bar reports trials, and failed trials are reported in one line each.
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def _cmd_generate(args: argparse.Namespace) -> int:
    from .config import EmbedderConfig
    from .corpus import load_corpus
    from .embedding import EmbeddingCache
    from .evalset import load_evaluation_set
    from .generate import format_distributions, generate_evaluation_set, similarity_distributions
    from .llm import LLMClient

    corpus = load_corpus(args.corpus, args.name, include=args.include or (), exclude=args.exclude or (),
                         keep_links=args.keep_links)
    embedder = (EmbedderConfig.parse(args.embedder) if args.embedder else EmbedderConfig()).build(EmbeddingCache())
    if args.calibrate:
        if not Path(args.output).is_file():
            raise ChunkwiseError(f"{args.output} does not exist: generate queries first, then calibrate on them")
        evalset = load_evaluation_set(args.output, corpus)
        print(f"{len(evalset)} queries in {args.output}")
        print(format_distributions(similarity_distributions(evalset, embedder)))
        return 0
    if args.n < 1:
        raise InvalidParameterError(f"--n={args.n} is invalid; allowed: an integer >= 1")
    client = LLMClient(model=args.model, base_url=args.base_url)
    report = generate_evaluation_set(
        corpus, args.output, args.n, client, embedder, passage_chars=args.passage_chars,
        duplicate_threshold=args.duplicate_threshold, relevance_threshold=args.relevance_threshold, seed=args.seed,
        max_attempts=args.max_attempts, price_in=args.price_in, price_out=args.price_out, progress=True,
        echo=lambda line: print(line, file=sys.stderr))
    rejected = ", ".join(f"{reason}: {count}" for reason, count in report.rejected.most_common()) or "none"
    print(f"{args.output}: {report.already + report.accepted} queries ({report.accepted} new from "
          f"{report.attempts} requests; rejected: {rejected})")
    print(f"model {client.model}: {report.prompt_tokens} prompt + {report.completion_tokens} completion tokens, "
          f"{report.tokens_per_accepted:.0f} per accepted query, about ${report.cost_usd:.4f}")
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from .convert import furniture_report, write_text_corpus
    from .corpus import load_corpus

    corpus = load_corpus(args.source, include=args.include or (), exclude=args.exclude or (),
                         keep_links=args.keep_links)
    written = write_text_corpus(corpus, args.output)
    converted = sum(d.conversion is not None for d in corpus)
    print(f"wrote {len(written)} document text(s) to {args.output} ({converted} converted, "
          f"{len(written) - converted} text file(s) copied); references use the original paths as document ids")
    if args.stats:
        print(furniture_report(corpus))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from .repeats import OccurrenceTable

    corpora, evalset = _load_data(args)
    references = sum(len(q.references) for q in evalset)
    # With -o - the JSONL goes to stdout, so the summary goes to stderr.
    to_stdout = bool(args.output) and is_stdout(args.output)
    print(f"{len(evalset)} queries, {references} references: all match their documents",
          file=sys.stderr if to_stdout else sys.stdout)
    if repeated := OccurrenceTable.build(evalset, corpora).summary().describe():
        print(repeated, file=sys.stderr if to_stdout else sys.stdout)
    if args.output:
        evalset.write_jsonl(args.output)
        if not to_stdout:
            print(f"wrote {args.output}")
    elif evalset.repaired:
        print("nothing was written: the repairs are in memory only; add -o FILE to save the repaired "
              "evaluation set (e.g. -o fixed.jsonl)", file=sys.stderr)
    return 0


def _cmd_chunkers(args: argparse.Namespace) -> int:
    from .chunkers import chunker_class, chunker_names

    for name in chunker_names():
        cls = chunker_class(name)
        summary = (cls.__doc__ or "").strip().split("\n\n")[0].replace("``", "")
        marker = " (semantic: embeds units with the configured embedder)" if cls.needs_embedder else ""
        print(f"{name}{marker}\n  {' '.join(summary.split())}")
        rows = []
        for param_name, spec in cls.param_specs().items():
            field = cls.__dataclass_fields__[param_name]
            value = field.default_factory() if callable(field.default_factory) else field.default
            rows.append((param_name, spec.describe(), repr(list(value) if isinstance(value, tuple) else value),
                         spec.help))
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for row in rows:
            print("    " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
        print()
    return 0


def _parse_param(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise InvalidParameterError(f"--param {text!r} must look like NAME=VALUE")
    try:
        return name.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        return name.strip(), value


def format_result(result) -> str:
    """A plain-text table of an :class:`~tuner.evaluation.EvaluationResult`."""
    config = result.config
    params = ", ".join(f"{k}={v!r}" for k, v in config.chunker.params.items())
    lines = [
        f"chunker    {config.chunker.name}({params})",
        f"embedder   {config.embedder.provider}:{config.embedder.model}",
        f"retrieval  {config.retrieval.describe()}, k={config.retrieval.k}, {config.retrieval.scope}, "
        f"{config.retrieval.index}; "
        f"unit={config.unit}, copies={config.copies}",
        "",
    ]
    header = f"{'corpus':<24}{'queries':>8}{'recall':>16}{'precision':>16}{'IoU':>16}{'precision-Ω':>16}"
    lines += [header, "-" * len(header)]
    rows = dict(result.metrics.get("per_corpus", {}))
    counts = {name: result.query_corpora.count(name) for name in rows}
    if len(rows) > 1 or not rows:
        rows["all"] = result.metrics["overall"]
        counts["all"] = len(result.query_corpora)
    for name, metrics in rows.items():
        cells = "".join(
            f"{metrics[m]['mean'] * 100:>9.2f} ± {metrics[m]['std'] * 100:<4.1f}"
            for m in ("recall", "precision", "iou", "precision_omega"))
        lines.append(f"{name:<24}{counts[name]:>8}{cells}")
    stats = result.chunk_stats
    emb = result.embedding
    lines += [
        "",
        f"chunks     {stats['chunks']} (mean {stats['mean_chunk_tokens']:.1f} tokens, "
        f"max {stats['max_chunk_tokens']})",
        f"embedding  {emb['texts']} texts, {emb['tokens']} tokens; cache hit rate "
        f"{emb['cache_hit_rate'] * 100:.1f}%",
        "time       " + ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items()),
        "(metrics in percent: mean ± standard deviation over queries)",
    ]
    if result.repeats is not None and (repeated := result.repeats.describe()):
        lines.append(repeated)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
