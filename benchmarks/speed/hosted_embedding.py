"""Hosted embedding throughput by requests in flight, against a local OpenAI-compatible server.

The tests' stub server (``tests/openai_stub.py``) on 127.0.0.1 answers every embedding request
after an artificial latency (``--latency``, 200 ms), as a remote API does. The paragraphs of
``examples/handbook`` (made unique, ``--texts`` of them) are embedded with no cache by
:class:`tuner.embedding.openai.OpenAIEmbedder` through the real ``openai`` client, at
``embedder.concurrency`` 1, 4 and 16, rounds interleaved ``--repeats`` times. Requests hold at
most ``--batch-inputs`` texts (a server's limit, as TEI's 32 by default; with OpenAI's 2,048 a
run this small would be one request). Reported: median seconds and texts/s per concurrency,
the median per-round speed-up over concurrency 1, and whether every run returned the same
vectors (bit for bit).

    python benchmarks/speed/hosted_embedding.py [--texts 1024] [--batch-inputs 32] [--latency 0.2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import ROOT

sys.path.insert(0, str(ROOT / "tests"))

from tuner.embedding.openai import OpenAIEmbedder

from openai_stub import OpenAIStub

CONCURRENCY = (1, 4, 16)


def texts(count: int) -> list[str]:
    paragraphs = [p.strip() for path in sorted((ROOT / "examples" / "handbook").glob("*.md"))
                  for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    return [f"{paragraphs[i % len(paragraphs)]} ({i})" for i in range(count)]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--batch-inputs", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=3)
    return parser


def main() -> None:
    args = parser().parse_args()
    inputs = texts(args.texts)
    seconds: dict[int, list[float]] = {c: [] for c in CONCURRENCY}
    vectors: dict[int, list[np.ndarray]] = {c: [] for c in CONCURRENCY}
    with OpenAIStub(embedding_dim=256) as stub:
        stub.delay_fn = lambda request: args.latency
        for _ in range(args.repeats):
            for concurrency in CONCURRENCY:
                model = OpenAIEmbedder("stub-embed", base_url=stub.base_url, api_key="bench",
                                       concurrency=concurrency, max_batch_inputs=args.batch_inputs)
                started = time.perf_counter()
                vectors[concurrency].append(model.embed(inputs))
                seconds[concurrency].append(time.perf_counter() - started)
        requests = len(stub.requests_to("/v1/embeddings")) // (args.repeats * len(CONCURRENCY))
    reference = vectors[1][0]
    same = all(np.array_equal(v, reference) for runs in vectors.values() for v in runs)
    print(f"{args.texts} texts, {requests} requests of at most {args.batch_inputs}, {args.latency * 1000:.0f} ms "
          f"per request, median of {args.repeats} interleaved rounds")
    print("| concurrency | seconds | texts/s | speed-up over 1 |")
    print("|---|---|---|---|")
    for concurrency in CONCURRENCY:
        ratio = statistics.median(a / b for a, b in zip(seconds[1], seconds[concurrency]))
        median = statistics.median(seconds[concurrency])
        print(f"| {concurrency} | {median:.2f} | {args.texts / median:,.0f} | {ratio:.2f}x |")
    print(f"same vectors at every concurrency: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
