"""What several commands share: their common arguments, loading the data, printing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import yaml

from .._io.files import load_yaml
from ..embedding import PRECISION_CHOICES
from ..schema import invalid
from ..tuning.run import print_err
from ..tuning.study import defaults

EXIT_USAGE = 2
#: Ctrl-C (SIGINT); SIGTERM (``docker stop``, systemd, Kubernetes) ends ``tune`` and ``worker``
#: the same way, with 143 (128 + 15, what a shell reports for a process SIGTERM killed).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: The flag of each library parameter whose flag is not ``--`` and its name with dashes: the
#: library's messages name options by parameter (:func:`tuner.errors.option`), and the command
#: line shows its own spelling of them.
FLAGS = {
    "trials": "--n-trials",
    "n_trials": "--n-trials",
    "corpora": "--corpus",
    "corpus_path": "--corpus",
    "queries_path": "--queries",
}


class RegistryChoices:
    """An argparse ``choices`` read from a registry when the command line is parsed (and its help
    shown), so that a method or provider registered after import is offered too."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self.names = names

    def __contains__(self, value: object) -> bool:
        return value in tuple(self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self.names()))


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="URL",
                        help="SQLAlchemy URL (default: sqlite:///studies/NAME.db; postgresql+psycopg://... "
                             "to share a study between machines)")
    parser.add_argument("--n-trials", type=int, metavar="N", help=f"trials to add per corpus ({defaults.TRIALS})")
    parser.add_argument("--jobs", type=int, metavar="N", help=f"worker processes sharing each study ({defaults.JOBS})")
    parser.add_argument("--seed", type=int, help=f"sampler seed; worker i uses seed + i ({defaults.SEED})")
    parser.add_argument("--cache", metavar="FILE", help="embedding cache file")
    add_timeout_argument(parser)


def add_timeout_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", metavar="DURATION",
                        help="time budget such as 45m or 2h: no trial starts that cannot finish in time, trials "
                             "in flight finish; without --n-trials, as many trials as fit")


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", choices=PRECISION_CHOICES,
                        help="numeric precision of a local model (default auto: bf16 where the CPU or GPU computes it "
                             "natively, else fp32; int8 is faster but fails the decision bar, see BENCHMARKS.md; "
                             "each precision has its own cache entries)")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include", action="append", metavar="GLOB",
                        help="read only the files of a folder or glob matching GLOB (repeatable; a pattern without / "
                             "matches file names, e.g. '*.pdf')")
    parser.add_argument("--exclude", action="append", metavar="GLOB",
                        help="leave out the files of a folder or glob matching GLOB (repeatable; e.g. 'drafts/*')")
    parser.add_argument("--keep-links", action="store_true",
                        help="converted HTML, DOCX and EPUB keep links as [text](url) (default: their text only)")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", action="append", required=True, metavar="[NAME=]PATH",
                        help="a corpus: a file, a folder or a quoted glob; repeat for several corpora")
    add_filter_arguments(parser)
    parser.add_argument("--queries", required=True, metavar="FILE",
                        help="evaluation set: chunkwise JSONL or Chroma CSV")
    parser.add_argument("--repair-references", action="store_true",
                        help="re-locate references whose offsets do not match, when their text "
                             "occurs exactly once in the document")


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", metavar="FILE",
                        help="embedding cache file (default: $CHUNKWISE_CACHE_DIR/embeddings.sqlite3 "
                             "or ~/.cache/chunkwise/embeddings.sqlite3)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")


def load_data(args: argparse.Namespace):
    from ..data.corpus import load_corpus, parse_corpus_spec
    from ..data.evalset import load_evaluation_set

    corpora = [load_corpus(path, name, include=args.include or (), exclude=args.exclude or (),
                           keep_links=args.keep_links) for name, path in map(parse_corpus_spec, args.corpus)]
    evalset = load_evaluation_set(args.queries, corpora, repair=args.repair_references)
    print(evalset.describe_states(), file=sys.stderr)
    if evalset.repaired:
        print(f"repaired {evalset.repaired} reference offset(s)", file=sys.stderr)
    return corpora, evalset


def report_stop(stop: BaseException, saved_in: str | None, advice: str = "Run the same command to resume.") -> int:
    """The one line and exit status of a run stopped by Ctrl-C (:data:`EXIT_INTERRUPTED`) or
    SIGTERM (:data:`EXIT_TERMINATED`); its in-flight trials were failed on the way out.
    ``saved_in`` None: the run stopped before its storage existed. ``advice`` says what running
    the same command again does."""
    how = "interrupted" if isinstance(stop, KeyboardInterrupt) else "stopped by SIGTERM"
    if saved_in is None:
        print_err(f"chunkwise: {how} before the study was stored; nothing was saved.")
    else:
        print_err(f"chunkwise: {how}; completed trials are saved in {saved_in}. {advice}")
    return EXIT_INTERRUPTED if isinstance(stop, KeyboardInterrupt) else EXIT_TERMINATED


def quiet_optuna() -> None:
    import optuna

    # The progress bar reports trials, and failed trials are reported in one line each.
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def parse_param(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise invalid("--param", text, "NAME=VALUE")
    try:
        return name.strip(), load_yaml(value)
    except yaml.YAMLError:
        return name.strip(), value


