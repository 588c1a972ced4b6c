"""The ``chunkwise`` command line.

Each sub-command is a small function over the Python API. Problems with input raise
:class:`~tuner.errors.ChunkwiseError`; :func:`main` prints their message and exits
with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ._version import __version__
from .errors import ChunkwiseError, InvalidParameterError
from .files import read_yaml, write_atomically

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``chunkwise`` console script."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.handler(args) or 0
    except ChunkwiseError as exc:
        print(f"chunkwise: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("chunkwise: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


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
    evaluate.add_argument("-k", type=int, help="chunks retrieved per query (default 5)")
    evaluate.add_argument("--unit", choices=("tokens", "chars"),
                          help="scoring unit: cl100k tokens (default) or characters")
    evaluate.add_argument("--scope", choices=("pooled", "per-corpus"),
                          help="retrieve from one index of all corpora (default) or per corpus")
    evaluate.add_argument("--index", choices=("numpy", "chroma"),
                          help="exact numpy search (default) or chromadb (HNSW)")
    evaluate.add_argument("--index-path", metavar="DIR",
                          help="persistent chromadb folder for --index chroma (default: in memory)")
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
    tune.add_argument("--space", metavar="FILE", help="search space YAML (default: search_spaces/default.yaml)")
    tune.add_argument("--embedder", metavar="PROVIDER[:MODEL]", help="embedder for every trial")
    tune.add_argument("--base-url", help="OpenAI-compatible endpoint for --embedder openai")
    tune.add_argument("--unit", choices=("tokens", "chars"), help="scoring unit")
    tune.add_argument("--weights", metavar="recall=W,iou=W,latency=W,cost=W",
                      help="weights of the score (default 1, 0.5, 0.1, 0.1)")
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
    worker.add_argument("--corpus", metavar="PATH", help="corpus path on this machine (default: the study's)")
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
    export.add_argument("--trial", type=int, metavar="N", help="trial number (default: highest weighted score)")
    export.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default: sqlite:///studies/NAME.db)")
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the JSON")
    export.set_defaults(handler=_cmd_export)

    chunk = commands.add_parser(
        "chunk", help="chunk documents with an exported configuration",
        description="Chunk new documents with an exported configuration and write JSONL (text, document, "
                    "start and end offsets, token count); optionally build a persistent chromadb collection "
                    "with the configured embedder, ready to query.",
    )
    chunk.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or quoted globs")
    chunk.add_argument("--config", required=True, metavar="FILE", help="exported configuration (best.json)")
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
    return parser


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="URL",
                        help="SQLAlchemy URL (default: sqlite:///studies/NAME.db; postgresql+psycopg://... "
                             "to share a study between machines)")
    parser.add_argument("--n-trials", type=int, metavar="N", help="trials to add per corpus (30)")
    parser.add_argument("--jobs", type=int, metavar="N", help="worker processes sharing each study (1)")
    parser.add_argument("--seed", type=int, help="sampler seed; worker i uses seed + i (0)")
    parser.add_argument("--cache", metavar="FILE", help="embedding cache file")


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", action="append", required=True, metavar="[NAME=]PATH",
                        help="a corpus: a file, a folder or a quoted glob; repeat for several corpora")
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
    from .corpus import load_corpus
    from .evalset import load_evaluation_set

    corpora = []
    for spec in args.corpus:
        name, sep, path = spec.partition("=")
        if not sep or "/" in name or not name:
            name, path = None, spec
        corpora.append(load_corpus(path, name))
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
    from .config import EmbedderConfig, EvaluationConfig
    from .embedding import EmbeddingCache
    from .evaluation import evaluate

    config = _read_config(args.config) if args.config else EvaluationConfig()
    embedder = None
    if args.embedder or args.base_url:
        embedder = EmbedderConfig.parse(args.embedder or config.embedder.provider)
        if args.base_url:
            embedder = EmbedderConfig(embedder.provider, embedder.model, args.base_url, embedder.dimensions)
    params = dict(_parse_param(p) for p in args.param)
    corpora, evalset = _load_data(args)
    cache = None if args.no_cache else EmbeddingCache(args.cache) if args.cache else True
    result = evaluate(corpora, evalset, config, chunker=args.chunker, k=args.k, unit=args.unit,
                      scope=args.scope, index=args.index, embedder=embedder, cache=cache,
                      index_path=args.index_path, progress=not args.json, **params)
    for note in result.notes:
        print(f"chunkwise: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_result(result))
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from .config import EmbedderConfig
    from .tuning import StudySpec, Weights, load_study_file, tune
    from .tuning.storage import absolute_url

    if args.study_file:
        spec = load_study_file(args.study_file)
    else:
        missing = [flag for flag, value in (("--name", args.name), ("--corpus", args.corpus),
                                            ("--queries", args.queries)) if not value]
        if missing:
            raise ChunkwiseError(f"without a study file, tune needs {', '.join(missing)}")
        spec = StudySpec(name=args.name, corpora=tuple(_corpus_specs(args.corpus)), queries=args.queries,
                         space=args.space or "search_spaces/default.yaml")
    embedder = None
    if args.embedder or args.base_url:
        embedder = EmbedderConfig.parse(args.embedder or spec.embedder.provider)
        if args.base_url:
            embedder = EmbedderConfig(embedder.provider, embedder.model, args.base_url, embedder.dimensions)
    spec = spec.with_overrides(
        name=args.name, corpora=tuple(_corpus_specs(args.corpus)) if args.corpus else None,
        queries=args.queries, space=args.space, embedder=embedder, unit=args.unit,
        weights=Weights.parse(args.weights) if args.weights else None,
        storage=absolute_url(args.storage) if args.storage else None, trials=args.n_trials, jobs=args.jobs,
        seed=args.seed, cache=args.cache)
    import optuna

    # The progress bar reports trials, and failed trials are reported in one line each.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        outcomes = tune(spec, progress=True, echo=lambda line: print(line, file=sys.stderr))
    except KeyboardInterrupt:
        print(f"chunkwise: interrupted; completed trials are saved in {spec.storage}. "
              "Run the same command to resume.", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(format_outcomes(spec, outcomes))
    return 0


def _corpus_specs(values: list[str]) -> list[tuple[str, str]]:
    out = []
    for spec in values:
        name, sep, path = spec.partition("=")
        if not sep or "/" in name or not name:
            path = spec
            name = Path(spec.rstrip("/")).stem
        out.append((name, path))
    return out


def format_outcomes(spec, outcomes) -> str:
    """The end-of-run summary: best configuration per corpus and what to do next."""
    lines = ["", "best configuration per corpus (highest weighted score):"]
    for item in outcomes:
        lines.append(f"  {item.corpus}  (study {item.study}: {item.complete} complete, {item.failed} failed)")
        best = item.best
        if best is None:
            lines.append("    no complete trial yet")
            continue
        params = ", ".join(f"{k}={v!r}" for k, v in best["params"].items() if k != "separators")
        lines.append(f"    {best['chunker']}({params}), k={best['k']}   [trial {best['number']}]")
        lines.append(
            f"    score {best['score']:.4f}   recall {best['recall'] * 100:.1f}%   IoU {best['iou'] * 100:.2f}%   "
            f"precision-Ω {best['precision_omega'] * 100:.1f}%   latency {best['latency_ms']:.0f} ms   "
            f"cost ${best['cost_usd_per_1k_queries']:.3f}/1k queries")
    lines += ["", "next:", f"  chunkwise dashboard --storage {spec.storage}"]
    for item in outcomes:
        lines.append(f"  chunkwise export --storage {spec.storage} --study {spec.name} --corpus {item.corpus} "
                     f"-o {item.corpus}-best.json")
    return "\n".join(lines)


def _cmd_worker(args: argparse.Namespace) -> int:
    import optuna

    from .tuning.runner import WorkerOptions, run_worker
    from .tuning.storage import absolute_url, make_storage
    from .tuning.study import TARGET_ATTR, StudyError

    url = absolute_url(args.storage)
    storage = make_storage(url, heartbeat_interval=None)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage=storage, include_best_trial=False)]
    studies = [args.study] if args.study in names else [n for n in names if n.startswith(args.study + "/")]
    if not studies:
        raise StudyError(f"no study {args.study!r} in {url}; studies there: {', '.join(names) or 'none'}")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    for name in studies:
        study = optuna.load_study(study_name=name, storage=storage)
        complete = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
        target = study.user_attrs.get(TARGET_ATTR, complete)
        if args.n_trials:
            target = max(target, complete) + args.n_trials
            study.set_user_attr(TARGET_ATTR, target)
        print(f"study {name}: {complete} complete, target {target}", file=sys.stderr)
        cores = os.cpu_count() or 1
        options = [WorkerOptions(url, name, seed + i, target, max(1, cores // args.jobs), cache=args.cache,
                                 corpus_path=args.corpus, queries_path=args.queries) for i in range(args.jobs)]
        if args.jobs == 1:
            run_worker(options[0])
        else:
            from joblib import Parallel, delayed

            Parallel(n_jobs=args.jobs, backend="loky")(delayed(run_worker)(o) for o in options)
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from .tuning.storage import absolute_url, make_storage

    url = absolute_url(args.storage) if args.storage else _only_local_storage()
    storage = make_storage(url, heartbeat_interval=None)
    import optuna_dashboard

    print(f"optuna-dashboard on {url}: http://{args.host}:{args.port}/ (Ctrl-C to stop)", file=sys.stderr)
    try:
        optuna_dashboard.run_server(storage, host=args.host, port=args.port)
    except OSError as exc:
        raise ChunkwiseError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        pass
    return 0


def _only_local_storage() -> str:
    found = sorted(Path("studies").glob("*.db"))
    if len(found) != 1:
        names = ", ".join(str(p) for p in found) or "none"
        raise ChunkwiseError(f"give --storage URL (studies/*.db here: {names})")
    return f"sqlite:///{found[0].resolve()}"


def _existing_run_storage(name: str, storage: str | None) -> str:
    """The storage URL of run ``name`` (default ``sqlite:///studies/NAME.db``); a SQLite
    file that does not exist is an error rather than a new, empty database."""
    from .tuning.storage import absolute_url, default_storage_url

    url = absolute_url(storage or default_storage_url(name))
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        raise ChunkwiseError(f"no study storage at {url}; give --storage URL")
    return url


def _cmd_export(args: argparse.Namespace) -> int:
    import optuna

    from .export import export_trial
    from .tuning import best_trial
    from .tuning.storage import make_storage
    from .tuning.study import StudyError

    name, _, corpus = args.study.partition("/")
    corpus = corpus or args.corpus
    url = _existing_run_storage(name, args.storage)
    storage = make_storage(url, heartbeat_interval=None)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage=storage, include_best_trial=False)]
    candidates = [n for n in names if n.startswith(name + "/") and (corpus is None or n == f"{name}/{corpus}")]
    if len(candidates) != 1:
        corpora = [n.split("/", 1)[1] for n in names if n.startswith(name + "/")]
        hint = f"corpora of {name!r}: {', '.join(corpora)}" if corpora else f"studies there: {', '.join(names)}"
        what = "pick one with --corpus" if len(candidates) > 1 else "no such study"
        raise StudyError(f"{what} ({hint})")
    study = optuna.load_study(study_name=candidates[0], storage=storage)
    if args.trial is None:
        trial = best_trial(study)
        if trial is None:
            raise StudyError(f"study {candidates[0]!r} has no complete trial yet")
    else:
        matches = [t for t in study.get_trials(deepcopy=False) if t.number == args.trial]
        if not matches or matches[0].state != optuna.trial.TrialState.COMPLETE:
            raise StudyError(f"study {candidates[0]!r} has no complete trial {args.trial}")
        trial = matches[0]
    data = export_trial(study, trial, url, args.output)
    params = ", ".join(f"{k}={v!r}" for k, v in data["config"]["chunker"]["params"].items() if k != "separators")
    print(f"wrote {args.output}: trial {trial.number} of {study.study_name}, "
          f"{data['config']['chunker']['name']}({params}), k={data['config']['retrieval']['k']}, "
          f"score {data['metrics'].get('score', float('nan')):.4f}")
    return 0


def _cmd_chunk(args: argparse.Namespace) -> int:
    from .embedding import EmbeddingCache
    from .export import load_config
    from .production import build_collection, chunk_paths, write_chunks_jsonl

    if bool(args.chroma) != bool(args.collection):
        raise ChunkwiseError("--chroma DIR and --collection NAME go together")
    config = load_config(args.config)
    chunks = list(chunk_paths(config, args.paths))
    if args.output:
        buffer = io.StringIO()
        count = write_chunks_jsonl(chunks, buffer)
        write_atomically(args.output, buffer.getvalue())
        print(f"wrote {count} chunks to {args.output}", file=sys.stderr)
    elif not args.chroma:
        write_chunks_jsonl(chunks, sys.stdout)
    if args.chroma:
        cache = EmbeddingCache(args.cache) if args.cache else None
        collection = build_collection(config, args.paths, args.chroma, args.collection, cache=cache,
                                      replace=args.replace)
        print(f"collection {args.collection!r} in {args.chroma}: {collection.collection.count()} chunks, "
              f"query with k={collection.k}", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .embedding import EmbeddingCache
    from .report import write_report
    from .tuning.storage import make_storage

    name = args.study.split("/", 1)[0]
    url = _existing_run_storage(name, args.storage)
    cache = EmbeddingCache(args.cache) if args.cache else None
    path = write_report(make_storage(url, heartbeat_interval=None), args.study, args.output, top=args.top,
                        bootstrap=args.bootstrap, cache=cache, plotly_js=args.plotly)
    print(f"wrote {path} and its plots", file=sys.stderr)
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from .config import EmbedderConfig
    from .corpus import load_corpus
    from .embedding import EmbeddingCache
    from .evalset import load_evaluation_set
    from .generate import format_distributions, generate_evaluation_set, similarity_distributions
    from .llm import LLMClient

    corpus = load_corpus(args.corpus, args.name)
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


def _cmd_validate(args: argparse.Namespace) -> int:
    from .files import is_stdout

    _, evalset = _load_data(args)
    references = sum(len(q.references) for q in evalset)
    # With -o - the JSONL goes to stdout, so the summary goes to stderr.
    to_stdout = bool(args.output) and is_stdout(args.output)
    print(f"{len(evalset)} queries, {references} references: all match their documents",
          file=sys.stderr if to_stdout else sys.stdout)
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


def _read_config(path: str):
    from .config import EvaluationConfig

    data = read_yaml(path, "configuration file")
    if isinstance(data, dict) and "config" in data and "chunker" not in data:
        data = data["config"]  # an exported configuration wraps the schema
    return EvaluationConfig.from_dict(data, where=path)


def format_result(result) -> str:
    """A plain-text table of an :class:`~tuner.evaluation.EvaluationResult`."""
    config = result.config
    params = ", ".join(f"{k}={v!r}" for k, v in config.chunker.params.items())
    lines = [
        f"chunker    {config.chunker.name}({params})",
        f"embedder   {config.embedder.provider}:{config.embedder.model}",
        f"retrieval  k={config.retrieval.k}, {config.retrieval.scope}, {config.retrieval.index}; "
        f"unit={config.unit}",
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
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
