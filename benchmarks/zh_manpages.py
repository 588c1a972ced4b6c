"""Chinese, a language without spaces: BM25 and dense recall on translated manual pages (issue 53).

Two pages of Debian's ``manpages-zh`` (1.6.4.0-1, GFDL-1.2+; :data:`PAGES`), the Simplified
Chinese translations of ssh(1) and systemctl(1), rendered as ``man -l`` renders them on 3,000
columns (so a paragraph stays on one line) through ``col -b``, trailing whitespace removed. The 15
questions (``benchmarks/zh/questions.yaml``) were written by hand for this benchmark, on ssh(1);
systemctl(1) is indexed beside it as a distractor.

    apt-get download manpages-zh      # the .deb, from Debian's archive
    python benchmarks/zh_manpages.py build --deb manpages-zh_1.6.4.0-1_all.deb [--root DIR]
    python benchmarks/zh_manpages.py run --deb manpages-zh_1.6.4.0-1_all.deb [--embedders minilm e5 use] [-k 5]

``build`` extracts the pages into ``ROOT/raw`` (default ``~/.cache/chunkwise-bench/zh-manpages``),
says when the .deb or a rendered page differs from the ones the questions were written on (another
groff may wrap or space them otherwise), locates every excerpt exactly once and writes
``ROOT/questions.jsonl``. ``run`` builds, then prints the table of ``benchmarks/ko_chroma.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ko_chroma import EMBEDDERS, score
from realdocs import BenchError, locate, tuner_command, write_questions

CORPUS = "zh"
QUESTIONS = Path(__file__).resolve().parent / "zh" / "questions.yaml"
DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / "zh-manpages"
DEB_SHA256 = "81bae29495f6445db290e3f329f1203eb19b651c2a7ea165b74ebdc853a32ac1"
#: The pages, with the sha256 of their rendering (groff 1.22.4) the questions were written on.
PAGES = {"ssh": "a1180ee0e31fbb72e40cdb9d7eb375c49f0921835103cec4fa3a122ea9d62dbc",
         "systemctl": "18c3fd8faf612e3da41ba2d61a8585fafb8dbbc814d3f0e3516500cb1acbac05"}
CHUNKINGS = [("token", {"size": 256, "overlap": 0}), ("recursive", {"size": 256, "overlap": 0}),
             ("sentence", {"sentences": 3, "overlap": 0})]


def render(deb: Path, raw: Path) -> None:
    if not deb.is_file():
        raise BenchError(f"{deb} not found: `apt-get download manpages-zh`, then give --deb")
    if hashlib.sha256(deb.read_bytes()).hexdigest() != DEB_SHA256:
        print(f"{deb} is not the manpages-zh 1.6.4.0-1 the questions were written on", file=sys.stderr)
    raw.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["dpkg-deb", "-x", str(deb), folder], check=True)
        for page, expected in PAGES.items():
            source = Path(folder) / "usr" / "share" / "man" / "zh_CN" / "man1" / f"{page}.1.gz"
            rendered = subprocess.run(["man", "-l", "-"], input=gzip.decompress(source.read_bytes()),
                                      capture_output=True, check=True,
                                      env={**os.environ, "MANWIDTH": "3000", "MAN_KEEP_FORMATTING": "0"}).stdout
            plain = subprocess.run(["col", "-b"], input=rendered, capture_output=True, check=True).stdout
            text = "\n".join(line.rstrip() for line in plain.decode("utf-8").splitlines()) + "\n"
            (raw / f"{page}.txt").write_text(text, encoding="utf-8")
            digest = hashlib.sha256(text.encode()).hexdigest()
            if expected and digest != expected:
                print(f"{page}.txt renders otherwise than when the questions were written (sha256 {digest[:16]}...)",
                      file=sys.stderr)


def build(root: Path, deb: Path) -> Path:
    import yaml

    import tuner

    render(deb, root / "raw")
    corpus = tuner.load_corpus(root / "raw", name=CORPUS)
    records, problems = [], []
    for question in yaml.safe_load(QUESTIONS.read_text(encoding="utf-8")):
        text = corpus.document(question["document"]).text
        references = []
        for excerpt in question["excerpts"]:
            found = locate(text, excerpt)
            if isinstance(found, str):
                problems.append(f"{question['id']}: excerpt {excerpt[:30]!r}...: {found}")
                break
            start, end = found
            references.append({"document": question["document"], "start_index": start, "end_index": end,
                               "content": text[start:end]})
        else:
            records.append({"id": question["id"], "question": question["question"], "corpus": CORPUS,
                            "references": references})
    if problems:
        raise BenchError("\n".join(["excerpts not located:", *problems]))
    output = write_questions(root / "questions.jsonl", records)
    print(f"corpus {CORPUS}: {len(corpus)} pages in {root / 'raw'}; wrote {len(records)} questions to {output}",
          file=sys.stderr)
    if tuner_command("validate", "--corpus", f"{CORPUS}={root / 'raw'}", "--queries", str(output)).returncode != 0:
        raise BenchError(f"chunkwise validate refused {output}")
    return output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in ("build", "run"):
        sub = commands.add_parser(command)
        sub.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"where to build ({DEFAULT_ROOT})")
        sub.add_argument("--deb", type=Path, required=True, help="manpages-zh_1.6.4.0-1_all.deb")
        if command == "run":
            sub.add_argument("--embedders", nargs="+", choices=sorted(EMBEDDERS), default=["minilm", "e5", "use"])
            sub.add_argument("-k", type=int, default=5)
    args = parser.parse_args()
    root = args.root.expanduser().resolve()
    try:
        queries = build(root, args.deb)
        if args.command == "run":
            import tuner

            corpus = tuner.load_corpus(root / "raw", name=CORPUS)
            evalset = tuner.load_evaluation_set(queries, [corpus])
            print(f"Chinese (manpages-zh: ssh, systemctl), {len(evalset)} questions, k={args.k}, pooled; "
                  f"`python benchmarks/zh_manpages.py run --deb ... --embedders {' '.join(args.embedders)} "
                  f"-k {args.k}`, {dt.date.today().isoformat()}\n")
            score([corpus], evalset, CHUNKINGS, args.embedders, args.k)
    except (BenchError, subprocess.CalledProcessError) as exc:
        print(f"zh_manpages: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
