"""Languages without spaces: BM25 and dense recall on translated manual pages (issue 53).

Two pages per language of Debian's translated manual pages (:data:`SETS`), rendered as ``man -l``
renders them on 3,000 columns (so a paragraph stays on one line) through ``col -b``, trailing
whitespace removed: Simplified Chinese (``manpages-zh`` 1.6.4.0-1, GFDL-1.2+: ssh(1), with
systemctl(1) beside it as a distractor) and Japanese (``manpages-ja`` 0.5.0.0.20221215+dfsg-1:
bzip2(1), with xz(1) beside it). The questions (``benchmarks/data/zh/questions.yaml``,
``benchmarks/data/ja/questions.yaml``: 15 and 14) were written by hand for this benchmark, on the first
page of each.

    apt-get download manpages-zh manpages-ja      # the .debs, from Debian's archive
    python benchmarks/languages/manpages.py build --language zh --deb manpages-zh_1.6.4.0-1_all.deb [--root DIR]
    python benchmarks/languages/manpages.py run --language ja --deb manpages-ja_*.deb [--embedders minilm e5 use] [-k 5]

``build`` extracts the pages into ``ROOT/raw`` (default ``~/.cache/chunkwise-bench/LANGUAGE-manpages``),
says when the .deb or a rendered page differs from the ones the questions were written on (another
groff may wrap or space them otherwise), locates every excerpt exactly once and writes
``ROOT/questions.jsonl``. ``run`` builds, then prints the table of ``benchmarks/languages/ko_chroma.py``.
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
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA
from benchmarks._corpus import BenchError, located_records, sha256_file, tuner_command, write_questions
from benchmarks.languages.ko_chroma import EMBEDDERS, score


@dataclass(frozen=True)
class ManualSet:
    """One language's pages: the .deb's sha256, the man folder inside it, and each page with the
    sha256 of its rendering (groff 1.22.4) the questions were written on."""

    name: str
    deb_sha256: str
    folder: str
    pages: dict[str, str]


SETS = {
    "zh": ManualSet("Chinese (manpages-zh: ssh, systemctl)",
                    "81bae29495f6445db290e3f329f1203eb19b651c2a7ea165b74ebdc853a32ac1", "zh_CN",
                    {"ssh": "a1180ee0e31fbb72e40cdb9d7eb375c49f0921835103cec4fa3a122ea9d62dbc",
                     "systemctl": "18c3fd8faf612e3da41ba2d61a8585fafb8dbbc814d3f0e3516500cb1acbac05"}),
    "ja": ManualSet("Japanese (manpages-ja: bzip2, xz)",
                    "4d270e9a1e83be4de0c072a110892a17dc9caa4b501257324006ac28d82c5743", "ja",
                    {"bzip2": "d0b6e170c0a3b9bd88928e388d0195d99b93272e3169831674aeebd59e2417fc",
                     "xz": "9391fab567c64009a14912e92e1baf16d1b0eb0da0791e8cf4f62bb03fc5d5a6"}),
}
CHUNKINGS = [("token", {"size": 256, "overlap": 0}), ("recursive", {"size": 256, "overlap": 0}),
             ("sentence", {"sentences": 3, "overlap": 0})]


def render(language: str, deb: Path, raw: Path) -> None:
    chosen = SETS[language]
    if not deb.is_file():
        raise BenchError(f"{deb} not found: `apt-get download manpages-{language}`, then give --deb")
    if sha256_file(deb) != chosen.deb_sha256:
        print(f"{deb} is not the .deb the questions were written on", file=sys.stderr)
    raw.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["dpkg-deb", "-x", str(deb), folder], check=True)
        for page, expected in chosen.pages.items():
            source = Path(folder) / "usr" / "share" / "man" / chosen.folder / "man1" / f"{page}.1.gz"
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


def build(language: str, root: Path, deb: Path) -> Path:
    import tuner

    render(language, deb, root / "raw")
    corpus = tuner.load_corpus(root / "raw", name=language)
    records, problems = located_records(corpus, DATA / language / "questions.yaml", language)
    if problems:
        raise BenchError("\n".join(["excerpts not located:", *problems]))
    output = write_questions(root / "questions.jsonl", records)
    print(f"corpus {language}: {len(corpus)} pages in {root / 'raw'}; wrote {len(records)} questions to {output}",
          file=sys.stderr)
    if tuner_command("validate", "--corpus", f"{language}={root / 'raw'}", "--queries", str(output)).returncode != 0:
        raise BenchError(f"chunkwise validate refused {output}")
    return output


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in ("build", "run"):
        sub = commands.add_parser(command)
        sub.add_argument("--language", choices=sorted(SETS), required=True)
        sub.add_argument("--root", type=Path, help="where to build (~/.cache/chunkwise-bench/LANGUAGE-manpages)")
        sub.add_argument("--deb", type=Path, required=True, help="the manpages-LANGUAGE .deb")
        if command == "run":
            sub.add_argument("--embedders", nargs="+", choices=sorted(EMBEDDERS), default=["minilm", "e5", "use"])
            sub.add_argument("-k", type=int, default=5)
    return parser


def main() -> int:
    args = parser().parse_args()
    root = args.root or Path.home() / ".cache" / "chunkwise-bench" / f"{args.language}-manpages"
    root = root.expanduser().resolve()
    try:
        queries = build(args.language, root, args.deb)
        if args.command == "run":
            import tuner

            corpus = tuner.load_corpus(root / "raw", name=args.language)
            evalset = tuner.load_evaluation_set(queries, [corpus])
            print(f"{SETS[args.language].name}, {len(evalset)} questions, k={args.k}, pooled; "
                  f"`python benchmarks/languages/manpages.py run --language {args.language} --deb ... --embedders "
                  f"{' '.join(args.embedders)} -k {args.k}`, {dt.date.today().isoformat()}\n")
            score([corpus], evalset, CHUNKINGS, args.embedders, args.k)
    except (BenchError, subprocess.CalledProcessError) as exc:
        print(f"manpages: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
