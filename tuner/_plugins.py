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
    ``CHUNKWISE_PLUGINS``; a module that cannot be imported is a :class:`ChunkwiseError` naming it
    (raised again at the next registry read)."""
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
    except ImportError as exc:
        raise ChunkwiseError(f"cannot import the chunkwise extension {module!r} ({where}): {exc}") from None
