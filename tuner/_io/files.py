"""Reading configuration files and writing outputs, with the same errors everywhere.

Every file chunkwise writes goes through :func:`write_atomically` (or its streaming form
:func:`atomic_writer`), which keeps three promises:

* **Nothing half-written.** Text goes to a temporary file beside the target, is synced,
  and is renamed over the target only when complete. On any failure (a full disk, an
  interrupt) the temporary file is removed and the target is left exactly as it was.
* **Never replace what it should not.** A symlink is written *through*: its final target
  file is replaced and the link stays a link. A path that exists but is not a regular
  file (a directory, a FIFO, a socket, a device such as ``/dev/full``) is refused with an
  error naming it; the path ``"-"`` means standard output.
* **Private by default.** A new file is created with mode 0600 (owner only), since
  exports, chunk outputs and caches may hold the text of private documents; a file that
  already exists keeps its own mode when replaced. :func:`private_dir` and
  :func:`private_file` do the same for folders (0700) and for files other programs open
  themselves (SQLite databases).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import yaml

from ..errors import ChunkwiseError

#: The output path that means standard output.
STDOUT = "-"
#: Mode of the files chunkwise creates: readable and writable by their owner only.
PRIVATE_FILE_MODE = 0o600
#: Mode of the folders chunkwise creates.
PRIVATE_DIR_MODE = 0o700


def why_missing(path: str | Path) -> str:
    """Why ``path`` names nothing readable, in words for a message: ``"does not exist"``, or,
    for a symbolic link, that it is a link loop or leads to a missing target."""
    path = Path(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop (it leads back to itself)"
        if path.is_symlink():
            return f"is a broken symbolic link (to {os.readlink(path)!r}, which does not exist)"
    return "does not exist"


#: How deep YAML may nest (counting what its aliases stand for): far beyond any study file or
#: search space, and far below what would exhaust Python's recursion in the parser or a reader.
MAX_YAML_DEPTH = 64
#: How many values a YAML document may hold once its aliases are expanded: an "alias bomb"
#: (each level an anchor of ten aliases to the last) is a few lines that stand for billions.
MAX_YAML_NODES = 100_000


class _YAMLTooLarge(yaml.MarkedYAMLError):
    """A YAML document nested too deep, or too large once its aliases are expanded: it leaves
    :func:`load_yaml` as the ``yaml.YAMLError`` its readers catch for any malformed YAML."""


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that repeats a key (PyYAML would keep the last
    value silently: ``trials: 2`` then ``trials: 3`` would mean 3), and a document nested deeper
    than ``max_depth`` or holding more than ``max_nodes`` values with its aliases expanded (see
    :data:`MAX_YAML_DEPTH`, :data:`MAX_YAML_NODES`): refused while it is read, before anything
    walks it."""

    max_depth = MAX_YAML_DEPTH
    max_nodes = MAX_YAML_NODES

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        # The composer recurses once per level: refused at the limit, not at Python's.
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise _YAMLTooLarge(None, None, f"nested more than {self.max_depth} levels deep",
                                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            self._measure(node, 1, {}, set())
        return node

    def _measure(self, node: yaml.Node, depth: int, measured: dict[int, tuple[int, int]],
                 open_nodes: set[int]) -> tuple[int, int]:
        """The values and levels ``node`` stands for with its aliases expanded (an alias is the
        node it names, composed once and shared): each node is measured once, so an alias bomb
        is refused in time proportional to its text."""
        key = id(node)
        if key in measured:
            size, height = measured[key]
        else:
            if key in open_nodes:
                raise _YAMLTooLarge(None, None, "an alias refers to a value that contains it", node.start_mark)
            if depth > self.max_depth:
                raise _YAMLTooLarge(None, None, f"nested more than {self.max_depth} levels deep "
                                    "(counting what its aliases stand for)", node.start_mark)
            open_nodes.add(key)
            if isinstance(node, yaml.MappingNode):
                children = [child for pair in node.value for child in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = node.value
            else:
                children = []
            size, height = 1, 1
            for child in children:
                child_size, child_height = self._measure(child, depth + 1, measured, open_nodes)
                size, height = size + child_size, max(height, child_height + 1)
                if size > self.max_nodes:
                    break
            open_nodes.discard(key)
            measured[key] = size, height
        if size > self.max_nodes:
            raise _YAMLTooLarge(None, None, f"holds more than {self.max_nodes:,} values once its aliases are "
                                "expanded", node.start_mark)
        if depth + height - 1 > self.max_depth:
            raise _YAMLTooLarge(None, None, f"nested more than {self.max_depth} levels deep (counting what "
                                "its aliases stand for)", node.start_mark)
        return size, height

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may repeat keys on purpose
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the safe loader reports it
                continue
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} on lines {first} and {key_node.start_mark.line + 1}",
                    key_node.start_mark)
        return super().construct_mapping(node, deep)


def load_yaml(text: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """Parse YAML (or JSON) text with :class:`UniqueKeyLoader`: every YAML chunkwise reads.
    ``max_nodes`` bounds the values it may hold with its aliases expanded (a command-line value
    asks for fewer than a file); beyond it, or nested too deep, a ``yaml.YAMLError`` as for malformed YAML."""
    if max_nodes == UniqueKeyLoader.max_nodes:
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no arbitrary objects
    loader = type("BoundedLoader", (UniqueKeyLoader,), {"max_nodes": max_nodes})
    return yaml.load(text, Loader=loader)


def read_yaml(path: str | Path, what: str, error: type[ChunkwiseError] = ChunkwiseError) -> Any:
    """Parse a YAML (or JSON) file; a missing, unreadable or malformed file (a key given twice
    in one mapping included) raises ``error`` with a message naming ``what`` and the path."""
    path = Path(path)
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{what} {str(path)!r} is not valid YAML or JSON ({where}{problem})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{what} {str(path)!r} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None


def is_stdout(path: str | Path) -> bool:
    """Whether ``path`` is the string ``"-"`` (standard output). A :class:`~pathlib.Path`
    never is: ``Path("-")`` names a file, so code that means a file called ``-`` can say so."""
    return isinstance(path, str) and path == STDOUT


def write_atomically(path: str | Path, text: str, error: type[ChunkwiseError] = ChunkwiseError) -> None:
    """Write ``text`` (UTF-8, no newline translation) to ``path`` atomically, or to standard
    output when ``path`` is ``"-"``.

    See the module docstring for what is promised: a reader never sees a half-written
    file, a failed write leaves the target unchanged and no temporary file behind,
    symlinks are written through, non-regular files are refused, new files are 0600.

    Raises:
        error: the target cannot be written (named in the message, with the reason).
    """
    if is_stdout(path):
        write_stdout(text, error)
        return
    with atomic_writer(path, error) as out:
        out.write(text)


@contextlib.contextmanager
def atomic_writer(path: str | Path, error: type[ChunkwiseError] = ChunkwiseError, *,
                  binary: bool = False) -> Iterator[TextIO]:
    """Stream text into ``path`` atomically, without holding it all in memory::

        with atomic_writer("chunks.jsonl") as out:
            for record in records:
                out.write(json.dumps(record) + "\\n")

    The file appears (replacing the old one) only when the block ends without an
    exception; if the block raises, the temporary file is removed and the exception goes
    on unchanged (an ``OSError`` from writing becomes ``error``, naming the path). With
    ``path`` ``"-"`` the block writes to standard output, whose failures (a closed pipe,
    a full disk) also become ``error``. With ``binary`` the stream takes bytes (plots).
    """
    if is_stdout(path):
        out = sys.stdout.buffer if binary else sys.stdout
        try:
            yield out
            out.flush()
        except OSError as exc:
            raise _stdout_error(exc, error) from None
        return
    path = Path(path)
    target, existing = _writable_target(path, error)
    fd, tmp = _create_temp(path, target, error)
    raw = _FdWriter(fd)
    buffered = io.BufferedWriter(raw)
    stream = buffered if binary else io.TextIOWrapper(buffered, encoding="utf-8", newline="")
    try:
        if existing is not None:
            os.fchmod(fd, stat.S_IMODE(existing.st_mode))
        yield stream
        stream.flush()
        os.fsync(fd)
        stream.close()
        os.replace(tmp, target)
    except BaseException as exc:
        _discard(stream, raw, tmp)
        if isinstance(exc, OSError):
            raise error(_write_failure(path, exc, existing is not None)) from None
        raise


def write_stdout(text: str, error: type[ChunkwiseError] = ChunkwiseError) -> None:
    """Write ``text`` to standard output and flush it; a reader that went away (``| head``)
    or a full disk becomes ``error`` instead of a traceback."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        raise _stdout_error(exc, error) from None


def check_writable(path: str | Path, error: type[ChunkwiseError] = ChunkwiseError) -> None:
    """Fail before any work when ``path`` cannot be written: not a regular file (a folder, a
    device), or in a missing or read-only folder. ``"-"`` (standard output) always passes."""
    if is_stdout(path):
        return
    target, _ = _writable_target(Path(path), error)
    folder = target.parent
    if not folder.is_dir():
        raise error(f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise error(f"cannot write {path}: the folder {folder} is not writable")


def size_and_sha256(path: str | Path, block: int = 1 << 22) -> tuple[int, str]:
    """``(bytes, sha256 hex)`` of file ``path``, read in blocks (model files are gigabytes): what a
    pinned file is checked against.

    Raises:
        OSError: the file cannot be read.
    """
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


@contextlib.contextmanager
def writers_lock(path: str | Path) -> Iterator[None]:
    """Hold the lock every chunkwise writer of file ``path`` takes: an exclusive ``flock`` of the
    folder of the file ``path`` leads to (a link followed). The folder, not the file, because a
    writer that replaces the file (:func:`write_atomically`, as ``review`` does) would leave a
    lock on the file behind with the old inode; so ``review``'s saves and ``generate``'s appends
    to one questions file take turns, and neither writes over what the other wrote. Where
    ``flock`` is missing (not POSIX), nothing is held.

    Raises:
        OSError: the folder cannot be opened.
    """
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield
        return
    folder = os.open(Path(os.path.realpath(path)).parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # releases the flock


def private_dir(path: str | Path) -> Path:
    """Create folder ``path`` and any missing parents with mode 0700, like
    ``os.makedirs(path, exist_ok=True)``; folders that exist keep their mode.

    chunkwise's caches hold embeddings and LLM answers derived from private documents,
    so the folders it creates are its owner's only.

    Raises:
        OSError: a folder cannot be created (or ``path`` exists and is not a folder).
    """
    path = Path(path)
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # created meanwhile by another process: leave its mode alone
        os.chmod(folder, PRIVATE_DIR_MODE)  # exact, whatever the umask
    return path


def private_file(path: str | Path) -> bool:
    """Create ``path`` as an empty file with mode 0600 if nothing exists there.

    For files another library creates itself (SQLite makes its databases 0644, and
    makes the ``-wal`` and ``-shm`` files with the database's own mode): creating the
    empty file first makes all of them private. An existing file (or link) is untouched.
    Returns whether the file was created.

    Raises:
        OSError: the file cannot be created (a missing or read-only folder).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class _FdWriter(io.RawIOBase):
    """The temporary file's descriptor as a raw stream; writes go through ``os.write``."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.fd_open = True

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data) -> int:
        return os.write(self.fd, data)

    def close(self) -> None:
        if self.fd_open:
            self.fd_open = False
            os.close(self.fd)
        super().close()


def _writable_target(path: Path, error: type[ChunkwiseError]) -> tuple[Path, os.stat_result | None]:
    """The file to replace (symlinks resolved) and its status, ``None`` if it does not exist yet."""
    try:
        status = os.stat(path)  # follows symlinks, including /proc's fd links
    except FileNotFoundError:
        status = None
    except OSError as exc:
        raise error(f"cannot write {path}: {exc.strerror}") from None
    if status is not None and not stat.S_ISREG(status.st_mode):
        raise error(f"refusing to write {path}: it is {_kind(status.st_mode)}, not a regular file "
                    f"(chunkwise only replaces regular files; give '-' to write to standard output)")
    target = Path(os.path.realpath(path)) if os.path.islink(path) else path
    if status is not None and target != path:
        try:
            same = os.path.samestat(os.stat(target), status)
        except OSError:
            same = False
        if not same:
            raise error(f"refusing to write {path}: cannot tell which file the link leads to")
    return target, status


def _create_temp(path: Path, target: Path, error: type[ChunkwiseError]) -> tuple[int, Path]:
    """A new, empty 0600 file beside ``target`` (``O_EXCL``: never an existing file or link)."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            return os.open(tmp, flags, PRIVATE_FILE_MODE), tmp
        except FileExistsError:
            continue
        except FileNotFoundError:
            raise error(f"cannot write {path}: folder {target.parent} does not exist") from None
        except OSError as exc:
            raise error(_write_failure(path, exc, False)) from None
    raise error(f"cannot write {path}: no free temporary file name in {target.parent}")


def _discard(stream: io.TextIOWrapper, raw: _FdWriter, tmp: Path) -> None:
    """Close and remove the temporary file after a failure (quietly: the first error counts)."""
    with contextlib.suppress(Exception):
        stream.close()  # may fail flushing to a full disk; the descriptor is closed anyway
    with contextlib.suppress(OSError):
        raw.close()
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _write_failure(path: Path, exc: OSError, existed: bool) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += " (free some space or write elsewhere)"
    kept = f"; {path} is unchanged" if existed else ""
    return f"cannot write {path}: {reason}{kept}"


def _stdout_error(exc: OSError, error: type[ChunkwiseError]) -> ChunkwiseError:
    # Standard output is unusable now: point it at /dev/null, so the interpreter's final
    # flush of what is still buffered does not fail again with a second, noisier message.
    with contextlib.suppress(Exception):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    if isinstance(exc, BrokenPipeError):
        return error("cannot write to standard output: the program reading it has stopped (broken pipe)")
    return error(f"cannot write to standard output: {exc.strerror or exc}")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "a special file")
