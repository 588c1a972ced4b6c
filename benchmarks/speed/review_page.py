"""How the review page keeps up with a long questions file (issue 54, item 7): the page at 300
questions and at 100,000, side by side in one run, and the ratio.

For each size it writes that many questions about the bundled handbook (the example's 30, repeated
under new ids) to a temporary folder, starts a real ``chunkwise review`` process on them, opens its
page in headless Chromium (the page tests' driver, ``tests/review/conftest.py``; Debian's
``chromium-headless-shell``) and measures: the first load (navigation until the page says it is
ready), three moves to the next question (``j``) and three accepts (``a``, each saved to the file
before the page moves on), each until the page shows the question it moved to, in milliseconds
measured inside the page (``performance.now()``). It prints a table of the medians, the ratio of
100,000 to 300 questions, and the load average before and after (timings on a busy machine are
slower; the ratio is what is compared).

    python benchmarks/speed/review_page.py [--sizes 300,100000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import ROOT

#: The longest a single step may take before the measurement gives up (the page before issue 54 took 26 s).
STEP_LIMIT_S = 600
#: Moves and accepts measured per size (their median is reported).
REPEATS = 3


def _driver():
    """The page tests' Chromium driver (``tests/review/conftest.py``), loaded by path."""
    spec = importlib.util.spec_from_file_location("review_chromium", ROOT / "tests" / "review" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.TIMEOUT_S = STEP_LIMIT_S
    return module


def write_questions(path: Path, count: int) -> None:
    examples = [json.loads(line) for line in (ROOT / "examples/handbook-queries.jsonl").read_text().splitlines()
                if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            out.write(json.dumps(dict(examples[i % len(examples)], id=f"q{i:06d}"), ensure_ascii=False) + "\n")


def timed_key(tab, key: str) -> float:
    """Milliseconds from pressing ``key`` until the question shown changes."""
    return tab.evaluate(f"""new Promise((resolve) => {{
        const before = document.getElementById("qid").textContent, start = performance.now();
        document.dispatchEvent(new KeyboardEvent("keydown", {{key: {json.dumps(key)}, bubbles: true}}));
        (function poll() {{
            if (document.getElementById("qid").textContent !== before) resolve(performance.now() - start);
            else setTimeout(poll, 1);
        }})();
    }})""")


def measure(driver, binary: str, count: int, folder: Path) -> dict[str, float]:
    """The page on ``count`` questions: load, median move, median accept (ms)."""
    queries = folder / f"q{count}.jsonl"
    write_questions(queries, count)
    review = subprocess.Popen([sys.executable, "-m", "tuner.cli", "review", "--corpus", str(ROOT / "examples/handbook"),
                               "--queries", str(queries)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    browser = driver.Chromium(binary, folder / f"profile-{count}")
    try:
        url = review.stdout.readline().split(" at ", 1)[1].split()[0]
        tab = browser.tab()
        started = time.monotonic()
        tab.open(url)
        load = 1000 * (time.monotonic() - started)
        moves = [timed_key(tab, "j") for _ in range(REPEATS)]
        accepts = [timed_key(tab, "a") for _ in range(REPEATS)]
    finally:
        browser.close()
        review.terminate()
        review.communicate(timeout=60)
    saved = sum('"review": "accepted"' in line for line in queries.read_text(encoding="utf-8").splitlines())
    if saved != REPEATS:
        raise SystemExit(f"{count} questions: {saved} accepts saved, not {REPEATS}")
    return {"load": load, "move": statistics.median(moves), "accept": statistics.median(accepts)}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="300,100000", help="question counts, smallest first (default 300,100000)")
    return parser


def main() -> None:
    sizes = [int(n) for n in parser().parse_args().sizes.split(",")]
    driver = _driver()
    binary = driver.chromium_binary()
    if binary is None:
        sys.exit("no Chromium: apt-get install chromium-headless-shell (or set CHUNKWISE_TEST_CHROMIUM)")
    before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        figures = {count: measure(driver, binary, count, Path(folder)) for count in sizes}
    after = os.getloadavg()
    print(f"load average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, "
          f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} (1, 5, 15 min; {os.cpu_count()} CPUs)")
    small, large = sizes[0], sizes[-1]
    print(f"| step (ms; a move, an accept: median of {REPEATS}) | " + " | ".join(f"{n:,} questions" for n in sizes)
          + f" | {large:,} / {small:,} |")
    print("|---|" + "---|" * (len(sizes) + 1))
    for step, name in (("load", "first load"), ("move", "next question (j)"), ("accept", "accept (a), saved")):
        row = " | ".join(f"{figures[n][step]:,.0f}" for n in sizes)
        print(f"| {name} | {row} | {figures[large][step] / figures[small][step]:.1f}x |")


if __name__ == "__main__":
    main()
