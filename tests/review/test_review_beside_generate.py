"""``chunkwise generate`` and ``chunkwise review`` on one questions file at the same time (issue 49):
every question generate reports kept is in the file, and every action review answered is in it.

Before, review's saves (an atomic rename of a new file) raced generate's appends: generate kept
appending to the file review had just replaced, which nobody read again, and review wrote back
what it had read before generate's latest line. Both now write under one lock
(:func:`tuner._io.files.writers_lock`), and generate appends to the file the path names now.

A real review process and a real generate process (through the real openai client against the
tests' stub, which answers a question every 0.3 s while the reviewer accepts what it sees)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"


def _passage(body: dict) -> str:
    user = body["messages"][-1]["content"]
    return user.split("<passage>\n", 1)[1].split("\n</passage>", 1)[0]


def _writer(body: dict) -> str:
    """A slow model: after 0.3 s, a question about the passage's first long sentence (rated 5 when
    asked to critique)."""
    time.sleep(0.3)
    if "<passage>" not in body["messages"][-1]["content"]:
        return json.dumps({"answered": 5})
    passage = _passage(body)
    sentence = next(iter(re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage)), passage.strip().split("\n")[0])
    return json.dumps({"question": "What does the handbook say about: " + " ".join(sentence.split()[:8]) + "?",
                       "references": [{"content": sentence}]})


def test_generate_and_review_on_one_file_lose_nothing(openai_server, review_process, tmp_path):
    openai_server.chat_handler = _writer
    queries = tmp_path / "generated.jsonl"
    generate = [sys.executable, "-m", "tuner.cli", "generate", str(EXAMPLE), "-o", str(queries),
                "--base-url", openai_server.base_url, "--model", "stub-llm", "--relevance-threshold", "0",
                "--duplicate-threshold", "1", "--embedder", "openai:stub-embed", "--max-attempts", "60"]
    environment = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": openai_server.base_url,
                   "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache")}
    # Two questions first, so that review has a file to open.
    first = subprocess.run([*generate, "--n", "2"], capture_output=True, text=True, env=environment, timeout=300)
    assert first.returncode == 0, first.stderr
    review = review_process(EXAMPLE, queries)
    writer = subprocess.Popen([*generate, "--n", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=environment)
    accepted: set[str] = set()
    try:
        # The reviewer accepts every question it sees, as fast as it can, while generate writes.
        while writer.poll() is None or not accepted >= _ids(review):
            for question in review.request("GET", "/api/state")[1]["questions"]:
                if question["id"] in accepted:
                    continue
                status, answer = review.act({"action": "accept", "id": question["id"],
                                             "revision": question["revision"]})
                assert status == 200, answer
                accepted.add(question["id"])
    finally:
        out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert "10 queries (8 new" in out, out
    # Every question generate kept is in the file, once; every accept review answered is saved.
    saved = [json.loads(line) for line in queries.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(saved) == 10 and len({record["id"] for record in saved}) == 10
    assert {record["id"] for record in saved} == accepted
    assert all(record.get("review") == "accepted" for record in saved)
    assert not list(tmp_path.glob(".generated.jsonl.*.tmp"))
    assert review.stop() == 0


def _ids(review) -> set[str]:
    return {question["id"] for question in review.request("GET", "/api/state")[1]["questions"]}
