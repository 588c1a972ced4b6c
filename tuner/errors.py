"""Errors that chunkwise reports to users.

Every problem caused by input (a file, a parameter, a configuration) raises a
:class:`ChunkwiseError` subclass whose message says what is wrong and how to fix it.
The command line prints the message and exits non-zero without a traceback; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class ChunkwiseError(Exception):
    """Base class of every user-facing chunkwise error.

    ``fatal`` marks an error that no retry can fix (a bad API key, an unreachable endpoint
    after the client's own retries, an unknown model): a tuning run stops at the first one
    instead of failing trial after trial.

    ``transient`` marks a failure of the environment that says nothing about the input being
    processed (a server's outage, rate limiting that outlasted the retries): the same work may
    succeed later, so a tuning run never holds it against the trial's configuration.
    """

    fatal: bool = False
    transient: bool = False


class InvalidParameterError(ChunkwiseError, ValueError):
    """A parameter value lies outside its allowed range or set."""


class CorpusError(ChunkwiseError):
    """A corpus could not be read: missing, empty, binary or not UTF-8."""


class EvaluationSetError(ChunkwiseError):
    """An evaluation set is malformed or does not match its corpus."""


class EmbeddingError(ChunkwiseError):
    """An embedding provider could not be loaded or reached."""


#: The most of a given value that a message repeats (see :func:`shown`).
SHOWN_CHARS = 80


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``value`` for a message, shortened to ``limit`` characters: a message names what was given
    without echoing a whole file's worth of it back. Text is quoted; anything else is written as
    JSON (and YAML) write it, since that is where such values come from: ``null``, ``true``,
    ``[1, 2]``, not Python's ``None``, ``True``, ``(1, 2)``.

    >>> shown("handbook"), shown("x" * 100, 12), shown(None), shown(True), shown({"k": (3, None)})
    ("'handbook'", "'xxxxxxxx...", 'null', 'true', '{"k": [3, null]}')
    """
    return clip(repr(value) if isinstance(value, str) else as_json(value), limit)


def as_json(value: Any) -> str:
    """``value`` as a JSON or YAML file writes it (``null``, ``true``, ``[1, 2]``, ``{"k": 3}``); a
    value JSON cannot hold (an object, NaN) as Python writes it.

    >>> as_json(None), as_json(False), as_json(2.5), as_json(("a", 1)), as_json(float("nan"))
    ('null', 'false', '2.5', '["a", 1]', 'nan')
    """
    import json

    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_plain)
    except (TypeError, ValueError):
        return repr(value)


def _plain(value: Any) -> Any:
    """A NumPy scalar or array as the Python value JSON can write; anything else is refused."""
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        return value.tolist()
    raise TypeError(type(value).__name__)


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` shortened to ``limit`` characters, its end replaced by ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- how messages name options -----------------------------------------------------------------
#: The command line's spelling of each option while a command runs (see :func:`options_named`);
#: None when the library is called from Python.
_FLAGS: ContextVar[Mapping[str, str] | None] = ContextVar("chunkwise_flags", default=None)


def option(name: str, value: Any = None, *, python: str | None = None) -> str:
    """How a message names the option ``name`` (a parameter of the Python API) with an example
    ``value``: ``storage=URL`` or ``replace=True`` when the library is called from Python,
    ``--storage URL`` or ``--replace`` on the command line, which spells its own flags
    (:func:`options_named`). ``python`` spells it for Python when that is not ``name=value``
    (``option("no_cache", True, python="cache=None")``).

    >>> option("storage", "URL"), option("replace", True), option("jobs")
    ('storage=URL', 'replace=True', 'jobs')
    >>> with options_named({"trials": "--n-trials"}):
    ...     option("trials", 30), option("replace", True), option("base_url")
    ('--n-trials 30', '--replace', '--base-url')
    """
    flags = _FLAGS.get()
    if flags is None:
        return python or (name if value is None else f"{name}={value}")
    flag = flags.get(name, "--" + name.replace("_", "-"))
    return flag if value is None or value is True else f"{flag} {value}"


@contextmanager
def options_named(flags: Mapping[str, str]) -> Iterator[None]:
    """While the block runs, messages name options as ``flags`` spells them (parameter name to
    flag; any other option is ``--`` and its name with dashes)."""
    token = _FLAGS.set(flags)
    try:
        yield
    finally:
        _FLAGS.reset(token)


class StudyError(ChunkwiseError):
    """A study file is invalid, a study cannot be found, or a run disagrees with the study it resumes."""


# --- Each stage's errors, declared here beside the others (one module, one message format) ---


class StorageError(ChunkwiseError):
    """The study storage cannot be opened, read or written."""


class SearchSpaceError(ChunkwiseError):
    """A search space file is malformed or allows invalid configurations."""


class ClusterError(ChunkwiseError):
    """The cluster cannot run the study: no scheduler, no workers, no shared database, lost tasks."""


class AgreementError(ChunkwiseError):
    """Two evaluation sets that cannot be compared: different corpora, too few questions, or a
    set that scores every configuration of the grid the same."""


class CollectionError(ChunkwiseError):
    """A chromadb collection could not be built, opened or queried."""


class ExportError(ChunkwiseError):
    """An export cannot be written or read."""


class ReviewError(EvaluationSetError):
    """An action that cannot be done; ``status`` is the HTTP status the page gets."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class LLMError(ChunkwiseError):
    """The LLM endpoint could not be used: bad key, unreachable, failing, or unsupported.

    Instances for failures no retry can fix have ``fatal = True`` (see :mod:`tuner.llm.endpoint`).
    """


class UnfitAnswerError(LLMError):
    """Every reply was well formed, but the caller's ``parse`` refused every answer in it (the
    model's own words): a caller with a fallback (the ``llm`` chunker) catches this one."""


class LLMServerUnavailable(ChunkwiseError):
    """The server cannot run here: the extra or the model's packages are not installed, or the
    model file is not the pinned one."""


class LLMServerFailed(ChunkwiseError):
    """The server was started but did not come up (the message ends with its log's last lines)."""


class EmbeddingCacheError(ChunkwiseError):
    """The embedding cache file cannot be opened or written. A full disk is ``fatal``:
    every later trial would fail the same way until space is freed."""


class ConversionError(CorpusError):
    """A document could not be converted to text (encrypted, scanned, damaged, unsupported)."""


class UsageError(ChunkwiseError, RuntimeError):
    """chunkwise's Python API called out of order (a server used before it is started, a worker id
    that cannot be registered): a mistake in the calling code, said in one message."""


# --- Signals: raised in one module and caught in another, never shown to a user as such -------
# (a signal that never leaves its module stays there, private: ``_StopRequested``, ``_Terminated``)


class BadReply(ValueError):
    """A reply chunkwise cannot use (retried like a server error); the message says what was wrong.
    Raised by the checks of a reply (llm/client.py, llm/endpoint.py, embedding/openai.py) and caught
    by :func:`tuner.llm.endpoint.usable_reply`, which asks again and, out of retries, raises the
    caller's :class:`ChunkwiseError` naming the last one."""


class AskAgain(BadReply):
    """The caller's ``parse`` refuses the model's answer in a reply of good form (the model's own
    words: no JSON object where one was asked for, numbers out of range): ask again. Raised by the
    parsers of answers (chunkers/llm.py, data/generate/prompts.py, retrieval/llm_context.py, and
    llm/client.py for an answer cut off at the tokens asked for); caught, like any
    :class:`BadReply`, by :func:`tuner.llm.endpoint.usable_reply`, which raises
    :class:`UnfitAnswerError` once every answer was refused."""


class WorkerStopped(BaseException):
    """SIGTERM (``docker stop``, systemd, a parent that died or stopped it) in the main thread of a
    run or worker. Raised by the handler that ``tuner.tuning.run.stop_handlers`` installs
    (tuning/run/processes.py); caught like ``KeyboardInterrupt``, which it is no more an
    ``Exception`` than: by the run (tuning/run/workers.py, study_run.py, reclaim.py), which fails
    the in-flight trial (``lost``) and goes on up, and by the command line (cli/), which exits 143."""


# How a trial ends without a score (tuning/run/trial.py raises each; tuning/run/workers.py catches
# each before any ChunkwiseError and records the trial PRUNED, saying why).


class ConfigurationTaken(Exception):
    """The sampled configuration is already claimed by another trial (``holder``): the trial is a
    duplicate of that one."""

    def __init__(self, holder: int | None) -> None:
        super().__init__(f"same configuration as trial {holder}")
        self.holder = holder


class TargetReached(Exception):
    """The study's target was covered by complete and running trials before this one got a slot."""


class StoppedAtRung(Exception):
    """The trial stopped after a low-fidelity rung (``rung``: a proxy's name or a fraction)."""

    def __init__(self, rung: str, score: float) -> None:
        super().__init__(f"stopped at rung {rung} (score {score:.4f})")
        self.rung, self.score = rung, score


class OutOfBudget(Exception):
    """The configuration a trial sampled cannot finish before the run's time budget ends."""

    def __init__(self, expected_s: float, left_s: float) -> None:
        super().__init__(f"expected {expected_s:.0f} s, {max(0.0, left_s):.0f} s left")
        self.expected_s, self.left_s = expected_s, left_s
