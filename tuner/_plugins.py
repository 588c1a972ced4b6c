"""Extensions that live outside a package's own imports: found and imported, so that registering
is all an extension does.

* Inside chunkwise, every module of an extension package (``tuner/chunkers/``,
  ``tuner/retrieval/``, ``tuner/embedding/``, ``tuner/evaluation/``) is imported when the package
  is (:func:`import_modules`): a new chunker, method, provider or metric is one new file.
* Outside it, an installed package declares its registering module as an entry point of the group
  ``chunkwise.plugins`` (``[project.entry-points."chunkwise.plugins"] mine = "mine.chunking"``), or
  a script names modules in ``CHUNKWISE_PLUGINS`` (comma-separated): :func:`load_plugins` imports
  them the first time a registry is read in a process (every registry's readers call it), so
  worker processes and Dask tasks register them too, and ``import tuner`` stays instant.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterable

from .errors import ChunkwiseError

#: The entry-point group of installed extensions.
ENTRY_POINT_GROUP = "chunkwise.plugins"
#: Modules (comma-separated) a process imports for their registrations.
PLUGINS_ENVIRONMENT = "CHUNKWISE_PLUGINS"
#: Whether this process has imported its extensions (or is importing them now: a registry read
#: while an extension module loads does not start over).
_loaded = False


def import_modules(package: str, path: Iterable[str], *, registers_nothing: Iterable[str] = ()) -> None:
    """Import every module of ``package`` (its ``__path__``): each registers what it defines.
    ``registers_nothing`` names heavy modules left to be imported where they are used."""
    skipped = set(registers_nothing)
    for module in pkgutil.iter_modules(path):
        if module.name not in skipped:
            importlib.import_module(f"{package}.{module.name}")


def load_plugins() -> None:
    """Import, once per process, the extensions installed as entry points and those named in
    ``CHUNKWISE_PLUGINS``; a module that cannot be imported (missing, raising as it runs, registering
    a name already taken, calling ``sys.exit``) is a :class:`ChunkwiseError` naming it (raised again
    at the next registry read)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    try:
        _load_all()
    except BaseException:
        _loaded = False
        raise


def _load_all() -> None:
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        _load(point.value.split(":", 1)[0], f"entry point {point.name!r}")
    for name in filter(None, (n.strip() for n in os.environ.get(PLUGINS_ENVIRONMENT, "").split(","))):
        _load(name, PLUGINS_ENVIRONMENT)


def _load(module: str, where: str) -> None:
    try:
        importlib.import_module(module)
    except BaseException as exc:
        if _stops_the_command(exc):
            raise
        raise ChunkwiseError(f"cannot import the chunkwise extension {module!r} ({where}): {_failure(exc)}") from None


def _stops_the_command(exc: BaseException) -> bool:
    """Whether ``exc`` is the user stopping the command while a module imports (Ctrl-C, or the
    SIGTERM that chunkwise's own handlers raise as a ``BaseException``), not the module failing:
    that ends the command as it would anywhere else."""
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        return True
    # chunkwise's SIGTERM exceptions live in ``tuner`` (or ``__main__`` under ``python -m tuner``).
    ours = type(exc).__module__.split(".")[0] in ("tuner", "__main__")
    return ours and not isinstance(exc, (Exception, SystemExit))


#: The most of a module's own message that the one line repeats.
FAILURE_CHARS = 300


def _failure(exc: BaseException) -> str:
    """What went wrong in a module's import, in one line: the exception's type and the first line
    of its message (a name registered twice, a syntax error and its line), or the status it
    called ``sys.exit`` with, which would otherwise end every command silently."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    if isinstance(exc, ImportError):  # its message names what is missing
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    line = (text.strip().splitlines() or [type(exc).__name__])[0]
    return line if len(line) <= FAILURE_CHARS else line[: FAILURE_CHARS - 3] + "..."
