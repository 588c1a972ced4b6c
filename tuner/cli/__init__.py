"""The ``chunkwise`` command line: one module per command, its parser beside its handler.

Each command is a small function over the Python API (``add_parser`` declares its arguments,
``run`` calls the library and prints). The library decides; the command line parses and
prints. Problems with input raise :class:`~tuner.errors.ChunkwiseError`; :func:`main` prints
their message and exits with status 2, without a traceback. To add a command, write a module
here with ``add_parser(commands)`` and ``run(args)``, and list it in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from .. import _plugins
from .._io.secrets import redact
from .._version import __version__
from ..errors import ChunkwiseError, WorkerStopped, options_named
from . import (
    check,
    chunk,
    chunkers,
    convert,
    dashboard,
    embedders,
    evaluate,
    export,
    generate,
    report,
    review,
    tune,
    validate,
    worker,
)
from ._args import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, FLAGS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``chunkwise`` console script."""
    try:  # before parsing: an extension may add choices
        _plugins.load_plugins()
    except ChunkwiseError as exc:
        print(f"chunkwise: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    parser = build_parser()
    args = parser.parse_args(_attach_negative_values(parser, sys.argv[1:] if argv is None else argv))
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    _show_corpus_loading()
    try:
        # The library's messages name options as this command line spells them.
        with options_named(FLAGS), _library_warnings_once():
            return args.handler(args) or 0
    except ChunkwiseError as exc:
        print(f"chunkwise: error: {redact(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("chunkwise: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except WorkerStopped:  # SIGTERM outside a run's own handling (see each command's stop_handlers)
        print("chunkwise: stopped by SIGTERM", file=sys.stderr)
        return EXIT_TERMINATED
    except Exception as exc:
        # One rule for the environment's failures: a file system, database or chromadb error is
        # one clear message, not a traceback. Anything else is a bug and keeps its traceback.
        message = environment_error_message(exc)
        if message is None:
            raise
        print(f"chunkwise: error: {message}", file=sys.stderr)
        return EXIT_USAGE


_NEGATIVE = re.compile(r"-\.?\d")


def _attach_negative_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with a value that starts like a negative number glued to its option
    (``--timeout -5m`` becomes ``--timeout=-5m``): argparse would take ``-5m`` for an option
    and answer "expected one argument"; glued, the value reaches the check that explains what
    is wrong with it."""
    argv = list(argv)
    commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    command = commands.choices.get(argv[0]) if commands is not None and argv else None
    if command is None:
        return argv
    takes_value = {flag for action in command._actions if action.nargs != 0 for flag in action.option_strings}
    out: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token in takes_value:
            value = next(tokens, None)
            if value is None:
                out.append(token)
            elif _NEGATIVE.match(value):
                out.append(f"{token}={value}")
            else:
                out.extend((token, value))
        else:
            out.append(token)
    return out


#: Modules whose exceptions are failures of the environment (a database, a driver, chromadb).
_ENVIRONMENT_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "chromadb", "optuna.exceptions")


def environment_error_message(exc: BaseException) -> str | None:
    """One clear line for a failure of the environment (an ``OSError``, a database or chromadb
    error) that reached the top of a command; None for anything else (a bug).

    The text is redacted (no password or key) and names the path when there is one.
    """

    if isinstance(exc, BrokenPipeError):
        return "the output was closed before everything was written (broken pipe)"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return redact(f"{where}{exc.strerror or exc}")
    module = type(exc).__module__ or ""
    if module.startswith(_ENVIRONMENT_MODULES):
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return redact(f"{type(exc).__name__}: {first_line}")
    return None


class _StderrHandler(logging.Handler):
    """Prints a record as ``chunkwise: MESSAGE`` on the current ``sys.stderr`` (tests swap it),
    each message once per command (a corpus loaded twice, by the run and its first worker,
    says so once), through tqdm so that a progress bar is cleared and redrawn around it."""

    def __init__(self) -> None:
        super().__init__()
        self.printed: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message in self.printed:
            return
        self.printed.add(message)
        _print_above_bars(f"chunkwise: {message}")


def _print_above_bars(line: str) -> None:
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


_HANDLER = _StderrHandler()


def _show_corpus_loading() -> None:
    """Print the corpus loader's one-line summaries (what a folder read and skipped, conversion
    warnings) on standard error, once per process however often :func:`main` runs, each
    distinct line once per command."""
    logger = logging.getLogger("tuner.data.corpus")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    _HANDLER.printed.clear()


@contextlib.contextmanager
def _library_warnings_once() -> Iterator[None]:
    """While a command runs, a Python warning from a library is printed once, as one line
    (``chunkwise: warning (LibraryWarning): ...``) above any progress bar, instead of the
    warnings module's two lines at every place and file that raises it."""
    printed: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        text = " ".join(str(message).split())
        if text not in printed:
            printed.add(text)
            _print_above_bars(f"chunkwise: warning ({category.__name__}): {text}")

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def build_parser() -> argparse.ArgumentParser:
    """The ``chunkwise`` parser with every command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="chunkwise",
        description="Find the best chunking configuration for your documents.",
    )
    parser.add_argument("--version", action="version", version=f"chunkwise {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


COMMANDS = (evaluate, validate, chunkers, embedders, tune, worker, dashboard, export, chunk, report, generate, convert,
            review, check)
