"""How long the review page takes to move and to accept with many questions: a measurement for a
person to run and read, not a test (pytest collects only ``test_*.py``; no timing is ever asserted).

    python tests/review/page_timing.py [QUESTIONS]     # default 100000

It writes QUESTIONS questions about the bundled handbook (the example's 30, repeated under new ids)
to a temporary folder, starts a real ``chunkwise review`` process on them, opens its page in
headless Chromium (as the page tests do) and prints, in milliseconds measured inside the page
(``performance.now()``): the first load, three moves to the next question (``j``) and three accepts
(``a``), each until the page shows the question it moved to.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import conftest  # the page tests' Chromium driver

ROOT = Path(__file__).resolve().parents[2]
#: The longest a single step may take before the measurement gives up (the old page took 26 s).
STEP_LIMIT_S = 600


def write_questions(path: Path, count: int) -> None:
    examples = [json.loads(line) for line in (ROOT / "examples/handbook-queries.jsonl").read_text().splitlines()
                if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            record = dict(examples[i % len(examples)], id=f"q{i:06d}")
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def timed_key(tab: conftest.Tab, key: str) -> float:
    """Milliseconds from pressing ``key`` until the question shown changes."""
    return tab.evaluate(f"""new Promise((resolve) => {{
        const before = document.getElementById("qid").textContent, start = performance.now();
        document.dispatchEvent(new KeyboardEvent("keydown", {{key: {json.dumps(key)}, bubbles: true}}));
        (function poll() {{
            if (document.getElementById("qid").textContent !== before) resolve(performance.now() - start);
            else setTimeout(poll, 1);
        }})();
    }})""")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    conftest.TIMEOUT_S = STEP_LIMIT_S
    binary = conftest.chromium_binary()
    if binary is None:
        sys.exit("no Chromium: apt-get install chromium-headless-shell")
    with tempfile.TemporaryDirectory() as folder:
        queries = Path(folder) / "q.jsonl"
        write_questions(queries, count)
        review = subprocess.Popen([sys.executable, "-m", "tuner.cli", "review", "--corpus",
                                   str(ROOT / "examples/handbook"), "--queries", str(queries)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        browser = conftest.Chromium(binary, Path(folder) / "profile")
        try:
            url = review.stdout.readline().split(" at ", 1)[1].split()[0]
            tab = browser.tab()
            started = time.monotonic()
            tab.open(url)
            print(f"{count} questions: load {1000 * (time.monotonic() - started):.0f} ms")
            for key, name in (("j", "next question"), ("a", "accept")):
                times = [timed_key(tab, key) for _ in range(3)]
                print(f"{name}: " + ", ".join(f"{t:.0f} ms" for t in times))
        finally:
            browser.close()
            review.terminate()
            review.communicate(timeout=60)


if __name__ == "__main__":
    main()
