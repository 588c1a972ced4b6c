"""A study on a 4-worker Dask LocalCluster beside the same study with ``--jobs 4`` on this machine.

One study definition: the bundled handbook and its 30 questions, a grid space of 12
configurations (token chunker, sizes 128/256/384, overlap 0 or 1/4 of the size, k 3 or 5),
12 trials (so both runs evaluate every configuration and must agree on the best score), the
hosted embedder pointed at the tests' OpenAI-compatible stub server with ``--latency`` per
request (a remote API). Each run gets a fresh database on one throwaway PostgreSQL server
(``tests/postgres.py``; ``CHUNKWISE_TEST_POSTGRES_URL`` to use yours) and its own embedding
cache in it, so both start cold. The cluster (4 worker processes, one thread each, on
127.0.0.1) is started before its clock starts; its start-up is reported apart.

    python benchmarks/speed/cluster.py [--latency 0.2] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import ROOT

sys.path.insert(0, str(ROOT / "tests"))

import sqlalchemy as sa

from tuner.embedding.config import EmbedderConfig
from tuner.tuning import StudySpec, run_study_spec

from openai_stub import OpenAIStub
from postgres import postgres_server

SPACE = """k: {type: categorical, choices: [3, 5]}
chunkers:
  token:
    size: {type: int, low: 128, high: 384, step: 128}
    overlap: {type: fraction, of: size, choices: [0.0, 0.25]}
"""


def fresh_database(server: str) -> str:
    name = f"chunkwise_bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return sa.make_url(server).set(database=name).render_as_string(hide_password=False)


def run(spec: StudySpec) -> tuple[float, float, int]:
    started = time.perf_counter()
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    return time.perf_counter() - started, outcome.best.score, outcome.complete


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=1)
    return parser


def main() -> None:
    args = parser().parse_args()
    os.environ["OPENAI_API_KEY"] = "bench"  # before the cluster starts: its workers inherit it
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory() as tmp, postgres_server() as server, OpenAIStub() as stub:
        stub.delay_fn = lambda request: args.latency
        space = Path(tmp) / "grid.yaml"
        space.write_text(SPACE, encoding="utf-8")
        base = StudySpec(name="bench", corpora=(("handbook", str(ROOT / "examples" / "handbook")),),
                         queries=str(ROOT / "examples" / "handbook-queries.jsonl"), space=str(space),
                         embedder=EmbedderConfig("openai", "stub-embed", base_url=stub.base_url), trials=12,
                         validation=0.0, heartbeat_interval=2, grace_period=10)
        started = time.perf_counter()
        with LocalCluster(n_workers=4, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster:
            startup = time.perf_counter() - started
            local, dask = [], []
            for _ in range(args.repeats):
                local.append(run(base.with_options(storage=fresh_database(server), jobs=4)))
                dask.append(run(base.with_options(storage=fresh_database(server), backend="dask",
                                                    scheduler=cluster.scheduler_address)))
    print(f"12 trials of a 12-configuration grid, {args.latency * 1000:.0f} ms per embedding request, "
          f"{args.repeats} round(s); cluster start-up {startup:.1f} s (not counted)")
    print("| run | seconds | best score | complete |")
    print("|---|---|---|---|")
    for label, results in (("--jobs 4 (local processes)", local), ("Dask LocalCluster, 4 workers", dask)):
        print(f"| {label} | {statistics.median(r[0] for r in results):.1f} | {results[0][1]:.4f} | "
              f"{results[0][2]} |")
    ratio = statistics.median(d[0] / loc[0] for d, loc in zip(dask, local))
    print(f"wall time, Dask / local: {ratio:.2f}; same best score: "
          f"{'yes' if all(d[1] == loc[1] for d, loc in zip(dask, local)) else 'NO'}")


if __name__ == "__main__":
    main()
