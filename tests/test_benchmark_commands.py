"""Every benchmark command the docs quote runs as printed (issue 64).

BENCHMARKS.md, README.md and the pages under ``docs/`` (the results pages above all) quote the
command that reproduces each measurement: ``python benchmarks/FOLDER/SCRIPT.py ARGS`` (or ``python -m
benchmarks.FOLDER.SCRIPT ARGS``), in a code block or inline. For each one, the script must exist and
its command line, ``parser()`` (which the script's ``main()`` parses with), must accept the printed
arguments; nothing of the benchmark itself runs. Shell around a command is left out (``nice -n 10``,
``VAR=value`` before it, ``&&``, ``;``, pipes, redirections, ``# comments``), ``~`` is expanded, and
the docs' placeholders read as a reader reads them: ``...`` stands for more of the same (dropped),
``[--flag N]`` for an optional part (taken), ``a|b`` for a choice (each is parsed).

Every benchmark script also builds its command line in ``parser()``, and each is quoted somewhere.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "BENCHMARKS.md", ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Scripts that no longer exist, which a page may still quote as they were run then (the appendix
#: keeps superseded measurements as written): script -> the one page allowed to.
REMOVED = {"benchmarks/held_out_check.py": "docs/results/history.md"}
#: ``python benchmarks/x/y.py`` or ``python -m benchmarks.x.y``, anywhere in a line of code.
COMMAND = re.compile(r"(?:^|\s)python3?\s+(?:-m\s+(?P<module>benchmarks(?:\.\w+)+)|(?P<path>benchmarks/\S+?\.py))"
                     r"(?=\s|$)(?P<rest>.*)")
SHELL_BREAKS = {"&&", "||", ";", "|", "&"}


@dataclass(frozen=True)
class Quoted:
    where: str  # PAGE:LINE
    script: str  # benchmarks/FOLDER/SCRIPT.py
    args: str  # as printed, shell left out after the first break


def code_of(markdown: str) -> list[tuple[int, str]]:
    """(line, text) of each line of code of a page: fenced lines (a trailing ``\\`` joins the next
    line) and inline spans (which may wrap over lines), outside fences."""
    found: list[tuple[int, str]] = []
    lines = markdown.splitlines()
    fence, pending, start = False, "", 0
    prose: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            if not pending:
                start = number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            found.append((start, pending + line))
            pending = ""
        else:
            prose.append((number, line))
    text = "\n".join(line for _, line in prose)
    numbers = [number for number, _ in prose]
    for match in re.finditer(r"(?<!`)`((?:[^`\n]|\n(?![ \t]*\n))+)`(?!`)", text):  # within a paragraph
        found.append((numbers[text.count("\n", 0, match.start())], " ".join(match.group(1).split())))
    return sorted(found)


def quoted_commands(page: Path, root: Path = ROOT) -> list[Quoted]:
    out = []
    name = page.relative_to(root).as_posix()
    for line, code in code_of(page.read_text(encoding="utf-8")):
        rest = code
        while match := COMMAND.search(rest):
            script = match["path"] or match["module"].replace(".", "/") + ".py"
            out.append(Quoted(f"{name}:{line}", script, match["rest"]))
            rest = match["rest"]
    return out


def argument_lists(printed: str) -> list[list[str]]:
    """The argument lists a printed command stands for (see the module's docstring)."""
    lexer = shlex.shlex(printed, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens: list[str] = []
    for token in lexer:
        if token in SHELL_BREAKS:
            break
        tokens.append(token)
    args: list[str] = []
    redirect = False
    for token in tokens:
        if redirect:
            redirect = False
            continue
        if re.fullmatch(r"\d?>>?|<", token):
            redirect = True  # its target is the next token
            continue
        if re.match(r"\d?>>?\S|<\S", token) or token == "...":
            continue
        token = token.removeprefix("[").removesuffix("]")
        if token:
            args.append(os.path.expanduser(token))
    choices = [token.split("|") if "|" in token else [token] for token in args]
    return [list(combination) for combination in itertools.product(*choices)]


def import_script(script: str):
    module = script.removesuffix(".py").replace("/", ".")
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(ROOT))


def problems_of(quoted: Quoted) -> list[str]:
    """Why the quoted command would not run as printed (nothing when it would)."""
    if not (ROOT / quoted.script).is_file():
        if REMOVED.get(quoted.script) == quoted.where.partition(":")[0]:
            return []
        return [f"{quoted.where}: {quoted.script} does not exist"]
    parser = getattr(import_script(quoted.script), "parser", None)
    if parser is None:
        return [f"{quoted.where}: {quoted.script} has no parser() to check `{quoted.args.strip()}` with"]
    try:
        every = argument_lists(quoted.args)
    except ValueError as exc:  # shlex: an unclosed quote
        return [f"{quoted.where}: `{quoted.args.strip()}` does not split as a shell splits it: {exc}"]
    problems = []
    for args in every:
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                parser().parse_args(args)
        except SystemExit as exc:
            if exc.code not in (0, None):  # 0: --help
                message = errors.getvalue().strip().splitlines()[-1:] or ["exit " + str(exc.code)]
                problems.append(f"{quoted.where}: python {quoted.script} {shlex.join(args)}: {message[0]}")
    return problems


QUOTED = [quoted for page in PAGES for quoted in quoted_commands(page)]
SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "benchmarks").glob("*/*.py")
                 if p.name != "__init__.py")


@pytest.mark.parametrize("quoted", QUOTED, ids=[q.where for q in QUOTED])
def test_the_quoted_command_runs_as_printed(quoted):
    assert not problems_of(quoted), "\n".join(problems_of(quoted))


def test_the_docs_quote_commands_of_every_script():
    assert len(QUOTED) > 100  # the pages were read, not an empty list
    unquoted = sorted(set(SCRIPTS) - {q.script for q in QUOTED})
    assert not unquoted, f"no page quotes a command of {unquoted}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_builds_its_command_line_in_parser(script):
    source = (ROOT / script).read_text(encoding="utf-8")
    assert re.search(r"^def parser\(\) -> argparse\.ArgumentParser:", source, flags=re.M), script
    assert re.search(r"\bparser\(\)\.parse_args\(|cli = parser\(\)", source), f"{script}: main() does not use parser()"


def test_the_check_finds_a_missing_script_and_an_unknown_flag(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run\n`python benchmarks/search/no_such.py`, then\n\n```sh\n"
                    "nice -n 10 python benchmarks/search/significance_rates.py --simulations 30 --nonsense \\\n"
                    "    > out.txt 2>&1 && echo done\n"
                    "python -m benchmarks.search.significance_rates [--simulations 300] ... | tee log  # fine\n```\n",
                    encoding="utf-8")
    quoted = quoted_commands(page, root=tmp_path)
    assert [q.where for q in quoted] == ["page.md:2", "page.md:5", "page.md:7"]
    rates = "benchmarks/search/significance_rates.py"
    assert [q.script for q in quoted] == ["benchmarks/search/no_such.py", rates, rates]
    missing, unknown, fine = (problems_of(q) for q in quoted)
    assert len(unknown) == 1 and "unrecognized arguments: --nonsense" in unknown[0]
    assert not fine
    assert missing == ["page.md:2: benchmarks/search/no_such.py does not exist"]


def test_placeholders_read_as_a_reader_reads_them():
    assert argument_lists("run --language zh|ja --deb ... > log.txt") == [
        ["run", "--language", "zh", "--deb"], ["run", "--language", "ja", "--deb"]]
    assert argument_lists("judge a/*.json.gz [--confirm N] [--choose-k] # and 6, 8") == [
        ["judge", "a/*.json.gz", "--confirm", "N", "--choose-k"]]
    assert argument_lists("--root ~/x && python other.py") == [["--root", os.path.expanduser("~/x")]]
    assert argument_lists('--set "fidelity={proxy: late, confirm: 3}" 2>/dev/null') == [
        ["--set", "fidelity={proxy: late, confirm: 3}"]]
