"""``chunkwise check``: does the configuration in production still hold? (exit 0 yes, 1 no, 2 bad input)."""

from __future__ import annotations

import argparse
import json
import sys

from .._io.files import check_writable, is_stdout, write_atomically
from ..errors import InvalidParameterError
from ..schema import invalid, misplaced
from ..tuning.run import stop_handlers
from ._args import add_cache_arguments, add_data_arguments, load_data

#: Exit status when production is significantly worse than the best configuration compared.
EXIT_WORSE = 1


def add_parser(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check", help="CI: is the configuration in production significantly worse than the baselines or a "
                      "study's recommendation on the documents as they are now? (exit 1 if so)",
        description="Score the configuration in production (an export), the built-in baselines (with "
                    "production's embedder) and, with --study, the study's recommendation and the configurations "
                    "tied with its best, on the corpus and questions as they are now; embeddings come from the "
                    "cache where chunks did not change. Exit 1 when the best of them is significantly better than "
                    "production by more than --margin (the paired sign-flip test, Bonferroni-corrected for the "
                    "configurations compared), 0 when production holds, 2 on bad input.",
    )
    check.add_argument("--config", required=True, metavar="FILE",
                       help="the configuration in production: an export (chunkwise export) or a configuration file")
    add_data_arguments(check)
    check.add_argument("--study", metavar="NAME",
                       help="also score this study's recommendation and tie set (RUN or RUN/CORPUS)")
    check.add_argument("--storage", metavar="URL", help="the study's storage (default sqlite:///studies/RUN.db)")
    check.add_argument("--tied", type=int, metavar="N",
                       help="score only the N highest-scoring configurations of the tie set (default: all)")
    check.add_argument("--margin", type=float, metavar="M",
                       help="fail only when production is worse by more than M (score units; default 0)")
    check.add_argument("--weights", metavar="NAME=W,...",
                       help="weights of the score (default: the study's, else the export's, else the defaults)")
    add_cache_arguments(check)
    check.add_argument("--json", metavar="FILE", help="write the result as JSON (atomically)")
    check.add_argument("--markdown", metavar="FILE",
                       help="write a markdown summary a CI system can show (e.g. $GITHUB_STEP_SUMMARY)")
    check.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with stop_handlers():  # SIGTERM ends in one line; nothing is written until the check is complete
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..deploy.check import check_margin, run_check, study_entries
    from ..deploy.export import load_config
    from ..embedding import EmbeddingCache
    from ..tuning import Weights

    _check_options(args)
    margin = check_margin(0.0 if args.margin is None else args.margin)
    weights = Weights.parse(args.weights) if args.weights else None
    exported = load_config(args.config)
    corpora, evalset = load_data(args)
    study = None
    if args.study:
        study = study_entries(args.study, args.storage, corpora[0].name if len(corpora) == 1 else None, args.tied)
    if weights is None and study is None and isinstance(given := (exported.data.get("source") or {}), dict) \
            and isinstance(given.get("weights"), dict):
        weights = Weights.from_dict(given["weights"], f"{args.config}: source.weights")
    cache = None if args.no_cache else EmbeddingCache(args.cache) if args.cache else True
    terminal = sys.stderr if any(is_stdout(p) for p in (args.json, args.markdown) if p) else sys.stdout
    what = "production and the built-in baselines"
    if study is not None:
        tied = sum("study tie set" in entry.roles for entry in study.entries)
        baselines = (f"the {len(study.baselines)} baselines it evaluated" if study.baselines
                     else "the built-in baselines")
        what = (f"production, {baselines}, the recommendation of {study.study} and the configurations tied with its "
                f"best ({tied} of {study.tied})")
    print(f"checking {what} on {len(evalset)} questions", file=sys.stderr)

    def scored(number, total, found) -> None:
        config = found.entry.config
        cached = (f", {found.cache_hit_rate:.0%} of the embeddings from the cache" if config.retrieval.embeds
                  else "")
        print(f"  [{number}/{total}] {found.entry.name} ({', '.join(found.entry.roles)}): score {found.score:.4f}, "
              f"recall {found.means.get('recall', 0):.1%} ({found.seconds:.1f} s{cached})", file=sys.stderr)

    result = run_check(corpora, evalset, exported.config, study=study, weights=weights, margin=margin, cache=cache,
                       on_scored=scored)
    print("\n".join(line for line in result.lines() if line), file=terminal)
    if args.json:
        write_atomically(args.json, json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n",
                         InvalidParameterError)
    if args.markdown:
        write_atomically(args.markdown, result.markdown(), InvalidParameterError)
    return EXIT_WORSE if result.worse else 0


def _check_options(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or scored, options that cannot work together."""
    if not args.study:
        given = [flag for flag, value in (("--storage", args.storage), ("--tied", args.tied)) if value is not None]
        if given:
            raise misplaced(given, "only with --study NAME (the study whose recommendation and tie set to score)")
    if args.tied is not None and args.tied < 1:
        raise invalid("--tied", args.tied, "an integer >= 1 (the tie set's highest-scoring configurations)")
    outputs = [path for path in (args.json, args.markdown) if path]
    if len(outputs) == 2 and (outputs[0] == outputs[1] or all(map(is_stdout, outputs))):
        raise misplaced(["--json", "--markdown"], f"one file each (both name {outputs[0]})")
    for path in outputs:
        check_writable(path, InvalidParameterError)
