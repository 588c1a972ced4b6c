"""``chunkwise tune``."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from ..errors import ChunkwiseError, WorkerStopped
from ..evaluation.config import COPIES
from ..evaluation.metrics import UNITS
from ..tuning.study import defaults
from ._args import (
    add_filter_arguments,
    add_precision_argument,
    add_run_arguments,
    print_err,
    quiet_optuna,
    report_stop,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
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
    add_filter_arguments(tune)
    tune.add_argument("--space", metavar="FILE|NAME",
                      help="search space: a YAML file, or a bundled space by name (default, quick, semantic, llm, "
                           "structure, default-grid, default-inner); default: default")
    tune.add_argument("--embedder", metavar="PROVIDER[:MODEL]", help="embedder for every trial")
    tune.add_argument("--base-url", help="OpenAI-compatible endpoint for --embedder openai")
    add_precision_argument(tune)
    tune.add_argument("--unit", choices=UNITS, help="scoring unit")
    tune.add_argument("--copies", choices=COPIES,
                      help="repeated reference texts count at any copy (default) or only at the marked one")
    tune.add_argument("--validation", type=float, metavar="SHARE",
                      help="share of each corpus's questions held out of the search for the held-out check "
                           f"({defaults.VALIDATION}; 0 turns it off)")
    tune.add_argument("--weights", metavar="recall=W,iou=W,latency=W,cost=W",
                      help="weights of the score (default recall 1, iou 0.5, latency 0.1, cost 0.1; any metric may be "
                           "weighed, e.g. mrr=1,ndcg=0.5,context_tokens=0.2)")
    tune.add_argument("--max-context-tokens", type=float, metavar="N",
                      help="context budget: never recommend a configuration whose retrieved chunks exceed N cl100k "
                           "tokens per question on average (those trials are kept and shown)")
    tune.add_argument("--pareto", metavar="METRIC,METRIC",
                      help="the Pareto front's axes for a new study (default recall,context_tokens; e.g. recall,iou)")
    tune.add_argument("--fidelity", metavar="auto|full|RUNGS",
                      help="multi-fidelity search: 'full' evaluates every trial on the whole index; rungs such as "
                           "0.1,1 evaluate each trial on 10%% of the distractor chunks first and promote the best "
                           "third; 'auto' (default) screens dense and hybrid trials with the late-chunking proxy and "
                           "confirms its best 3 at full fidelity on corpora of 500,000 characters or more, and uses "
                           "0.05,1 (the best quarter promoted) on 2 MB or more")
    tune.add_argument("--full-budget", action="store_true",
                      help="spend the whole --timeout even when, half-way, the search does not beat the best "
                           "baseline out of sample (by default such a run stops there and says so)")
    tune.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE", dest="options",
                      help="any option of a study file, its value written as in the file (YAML), e.g. --set "
                           "rates='{reader_usd_per_mtok: 0.5}' or --set grace_period=60 (repeatable; the other "
                           "flags win)")
    tune.add_argument("--details", action="store_true",
                      help="after the run, print the reasoning behind each recommendation too (the tie set, the "
                           "cross-validated figures, the held-out and search scores, lexical overlap, notes)")
    tune.add_argument("--dry-run", action="store_true",
                      help="print what the run would embed and about how long it takes, then stop (no trial runs)")
    tune.add_argument("--recalibrate", action="store_true",
                      help="measure the local embedding model's throughput again before pricing trials (the dry run "
                           "and the time budget; it is measured once per machine, and again when a trial finds it "
                           "more than 2x off)")
    tune.add_argument("--repair-references", action="store_true",
                      help="re-locate references whose offsets do not match, when their text occurs exactly once "
                           "in the document (recorded in the study; workers repair the same way)")
    add_run_arguments(tune)
    tune.add_argument("--backend", choices=defaults.RUN_BACKENDS,
                      help="where the workers run: local (default: --jobs processes here) or dask (tasks on the Dask "
                           "cluster at --scheduler, one per thread of its workers unless --jobs N; needs a "
                           "PostgreSQL --storage and pip install 'chunkwise[dask]')")
    tune.add_argument("--scheduler", metavar="tcp://HOST:8786", help="the Dask scheduler's address (--backend dask)")
    tune.set_defaults(handler=run)


#: The longest value ``--set`` reads (a study file's longest option is a few hundred characters).
MAX_SET_CHARS = 10_000
#: The most values one ``--set`` value may hold once its YAML aliases are expanded.
MAX_SET_VALUES = 10_000


def parse_set_options(given: list[str]) -> dict[str, Any]:
    """``--set OPTION=VALUE`` pairs, each value read as YAML (a study file's spelling), within
    :data:`MAX_SET_CHARS` and :data:`MAX_SET_VALUES`; a message repeats at most the start of what
    was given."""
    from .._io.files import load_yaml
    from ..errors import clip, shown
    from ..tuning.study import study_options

    options: dict[str, Any] = {}
    for item in given:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in study_options():
            raise ChunkwiseError(f"--set {shown(item)}: expected OPTION=VALUE with OPTION one of "
                                 f"{', '.join(study_options())}")
        if len(text) > MAX_SET_CHARS:
            raise ChunkwiseError(f"--set {key}: the value has {len(text):,} characters, more than the "
                                 f"{MAX_SET_CHARS:,} --set reads; write it in a study file")
        try:
            options[key] = load_yaml(text, max_nodes=MAX_SET_VALUES)
        except yaml.YAMLError as exc:
            problem = " ".join(str(getattr(exc, "problem", None) or type(exc).__name__).split())
            raise ChunkwiseError(f"--set {key}: the value {shown(text)} is not valid YAML "
                                 f"({clip(problem)})") from None
    return options


def run(args: argparse.Namespace) -> int:
    from ..api import tune
    from ..tuning.study import build_spec
    from .format import format_summary

    flags = dict(name=args.name, queries=args.queries, space=args.space, unit=args.unit, copies=args.copies,
                 validation=args.validation, weights=args.weights, storage=args.storage, trials=args.n_trials,
                 jobs=args.jobs, seed=args.seed, cache=args.cache, repair_references=args.repair_references,
                 include=args.include, exclude=args.exclude, keep_links=args.keep_links, fidelity=args.fidelity,
                 timeout=args.timeout, full_budget=args.full_budget, backend=args.backend, scheduler=args.scheduler,
                 pareto=args.pareto)
    options = parse_set_options(args.options) | {key: value for key, value in flags.items()
                                                  if value is not None and value is not False}
    if args.corpus:  # --corpus wins over --set corpora=..., as every flag wins over --set
        options["corpora"] = args.corpus
    spec = build_spec(args.study_file, embedder_name=args.embedder, base_url=args.base_url,
                      precision=args.precision, max_context_tokens=args.max_context_tokens, **options)
    quiet_optuna()
    if args.recalibrate:
        from ..tuning.run import recalibrate

        print_err(recalibrate(spec) or "nothing to measure: the embedder is hosted, or its rate is set by hand")
    if args.dry_run:
        from ..tuning.run import format_plan, plan_run

        print(format_plan(spec, plan_run(spec)))
        return 0
    from ..tuning.run import stop_handlers, warn_if_long
    from ..tuning.study import display_url, storage_created

    warn_if_long(spec, print_err)

    try:
        with stop_handlers():  # SIGTERM while loading the data, too, ends in one line
            done = tune(study=spec, progress=True, echo=print_err)
    except (KeyboardInterrupt, WorkerStopped) as stop:
        from ..tuning.run import resume_advice

        if not storage_created(spec.storage):  # stopped before the study was stored: nothing to count
            return report_stop(stop, None)
        return report_stop(stop, display_url(spec.storage), resume_advice(spec))
    print(format_summary(done.name, done.storage, done.outcomes, details=args.details))
    return 0
