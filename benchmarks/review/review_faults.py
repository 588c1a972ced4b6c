"""A fault campaign against a real ``chunkwise review`` process (issue 54), and the other commands
that read a questions file (``validate``, ``tune --dry-run``, ``evaluate``) on the same files.

Each attempt states what it expects (a one-line message and exit status 2 from the command line; a
JSON error with the right status from the server; the file unchanged) and records what happened.
An attempt misbehaves on a traceback (on the server's terminal or the command line's), a dropped
connection, a hang (over 10 s), a file half-written or lost, a message that names the wrong thing
or differs between the commands, an error body that is not JSON, or an exit status other than 2
for bad input. No browser is needed (the page's speed is ``benchmarks/speed/review_page.py``).

    python benchmarks/review/review_faults.py [--group NAME] [--list]

It prints each attempt as it runs, then the attempts and misbehaviours per group, each misbehaving
attempt with what was expected (every attempt with ``--list``) and the load average; the exit
status is 1 when any attempt misbehaves. About 7 minutes on 2 cores; the file-reading commands run
some 200 times. The results of issue 54's campaign: ``docs/results/review-faults.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

ROOT = next((p for p in (Path(__file__).resolve().parents[2], Path.cwd()) if (p / "examples" / "handbook").is_dir()),
            Path.cwd())
CORPUS = ROOT / "examples" / "handbook"
QUESTIONS = ROOT / "examples" / "handbook-queries.jsonl"
#: Seconds after which a command or a request counts as hung.
HANG_S = 10
#: Seconds a command line may take to start and refuse (an interpreter start and a corpus load).
CLI_S = 30
PY = sys.executable


@dataclass
class Attempt:
    group: str
    name: str
    expected: str
    actual: str
    bad: bool


RESULTS: list[Attempt] = []


def record(group: str, name: str, expected: str, actual: str, bad: bool) -> None:
    RESULTS.append(Attempt(group, name, expected, actual, bad))
    print(f"  {'MISBEHAVES' if bad else 'ok':10} {group}: {name}: {actual[:160]}", flush=True)


def good_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]


def jsonl(records: list[Any]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def ref(document: str, excerpt: str) -> dict[str, Any]:
    text = (CORPUS / document).read_text(encoding="utf-8")
    start = text.index(excerpt)
    return {"document": document, "start_index": start, "end_index": start + len(excerpt), "content": excerpt}


# ------------------------------------------------------------------------------------ processes

@dataclass
class Done:
    rc: int | None
    out: str
    err: str
    seconds: float
    hung: bool


def cli(*args: str, timeout: float = CLI_S, env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = ()) -> Done:
    """A chunkwise command to completion (killed after ``timeout`` s: hung)."""
    started = time.monotonic()
    process = subprocess.Popen([*prefix, PY, "-m", "tuner.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        hung = True
    return Done(process.returncode, out, err, time.monotonic() - started, hung)


def refused_cleanly(done: Done, *needles: str) -> tuple[bool, str]:
    """(misbehaves, what happened) for a command expected to refuse with status 2 and a message
    holding every needle, and no traceback."""
    message = " | ".join(line for line in done.err.splitlines() if line.strip())[:300]
    if done.hung:
        return True, f"hung (killed after {CLI_S} s); stdout {done.out[:100]!r}"
    if "Traceback" in done.err or "Traceback" in done.out:
        return True, f"traceback: {done.err.strip().splitlines()[-1] if done.err.strip() else ''}"
    if done.rc != 2:
        return True, f"exit {done.rc}: {message}"
    missing = [n for n in needles if n not in done.err]
    if missing:
        return True, f"exit 2 but the message lacks {missing}: {message}"
    return False, f"exit 2: {message}"


class Review:
    """A real ``chunkwise review`` process, its standard error in a file."""

    count = 0
    started: ClassVar[list[Review]] = []

    def __init__(self, folder: Path, queries: Path | str, *options: str, corpus: Path = CORPUS) -> None:
        Review.count += 1
        self.err_path = folder / f"review-{Review.count}.err"
        self.queries = Path(queries)
        with self.err_path.open("w") as err:
            self.process = subprocess.Popen([PY, "-m", "tuner.cli", "review", "--corpus", str(corpus),
                                             "--queries", str(queries), *options], cwd=ROOT,
                                            stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        Review.started.append(self)
        line = _readline(self.process.stdout, CLI_S)
        if " at http" not in line:
            self.stop()
            raise RuntimeError(f"review did not start: {line!r} {self.stderr()[-500:]}")
        self.url = line.split(" at ", 1)[1].split()[0]
        base, self.token = self.url.split("?token=")
        self.host = base.split("//", 1)[1].rstrip("/")
        self.port = int(self.host.rsplit(":", 1)[1])
        self.address = self.host.rsplit(":", 1)[0].strip("[]")
        self.mark = len(self.stderr())  # what it printed before serving: the corpus, the file

    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def new_stderr(self) -> str:
        """What the review wrote on its terminal since the last call."""
        time.sleep(0.05)
        text = self.stderr()
        new, self.mark = text[self.mark:], len(text)
        return new

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process.stdout.close()
        return self.process.returncode

    # -------------------------------------------------------------------------------- requests

    def raw(self, data: bytes, timeout: float = HANG_S, family: int = socket.AF_INET) -> Reply:
        address = "::1" if family == socket.AF_INET6 else self.address
        return raw_request((address, self.port), data, timeout, family)

    def request(self, method: str, path: str, body: bytes | str | dict | None = None,
                headers: dict[str, str] | None = None, token: bool = True, host: str | None = "") -> Reply:
        sent: dict[str, str] = {}
        if host is not None:
            sent["Host"] = host or self.host
        if token:
            sent["X-Chunkwise-Token"] = self.token
        if isinstance(body, dict | list):
            body = json.dumps(body)
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        if data is not None:
            sent["Content-Type"] = "application/json"
            sent["Content-Length"] = str(len(data))
        sent |= headers or {}
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items() if v is not None)
        return self.raw(head.encode("latin-1") + b"Connection: close\r\n\r\n" + (data or b""))

    def act(self, action: Any, **headers: str) -> Reply:
        return self.request("POST", "/api/action", action, headers)

    def state(self) -> Reply:
        return self.request("GET", "/api/state")


def _readline(stream: Any, timeout: float) -> str:
    deadline, data = time.monotonic() + timeout, b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            break
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


@dataclass
class Reply:
    status: int | None
    headers: dict[str, str]
    body: bytes
    problem: str | None  # "dropped", "hung", "reset", or None

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def error(self) -> str:
        value = self.json()
        return value.get("error", "") if isinstance(value, dict) else ""

    def describe(self) -> str:
        if self.problem:
            return f"{self.problem} (status {self.status})"
        return f"{self.status} {self.body[:200].decode('utf-8', 'replace')}"


def raw_request(address: tuple[str, int], data: bytes, timeout: float, family: int = socket.AF_INET,
                send_all: bool = True) -> Reply:
    """Send ``data`` and read one HTTP answer (headers, then Content-Length bytes)."""
    connection = socket.socket(family, socket.SOCK_STREAM)
    connection.settimeout(timeout)
    deadline = time.monotonic() + timeout
    received = bytearray()
    try:
        connection.connect(address)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # answered before reading it all:
            connection.sendall(data)                                        # its answer may still be there
        while True:
            head_end = received.find(b"\r\n\r\n", 0, 1 << 16)
            if head_end >= 0:
                head = received[:head_end].decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
                length = int(headers.get("content-length", "0"))
                status = int(head[0].split()[1])
                if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
                    del received[:head_end + 4]
                    continue
                if len(received) >= head_end + 4 + length:
                    return Reply(status, headers, bytes(received[head_end + 4: head_end + 4 + length]), None)
            if time.monotonic() > deadline:
                return Reply(None, {}, bytes(received), "hung")
            chunk = connection.recv(1 << 20)
            if not chunk:
                return Reply(None, {}, bytes(received), "dropped" if not received else "cut short")
            received += chunk
    except TimeoutError:
        return Reply(None, {}, bytes(received), "hung")
    except ConnectionResetError:
        return Reply(None, {}, bytes(received), "reset (answer lost)")
    except OSError as exc:
        return Reply(None, {}, bytes(received), f"could not connect ({exc})")
    finally:
        connection.close()


def judge(review: Review, group: str, name: str, reply: Reply, status: int, *needles: str,
          unchanged: tuple[Path, bytes] | None = None, absent: tuple[str, ...] = ()) -> None:
    """Record a request expected to be answered ``status`` as JSON (an error naming ``needles``
    when it is one), with nothing on the review's terminal and the file as it was."""
    expected = f"{status} JSON" + (f" naming {list(needles)}" if needles else "")
    bad, why = False, reply.describe()
    terminal = review.new_stderr()
    if reply.problem:
        bad = True
    elif reply.status != status:
        bad, why = True, f"status {reply.status} (expected {status}): {why}"
    elif not reply.headers.get("content-type", "").startswith("application/json") or reply.json() is None:
        bad, why = True, f"not a JSON answer: {why}"
    elif status >= 400 and not reply.error():
        bad, why = True, f"no 'error' in the answer: {why}"
    elif [n for n in needles if n not in reply.error()]:
        bad, why = True, f"the message lacks {[n for n in needles if n not in reply.error()]}: {reply.error()[:300]}"
    elif [n for n in absent if n in reply.error()]:
        bad, why = True, f"the message says {[n for n in absent if n in reply.error()]}: {reply.error()[:300]}"
    if terminal.strip():
        bad, why = True, f"the terminal printed {terminal.strip()[-300:]!r}; {why}"
    if unchanged is not None and unchanged[0].read_bytes() != unchanged[1]:
        bad, why = True, f"the file changed; {why}"
    record(group, name, expected, why, bad)


# ------------------------------------------------------------------------------------ files

#: A line that breaks a rule of the reader, and what every command must say of it.
MALFORMED: list[tuple[str, Callable[[dict], Any], list[str]]] = [
    ("revision 'x'", lambda r: r | {"revision": "x"}, ["field 'revision' must be a whole number", "'x'"]),
    ("revision 1.5", lambda r: r | {"revision": 1.5}, ["field 'revision' must be a whole number", "1.5"]),
    ("revision true", lambda r: r | {"revision": True}, ["field 'revision' must be a whole number", "True"]),
    ("revision null", lambda r: r | {"revision": None}, ["field 'revision' must be a whole number", "None"]),
    ("revision -1", lambda r: r | {"revision": -1}, ["field 'revision' must be a whole number", "-1"]),
    ("revision NaN", lambda r: r | {"revision": float("nan")}, ["field 'revision' must be a whole number", "nan"]),
    ("id null", lambda r: r | {"id": None}, ["field 'id' must be", "None"]),
    ("id true", lambda r: r | {"id": True}, ["field 'id' must be", "True"]),
    ("id a list", lambda r: r | {"id": ["q"]}, ["field 'id' must be", "['q']"]),
    ("references an object", lambda r: r | {"references": {}}, ["field 'references' must be list"]),
    ("references a string", lambda r: r | {"references": "x"}, ["field 'references' must be list", "'x'"]),
    ("references null", lambda r: r | {"references": None}, ["field 'references' must be list", "None"]),
    ("references [1]", lambda r: r | {"references": [1]}, ["reference 1: a reference is an object", "got 1"]),
    ("references [\"x\"]", lambda r: r | {"references": ["x"]}, ["reference 1: a reference is an object"]),
    ("reference without document", lambda r: r | {"references": [{"content": "Disk"}]},
     ["reference 1: missing field 'document'"]),
    ("reference without content", lambda r: r | {"references": [{"document": "installation.md"}]},
     ["reference 1: missing field 'content'"]),
    ("reference document 5", lambda r: r | {"references": [{"document": 5, "content": "Disk"}]},
     ["field 'document' must be str"]),
    ("reference negative offset", lambda r: r | {"references": [dict(r["references"][0], start_index=-5)]},
     ["offsets must be >= 0"]),
    ("reference one offset", lambda r: r | {"references": [{k: v for k, v in r["references"][0].items()
                                                            if k != "end_index"}]},
     ["'start_index' without its pair"]),
    ("reference offset 1.5", lambda r: r | {"references": [dict(r["references"][0], start_index=1.5)]},
     ["field 'start_index' must be int", "1.5"]),
    ("reference offset true", lambda r: r | {"references": [dict(r["references"][0], end_index=True)]},
     ["field 'end_index' must be int", "True"]),
    ("reference blank content", lambda r: r | {"references": [{"document": "installation.md", "content": "  \n"}]},
     ["field 'content' is empty (only white space)"]),
    ("reference twice", lambda r: r | {"references": [r["references"][0], r["references"][0]]},
     ["references 1 and 2 are the same excerpt"]),
    ("question 5", lambda r: r | {"question": 5}, ["field 'question' must be str", "5"]),
    ("question null", lambda r: r | {"question": None}, ["field 'question' must be str"]),
    ("question missing", lambda r: {k: v for k, v in r.items() if k != "question"}, ["missing field 'question'"]),
    ("question empty", lambda r: r | {"question": ""}, ["empty question"]),
    ("question blank", lambda r: r | {"question": " \t "}, ["empty question"]),
    ("references []", lambda r: r | {"references": []}, ["no references"]),
    ("origin 5", lambda r: r | {"origin": 5}, ["field 'origin' must be one of hand, generated", "5"]),
    ("origin 'llm'", lambda r: r | {"origin": "llm"}, ["field 'origin' must be one of", "'llm'"]),
    ("stale 'yes'", lambda r: r | {"stale": "yes"}, ["field 'stale' must be true or false", "'yes'"]),
    ("stale 1", lambda r: r | {"stale": 1}, ["field 'stale' must be true or false"]),
    ("model 5", lambda r: r | {"model": 5}, ["field 'model' must be str", "5"]),
    ("review 'maybe'", lambda r: r | {"review": "maybe"}, ["field 'review' must be one of accepted", "'maybe'"]),
    ("corpus 5", lambda r: r | {"corpus": 5}, ["field 'corpus' must be str"]),
]

#: Whole lines that are not a question, and what every command must say of them.
BROKEN_LINES: list[tuple[str, str, list[str]]] = [
    ("not JSON", '{"id": "x", "question": ', ["not valid JSON"]),
    ("a JSON list", "[1, 2]", ["expected a JSON object", "a list"]),
    ("JSON null", "null", ["expected a JSON object", "null"]),
    ("a JSON string", '"q"', ["expected a JSON object", "a string"]),
    ("nested 100,000 deep", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", ["nested too deep"]),
    ("a 5,000-digit integer", '{"id": "x", "question": "Q?", "revision": ' + "9" * 5000 + "}",
     ["integer too long"]),
    ("a lone surrogate", '{"id": "x", "question": "Why \\udc80?", "references": []}', ["lone surrogate"]),
    ("a BOM inside the file", "\ufeff" + json.dumps({"id": "x", "question": "Q?", "references": []}),
     ["not valid JSON"]),
]


def malformed_files(folder: Path) -> Iterator[tuple[str, Path, list[str], int]]:
    """(name, file, needles, line) for each malformed questions file: the example's 30 questions
    with line 2 broken."""
    records = good_records()
    for name, change, needles in MALFORMED:
        path = folder / f"m{len(name)}-{abs(hash(name)) % 10**8}.jsonl"
        broken = list(records)
        broken[1] = change(dict(records[1]))
        path.write_text(jsonl(broken), encoding="utf-8")
        yield name, path, needles, 2
    for name, line, needles in BROKEN_LINES:
        path = folder / f"b{abs(hash(name)) % 10**8}.jsonl"
        lines = jsonl(records).splitlines(keepends=True)
        lines.insert(1, line + "\n")
        path.write_text("".join(lines), encoding="utf-8")
        yield name, path, needles, 2
    path = folder / "dup.jsonl"
    path.write_text(jsonl([records[0], records[1] | {"id": records[0]["id"]}, *records[2:]]), encoding="utf-8")
    yield "a repeated id", path, ["duplicate query id 'q01'"], 2
    path = folder / "dup-rejected.jsonl"
    path.write_text(jsonl([records[0] | {"review": "rejected"}, records[1] | {"id": records[0]["id"]}, *records[2:]]),
                    encoding="utf-8")
    yield "a repeated id, the first rejected", path, ["duplicate query id 'q01'"], 2
    path = folder / "badutf8.jsonl"
    path.write_bytes(jsonl(records[:1]).encode() + b'{"id": "x", "question": "caf\xe9?"}\n')
    yield "invalid UTF-8", path, ["UTF-8"], 2
    path = folder / "unknown-doc.jsonl"
    path.write_text(jsonl([records[0], records[1] | {"references": [dict(records[1]["references"][0],
                                                                            document="nope.md")]}]), encoding="utf-8")
    yield "an unknown document", path, ["'nope.md'"], 2
    path = folder / "other-corpus.jsonl"
    path.write_text(jsonl([records[0], records[1] | {"corpus": "other"}]), encoding="utf-8")
    yield "another corpus", path, ["'other'"], 2


def error_text(err: str) -> str:
    """The error a command printed: from its "chunkwise: error:" line to the end."""
    at = err.find("chunkwise: error:")
    return err[at:].strip() if at >= 0 else ""


def group_files(tmp: Path) -> None:
    """Each malformed file given to review, validate, tune --dry-run and evaluate: each refuses it
    (status 2) with the same message naming the line and the value; nothing is written."""
    folder = tmp / "files"
    folder.mkdir()
    for name, path, needles, line in malformed_files(folder):
        before = path.read_bytes()
        where = f"{path}:{line}"
        runs = {
            "review": cli("review", "--corpus", str(CORPUS), "--queries", str(path)),
            "validate": cli("validate", "--corpus", str(CORPUS), "--queries", str(path)),
            "tune --dry-run": cli("tune", "--name", "t", "--corpus", str(CORPUS), "--queries", str(path),
                                  "--dry-run", "--storage", f"sqlite:///{folder}/s.db"),
            "evaluate": cli("evaluate", "--corpus", str(CORPUS), "--queries", str(path), "--method", "bm25"),
        }
        problems, messages = [], {}
        for command, done in runs.items():
            bad, what = refused_cleanly(done, *needles)
            if bad:
                problems.append(f"{command}: {what}")
            messages[command] = error_text(done.err)
        if name != "invalid UTF-8" and not all(where in m for m in messages.values()):
            problems.append(f"a message does not name {where}: {messages}")
        distinct = set(messages.values())
        if len(distinct) > 1:
            problems.append("the commands say it differently: " + " / ".join(f"{c}: {m[:160]}"
                                                                               for c, m in messages.items()))
        if path.read_bytes() != before:
            problems.append("the file was changed")
        record("files", name, f"all four refuse, status 2, one message naming {where} and {needles}",
               "; ".join(problems) if problems else f"all refuse: {messages['review'][:150]}", bool(problems))


def group_accepted_files(tmp: Path) -> None:
    """Files every command accepts: a BOM, CRLF, UTF-16, an id that is a number, a huge revision,
    offsets as digit strings, an extra field, blank lines; review opens them and saves an action
    without losing a byte of what it does not change."""
    folder = tmp / "accepted"
    folder.mkdir()
    records = good_records()
    variants = {
        "a BOM": ("\ufeff" + jsonl(records)).encode(),
        "CRLF line endings": jsonl(records).replace("\n", "\r\n").encode(),
        "UTF-16 with its BOM": jsonl(records).encode("utf-16"),
        "an id that is a number": jsonl([records[0] | {"id": 7}, *records[1:]]).encode(),
        "a revision of 10**30": jsonl([records[0] | {"revision": 10**30}, *records[1:]]).encode(),
        "offsets as digit strings": jsonl([records[0] | {"references": [
            {k: str(v) if k.endswith("_index") else v for k, v in records[0]["references"][0].items()}]},
            *records[1:]]).encode(),
        "an unknown field and blank lines": ("\n\n" + jsonl([records[0] | {"note": [1, {"x": None}]}, *records[1:]])
                                             + "\n  \n").encode(),
        "no id on any line": jsonl([{k: v for k, v in r.items() if k != "id"} for r in records]).encode(),
    }
    for name, data in variants.items():
        path = folder / f"{abs(hash(name)) % 10**8}.jsonl"
        path.write_bytes(data)
        problems = []
        for command in (("validate",), ("evaluate", "--method", "bm25")):
            done = cli(command[0], "--corpus", str(CORPUS), "--queries", str(path), *command[1:])
            if done.rc != 0 or "Traceback" in done.err:
                problems.append(f"{command[0]} exit {done.rc}: {done.err.strip()[-200:]}")
        try:
            review = Review(folder, path)
        except RuntimeError as exc:
            record("accepted files", name, "opened by all; an accept saved", f"review refused: {exc}", True)
            continue
        state = review.state()
        first = state.json()["questions"][0] if state.status == 200 else None
        if first is None:
            problems.append(f"state: {state.describe()}")
        else:
            reply = review.act({"action": "accept", "id": first["id"], "revision": first["revision"]})
            if reply.status != 200:
                problems.append(f"accept: {reply.describe()}")
        terminal = review.new_stderr()
        review.stop()
        if "Traceback" in review.stderr() or "failed" in terminal:
            problems.append(f"terminal: {review.stderr()[-300:]}")
        done = cli("validate", "--corpus", str(CORPUS), "--queries", str(path))
        if done.rc != 0:
            problems.append(f"validate after the review: {done.err.strip()[-200:]}")
        saved = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if len(saved) != len(records) or any(s["question"] != r["question"] for s, r in zip(saved, records)):
            problems.append("questions lost or changed")
        if name == "an unknown field and blank lines" and saved[0].get("note") != [1, {"x": None}]:
            problems.append("the unknown field was lost")
        if name == "a revision of 10**30" and saved[0].get("revision") != 10**30 + 1:
            problems.append(f"revision saved as {saved[0].get('revision')!r}")
        record("accepted files", name, "opened by all; an accept saved, nothing else changed",
               "; ".join(problems) or "opened, accepted, still valid", bool(problems))


def group_paths(tmp: Path) -> None:
    """--queries that is not a questions file: refused at once, by review and validate alike."""
    folder = tmp / "paths"
    folder.mkdir()
    fifo = folder / "fifo.jsonl"
    os.mkfifo(fifo)
    directory = folder / "dir.jsonl"
    directory.mkdir()
    to_null = folder / "null.jsonl"
    to_null.symlink_to("/dev/null")
    loop = folder / "loop.jsonl"
    loop.symlink_to(loop)
    broken = folder / "broken.jsonl"
    broken.symlink_to(folder / "missing" / "x.jsonl")
    under_file = folder / "afile"
    under_file.write_text("x")
    socket_path = folder / "sock.jsonl"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(socket_path))
    cases = [
        ("a FIFO", fifo, ["is a FIFO"]),
        ("/dev/null", Path("/dev/null"), ["is a character device"]),
        ("/dev/zero", Path("/dev/zero"), ["is a character device"]),
        ("a folder", directory, ["is a directory"]),
        ("a link to /dev/null", to_null, ["is a character device"]),
        ("a link loop", loop, ["symbolic link loop"]),
        ("a link into a folder that does not exist", broken, [str(folder / "missing")]),
        ("a socket", socket_path, ["socket"]),
        ("a path under a file", under_file / "q.jsonl", [str(under_file)]),
        ("a folder that does not exist", folder / "missing" / "q.jsonl", ["missing"]),
        ("a CSV file", Path(shutil.copy(QUESTIONS, folder / "q.csv")), ["JSONL"]),
        ("standard input ('-')", Path("-"), ["--queries -", "give the path of"]),
        ("an empty value ('')", Path(""), ["--queries is empty"]),
    ]
    for name, path, needles in cases:
        done = cli("review", "--corpus", str(CORPUS), "--queries", "" if name == "an empty value ('')" else str(path),
                   timeout=HANG_S + 5)
        bad, what = refused_cleanly(done, *needles)
        if not bad and done.seconds > HANG_S:
            bad, what = True, f"took {done.seconds:.0f} s: {what}"
        if not bad and name not in ("a CSV file", "a folder that does not exist", "a path under a file",
                                    "standard input ('-')", "an empty value ('')"):
            other = cli("validate", "--corpus", str(CORPUS), "--queries", str(path), timeout=HANG_S + 5)
            bad, vwhat = refused_cleanly(other, *needles)
            if bad:
                what = f"review refuses but validate: {vwhat}"
        record("paths", name, f"refused at once (status 2) naming {needles}", what, bad)
    listener.close()
    # A file that cannot be read: review as another user (root reads everything).
    unreadable = folder / "secret.jsonl"
    unreadable.write_text(jsonl(good_records()))
    os.chmod(unreadable, 0)
    os.chmod(folder, 0o777)
    os.chmod(tmp, 0o755)
    if shutil.which("setpriv") and os.geteuid() == 0:
        done = cli("review", "--corpus", str(CORPUS), "--queries", str(unreadable),
                   prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
                   env=dict(os.environ, CHUNKWISE_CACHE_DIR=str(folder / "cache"), HOME=str(folder)))
        bad, what = refused_cleanly(done, "Permission denied", str(unreadable))
        record("paths", "a file that cannot be read", "refused (status 2): permission denied, naming it", what, bad)
    elif os.geteuid() != 0:
        done = cli("review", "--corpus", str(CORPUS), "--queries", str(unreadable))
        bad, what = refused_cleanly(done, "Permission denied", str(unreadable))
        record("paths", "a file that cannot be read", "refused (status 2): permission denied, naming it", what, bad)


def group_hosts(tmp: Path) -> None:
    """--host and --port values."""
    folder = tmp / "hosts"
    folder.mkdir()
    queries = folder / "q.jsonl"
    queries.write_text(jsonl(good_records()))
    for host, needles in (("", ["--host is empty"]), (" ", ["--host is empty"]),
                          ("no-such-host.invalid", ["cannot serve on no-such-host.invalid"]),
                          ("192.0.2.1", ["cannot serve on 192.0.2.1", "assign"]),
                          ("[::1]", ["[::1]"])):
        done = cli("review", "--corpus", str(CORPUS), "--queries", str(queries), "--host", host, timeout=HANG_S + 5)
        bad, what = refused_cleanly(done, *needles)
        if done.out.strip():
            bad, what = True, f"printed {done.out.strip()!r}: {what}"
        record("hosts", f"--host {host!r}", f"refused (status 2) naming {needles}", what, bad)
    for port, needles in (("-1", ["--port -1"]), ("70000", ["--port 70000"]), ("x", ["--port", "'x'"]),
                          ("1e3", ["--port"])):
        done = cli("review", "--corpus", str(CORPUS), "--queries", str(queries), "--port", port, timeout=HANG_S + 5)
        bad, what = refused_cleanly(done, *needles)
        record("hosts", f"--port {port}", f"refused (status 2) naming {needles}", what, bad)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("review", "--corpus", str(CORPUS), "--queries", str(queries), "--port", str(port),
                   timeout=HANG_S + 5)
        bad, what = refused_cleanly(done, f"cannot serve on 127.0.0.1:{port}", "in use")
        record("hosts", "a port in use", "refused (status 2): address in use", what, bad)
    for host, family, good_hosts, bad_hosts in (
            ("0.0.0.0", socket.AF_INET, ["127.0.0.1", "localhost"], ["evil.example"]),
            ("::1", socket.AF_INET6, ["[::1]", "localhost"], ["evil.example", "[::2]"]),
            ("localhost", socket.AF_INET, ["localhost", "127.0.0.1"], ["evil.example"]),
            ("::", socket.AF_INET6, ["[::1]"], ["evil.example"])):
        try:
            review = Review(folder, queries, "--host", host)
        except RuntimeError as exc:
            record("hosts", f"--host {host}", "serves there", f"did not start: {exc}", True)
            continue
        problems = []
        bound = review.address
        if host in ("::1", "::") and ":" not in bound:
            problems.append(f"printed {review.url} for {host}")
        for name in good_hosts:
            reply = review.raw(f"GET /api/state HTTP/1.1\r\nHost: {name}:{review.port}\r\nX-Chunkwise-Token: "
                               f"{review.token}\r\nConnection: close\r\n\r\n".encode(), family=family)
            if reply.status != 200:
                problems.append(f"Host {name}: {reply.describe()}")
        for name in bad_hosts:
            reply = review.raw(f"GET /api/state HTTP/1.1\r\nHost: {name}:{review.port}\r\nX-Chunkwise-Token: "
                               f"{review.token}\r\nConnection: close\r\n\r\n".encode(), family=family)
            if reply.status != 403 or not reply.error():
                problems.append(f"Host {name}: {reply.describe()}")
        if host == "0.0.0.0":  # on every interface: this machine's other address is a name it answers to
            with contextlib.suppress(OSError):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                    probe.connect(("192.0.2.1", 9))
                    own = probe.getsockname()[0]
                reply = raw_request((own, review.port), f"GET /api/state HTTP/1.1\r\nHost: {own}:{review.port}\r\n"
                                    f"X-Chunkwise-Token: {review.token}\r\nConnection: close\r\n\r\n".encode(), HANG_S)
                if reply.status != 200:
                    problems.append(f"own address {own}: {reply.describe()}")
        if host in ("localhost", "::1"):  # bound there only: not reachable on another interface
            with contextlib.suppress(OSError):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                    probe.connect(("192.0.2.1", 9))
                    own = probe.getsockname()[0]
                with socket.socket() as other:
                    other.settimeout(3)
                    if other.connect_ex((own, review.port)) == 0:
                        problems.append(f"reachable on {own}")
        terminal = review.new_stderr()
        review.stop()
        if terminal.strip() or "Traceback" in review.stderr():
            problems.append(f"terminal: {review.stderr()[-200:]}")
        record("hosts", f"--host {host}", f"serves on {host} only; Host names checked",
               "; ".join(problems) or f"served at {review.url.split('?')[0]}, Host names checked", bool(problems))


def group_requests(tmp: Path) -> None:
    """Requests built to break the server, against one review of the example's 30 questions."""
    folder = tmp / "requests"
    folder.mkdir()
    queries = folder / "q.jsonl"
    queries.write_text(jsonl(good_records()))
    review = Review(folder, queries)
    g = "requests"
    same = lambda: (queries, queries.read_bytes())  # noqa: E731
    accept = {"action": "accept", "id": "q01", "revision": 0}
    # token
    judge(review, g, "no token", review.request("GET", "/api/state", token=False), 403, "token", unchanged=same())
    judge(review, g, "a wrong token", review.request("GET", "/api/state", headers={"X-Chunkwise-Token": "nope"}),
          403, "token")
    judge(review, g, "a token of non-ASCII bytes",
          review.raw(f"GET /api/state HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: ".encode()
                     + "é\u00ff".encode("latin-1") + b"\r\nConnection: close\r\n\r\n"), 403, "token")
    judge(review, g, "the token in the address", review.request("GET", f"/api/state?token={review.token}",
                                                                 token=False), 200)
    judge(review, g, "a token in the address and a wrong one in the header",
          review.request("GET", f"/api/state?token={review.token}", headers={"X-Chunkwise-Token": "x"}), 403)
    judge(review, g, "the page without a token", review.request("GET", "/", token=False), 403, "token")
    judge(review, g, "a write without a token", review.request("POST", "/api/action", accept, token=False), 403,
          unchanged=same())
    # routes and methods
    judge(review, g, "an unknown path", review.request("GET", "/etc/passwd"), 404, "no such page")
    judge(review, g, "a document by a path", review.request("GET", "/api/document?id=../../../etc/passwd"), 404,
          "no document")
    judge(review, g, "a document without an id", review.request("GET", "/api/document"), 404, "no document")
    judge(review, g, "a document", review.request("GET", "/api/document?id=installation.md"), 200)
    judge(review, g, "PUT /api/action", review.request("PUT", "/api/action", accept), 405, "not allowed",
          unchanged=same())
    judge(review, g, "DELETE /api/state", review.request("DELETE", "/api/state"), 405, "not allowed")
    judge(review, g, "GET /api/action", review.request("GET", "/api/action"), 405, "not allowed")
    judge(review, g, "POST /api/state", review.request("POST", "/api/state", {}), 405, "not allowed")
    judge(review, g, "PATCH /api/action", review.request("PATCH", "/api/action", accept), 501, unchanged=same())
    judge(review, g, "OPTIONS *", review.request("OPTIONS", "*"), 501)
    # bodies
    judge(review, g, "a text/plain body", review.request("POST", "/api/action", json.dumps(accept | {"id": "q02"}),
                                                         {"Content-Type": "text/plain"}), 200)
    judge(review, g, "an empty body", review.act(""), 400, "not valid JSON", unchanged=same())
    judge(review, g, "a body of invalid UTF-8", review.act(b'{"action": "accept", "id": "q\xff"}'), 400, "not UTF-8")
    judge(review, g, "NaN as a revision", review.act('{"action": "accept", "id": "q03", "revision": NaN}'), 400,
          "revision", "nan", unchanged=same())
    judge(review, g, "Infinity as a revision",
          review.act('{"action": "accept", "id": "q03", "revision": Infinity}'), 400, "revision", "inf")
    judge(review, g, "NaN as an offset", review.act(
        '{"action": "edit", "id": "q03", "revision": 0, "question": "Q?", "references": '
        '[{"document": "installation.md", "start_index": NaN, "end_index": 20}]}'), 400, "offsets", unchanged=same())
    judge(review, g, "JSON nested 100,000 deep", review.act("[" * 100_000 + "]" * 100_000), 400, "nested too deep")
    judge(review, g, "a 5,000-digit revision",
          review.act('{"action": "accept", "id": "q03", "revision": ' + "9" * 5000 + "}"), 400, "integer too long")
    judge(review, g, "a revision of 10**100", review.act(accept | {"id": "q03", "revision": 10**100}), 409,
          "revision 0", unchanged=same())
    judge(review, g, "a lone surrogate in a question", review.act(
        '{"action": "edit", "id": "q03", "revision": 0, "question": "Why \\ud800?", "references": '
        + json.dumps([good_records()[2]["references"][0]]) + "}"), 400, "lone surrogate", unchanged=same())
    judge(review, g, "a lone surrogate in an id", review.act('{"action": "accept", "id": "\\udfff", "revision": 0}'),
          400, "lone surrogate")
    judge(review, g, "a JSON list", review.act([accept]), 400, "JSON object")
    judge(review, g, "a JSON string", review.act('"accept"'), 400, "JSON object")
    judge(review, g, "an unknown action", review.act({"action": "delete", "id": "q03", "revision": 0}), 400,
          "accept, reject, edit, new", unchanged=same())
    judge(review, g, "no action", review.act({"id": "q03", "revision": 0}), 400, "\"action\"")
    judge(review, g, "an action on an unknown id", review.act(accept | {"id": "zz"}), 404, "no question 'zz'")
    judge(review, g, "an id that is a number", review.act(accept | {"id": 1}), 404, "no question 1")
    judge(review, g, "an id that is null", review.act(accept | {"id": None}), 404, "no question None")
    judge(review, g, "an id that is a list", review.act(accept | {"id": ["q01"]}), 404, "no question")
    judge(review, g, "an id that is an object", review.act(accept | {"id": {"a": 1}}), 404, "no question")
    judge(review, g, "a revision as a string", review.act(accept | {"revision": "0"}), 400, "whole number", "'0'",
          absent=("the page had", "the page read revision"), unchanged=same())
    judge(review, g, "a revision as a float", review.act(accept | {"revision": 0.0}), 400, "whole number")
    judge(review, g, "a revision false", review.act(accept | {"revision": False}), 400, "whole number")
    judge(review, g, "a revision null", review.act(accept | {"revision": None}), 400, "whole number")
    judge(review, g, "a revision missing", review.act({"action": "accept", "id": "q01"}), 400, "whole number")
    judge(review, g, "a negative revision", review.act(accept | {"revision": -1}), 409, "page read revision -1")
    judge(review, g, "a stale revision", review.act(accept | {"revision": 4}), 409,
          "the file has revision 0, the page read revision 4", unchanged=same())
    edit = {"action": "edit", "id": "q04", "revision": 0, "question": "Q?",
            "references": [ref("installation.md", "Disk: reserve at least 2 GB")]}
    for name, change, status, needle in (
            ("a question that is a number", {"question": 5}, 400, "question is empty"),
            ("an empty question", {"question": ""}, 400, "question is empty"),
            ("a blank question", {"question": " \n\t"}, 400, "question is empty"),
            ("a question of 4,001 characters", {"question": "x" * 4001}, 400, "longer than 4000"),
            ("references not a list", {"references": {"document": "installation.md"}}, 400, "at least one excerpt"),
            ("no references", {"references": []}, 400, "at least one excerpt"),
            ("a reference that is a string", {"references": ["installation.md"]}, 400, "excerpt 1 is not an object"),
            ("a reference without a document", {"references": [{"start_index": 0, "end_index": 4}]}, 404,
             "no document None"),
            ("a reference to an unknown document", {"references": [{"document": "nope.md", "start_index": 0,
                                                                    "end_index": 4}]}, 404, "no document 'nope.md'"),
            ("negative offsets", {"references": [{"document": "installation.md", "start_index": -4,
                                                  "end_index": 4}]}, 400, "[-4:4]"),
            ("reversed offsets", {"references": [{"document": "installation.md", "start_index": 40,
                                                  "end_index": 10}]}, 400, "[40:10]"),
            ("offsets past the end", {"references": [{"document": "installation.md", "start_index": 0,
                                                      "end_index": 10**9}]}, 400, "not a non-empty range"),
            ("offsets as strings", {"references": [{"document": "installation.md", "start_index": "0",
                                                    "end_index": "4"}]}, 400, "not a non-empty range"),
            ("offsets missing", {"references": [{"document": "installation.md"}]}, 400, "[None:None]"),
            ("a blank excerpt", {"references": [blank_ref()]}, 400, "only white space"),
            ("an excerpt twice", {"references": [edit["references"][0]] * 2}, 400, "excerpts 1 and 2 are the same"),
            ("content that is not the text", {"references": [edit["references"][0] | {"content": "other"}]}, 400,
             "does not match"),
            ("21 excerpts", {"references": [edit["references"][0]] * 21}, 400, "at most 20 excerpts")):
        judge(review, g, f"edit: {name}", review.act(edit | change), status, needle, unchanged=same())
    judge(review, g, "new: no question", review.act({"action": "new", "references": edit["references"]}), 400,
          "question is empty", unchanged=same())
    judge(review, g, "new: a control character and a NUL in the question",
          review.act({"action": "new", "question": "Why\x00\x07 here?", "references": edit["references"]}), 200)
    judge(review, g, "edit: an excerpt of characters outside the BMP",
          review.act(edit | {"question": "Emoji 😀 question?"}), 200)
    # framing
    judge(review, g, "a body larger than the limit",
          review.raw(b"POST /api/action HTTP/1.1\r\nHost: " + review.host.encode() + b"\r\nX-Chunkwise-Token: "
                     + review.token.encode() + b"\r\nContent-Length: 2000000\r\n\r\n" + b"{" * 2_000_000), 413,
          "at most", unchanged=same())
    judge(review, g, "a Content-Length that is not a number",
          review.raw(f"POST /api/action HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\n"
                     "Content-Length: ten\r\n\r\n{}".encode()), 400, "Content-Length")
    judge(review, g, "a negative Content-Length",
          review.raw(f"POST /api/action HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\n"
                     "Content-Length: -5\r\n\r\n{}".encode()), 400, "Content-Length")
    judge(review, g, "a Content-Length shorter than the body",
          review.raw(f"POST /api/action HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\n"
                     "Content-Length: 5\r\nConnection: close\r\n\r\n{\"action\": \"accept\"}".encode()), 400,
          "not valid JSON")
    # A Content-Length longer than what is sent: the server waits for the rest (as HTTP says), and
    # answers other requests meanwhile; the short request is answered when its client gives up.
    liar = socket.create_connection((review.address, review.port), timeout=HANG_S)
    liar.sendall(f"POST /api/action HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\n"
                 "Content-Length: 500\r\n\r\n{\"action\"".encode())
    time.sleep(0.3)
    judge(review, g, "a request beside one whose Content-Length lies", review.state(), 200)
    liar.shutdown(socket.SHUT_WR)
    answer = liar.recv(65536)
    liar.close()
    record(g, "a Content-Length longer than the body, then the client stops sending",
           "answered 400 JSON (the body is not JSON)", answer[:120].decode("latin-1"),
           not answer.startswith(b"HTTP/1.1 400") or b"application/json" not in answer)
    judge(review, g, "a chunked body", review.raw(
        f"POST /api/action HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n".encode()), 400)
    judge(review, g, "a malformed request line", review.raw(b"HELLO\r\n\r\n"), 400)
    judge(review, g, "an HTTP/2 preface", review.raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505)
    judge(review, g, "a request line of 70,000 characters", review.raw(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n"),
          414)
    judge(review, g, "a header of 70,000 characters",
          review.raw(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"), 431)
    judge(review, g, "120 headers", review.raw(b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120))
                                               + b"\r\n"), 431)
    judge(review, g, "Expect: 100-continue", review.request("GET", "/api/state", headers={"Expect": "100-continue"}),
          200)
    judge(review, g, "an absolute-form target naming another host",
          review.request("GET", f"http://evil.example:{review.port}/api/state"), 403, "evil.example")
    judge(review, g, "an absolute-form target naming this one",
          review.request("GET", f"http://{review.host}/api/state"), 200)
    judge(review, g, "two requests on one connection, the second read",
          _second_of_two(review), 200)
    # Host names
    judge(review, g, "an empty Host", review.raw(f"GET /api/state HTTP/1.1\r\nHost: \r\nX-Chunkwise-Token: "
                                                 f"{review.token}\r\nConnection: close\r\n\r\n".encode()), 403, "Host")
    judge(review, g, "no Host in HTTP/1.1", review.raw(f"GET /api/state HTTP/1.1\r\nX-Chunkwise-Token: "
                                                       f"{review.token}\r\nConnection: close\r\n\r\n".encode()),
          400, "Host")
    for name, status in ((f"evil.example:{review.port}", 403), ("evil.example", 403),
                         (f"127.0.0.1.evil.example:{review.port}", 403), (f"localhost.:{review.port}", 200),
                         ("localhost.", 200), (f"127.0.0.1:{review.port + 1}", 200), (f"[::1]:{review.port}", 200),
                         ("[::1]", 200), (f"LOCALHOST:{review.port}", 200), (f"127.0.0.2:{review.port}", 403),
                         (f"0.0.0.0:{review.port}", 403), (f"2130706433:{review.port}", 403),
                         (f"127.0.0.1@evil.example:{review.port}", 403), (f"localhost:{review.port}x", 403),
                         (f"[::ffff:127.0.0.1]:{review.port}", 403), (f"evil.example.:{review.port}", 403)):
        judge(review, g, f"Host {name!r}", review.request("GET", "/api/state", host=name), status,
              *((repr(name),) if status == 403 else ()))
    judge(review, g, "no Host (HTTP/1.0)",
          review.raw(f"GET /api/state HTTP/1.0\r\nX-Chunkwise-Token: {review.token}\r\n\r\n".encode()), 200)
    judge(review, g, "two Host headers, the second evil", review.raw(
        f"GET /api/state HTTP/1.1\r\nHost: {review.host}\r\nHost: evil.example\r\nX-Chunkwise-Token: {review.token}"
        "\r\nConnection: close\r\n\r\n".encode()), 400, "Host")
    # Origin of a write
    own = f"http://{review.host}"
    for origin, status in (("null", 403), ("http://evil.example", 403), (f"https://{review.host}", 403),
                           (f"http://localhost:{review.port}", 403), (f"{own}.evil.example", 403),
                           (f"{own}/", 200), (own.upper(), 200), (own, 200), ("", 403)):
        revision = next(q["revision"] for q in review.state().json()["questions"] if q["id"] == "q05")
        action = {"action": "accept", "id": "q05", "revision": revision}
        judge(review, g, f"a write from Origin {origin!r}", review.act(action, Origin=origin), status,
              *(("only the review page itself",) if status == 403 else ()),
              unchanged=same() if status == 403 else None)
    for site, status in (("cross-site", 403), ("same-site", 403), ("same-origin", 200), ("none", 200)):
        revision = next(q["revision"] for q in review.state().json()["questions"] if q["id"] == "q06")
        judge(review, g, f"a write with Sec-Fetch-Site {site} and no Origin",
              review.act({"action": "accept", "id": "q06", "revision": revision}, **{"Sec-Fetch-Site": site}),
              status)
    judge(review, g, "a read from another Origin (no CORS header given)",
          review.request("GET", "/api/state", headers={"Origin": "http://evil.example"}), 200)
    # connections that go away
    for name, data in (("mid-headers", b"GET /api/state HTTP/1.1\r\nHost: " + review.host.encode()),
                       ("after a request", b"GET /api/state HTTP/1.1\r\nHost: " + review.host.encode() + b"\r\n\r\n"),
                       ("mid-body", b"POST /api/action HTTP/1.1\r\nHost: " + review.host.encode()
                        + b"\r\nContent-Length: 100\r\n\r\n{"),
                       ("after a write with the token", f"POST /api/action HTTP/1.1\r\nHost: {review.host}\r\n"
                        f"X-Chunkwise-Token: {review.token}\r\nContent-Length: 2\r\n\r\n{{}}".encode())):
        for _ in range(5):
            with socket.create_connection((review.address, review.port), timeout=HANG_S) as connection:
                connection.sendall(data)
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        judge(review, g, f"5 clients reset {name}", review.state(), 200)
    # a slow client holds no one else up, and many at once are answered
    slow = socket.create_connection((review.address, review.port), timeout=HANG_S)
    slow.sendall(b"GET /api/state HTTP/1.1\r\nHost: ")
    judge(review, g, "a request beside a client that stopped mid-header", review.state(), 200)
    slow.close()
    replies: list[Reply] = []
    threads = [threading.Thread(target=lambda: replies.append(review.state())) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r.describe() for r in replies if r.status != 200]
    record(g, "200 requests at once", "200 answers 200, none waiting over 10 s",
           f"{200 - len(bad)} answered 200; {bad[:2]}", bool(bad))
    # everything saved is still a questions file every command reads
    terminal = review.new_stderr()
    rc = review.stop()
    done = cli("validate", "--corpus", str(CORPUS), "--queries", str(queries))
    record(g, "the file after all of it", "validate reads it; the review stopped cleanly (status 0)",
           f"validate exit {done.rc}; review exit {rc}; terminal {terminal.strip()[-200:]!r}",
           done.rc != 0 or rc != 0 or "Traceback" in review.stderr())


def blank_ref() -> dict[str, Any]:
    text = (CORPUS / "installation.md").read_text(encoding="utf-8")
    start = text.index("\n\n")
    return {"document": "installation.md", "start_index": start, "end_index": start + 2}


def _second_of_two(review: Review) -> Reply:
    one = f"GET /api/state HTTP/1.1\r\nHost: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\n\r\n"
    two = one.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
    with socket.create_connection((review.address, review.port), timeout=HANG_S) as connection:
        connection.sendall((one + two).encode())
        data = b""
        deadline = time.monotonic() + HANG_S
        while data.count(b"HTTP/1.1 ") < 2 or not data.endswith(b"}"):
            if time.monotonic() > deadline:
                return Reply(None, {}, data, "hung")
            chunk = connection.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    second = data[data.rfind(b"HTTP/1.1 "):]
    head, _, body = second.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    return Reply(int(lines[0].split()[1]), headers, body, None if data.count(b"HTTP/1.1 ") == 2 else "one answer")


def group_live(tmp: Path) -> None:
    """The file changed under a running review: lines appended by another tool, the file truncated,
    deleted, replaced by a folder, a link or a FIFO; each named, nothing saved over it, and the page
    loads again once the file is mended, without a restart."""
    folder = tmp / "live"
    folder.mkdir()
    queries = folder / "q.jsonl"
    good = jsonl(good_records())
    queries.write_text(good)
    review = Review(folder, queries)
    g = "live"
    base = good_records()[1]

    def broken(name: str, text: str | bytes, needles: list[str], line: int | None = 31) -> None:
        (queries.write_bytes if isinstance(text, bytes) else queries.write_text)(text)
        before = queries.read_bytes()
        where = [f"{queries}:{line}"] if line else []
        judge(review, g, f"{name}: the page's state", review.state(), 409, *where, *needles,
              unchanged=(queries, before))
        judge(review, g, f"{name}: an accept", review.act({"action": "accept", "id": "q10", "revision": 0}), 409,
              *where, *needles, unchanged=(queries, before))
        queries.write_text(good)
        judge(review, g, f"{name}: mended, the page loads", review.state(), 200)

    for name, change, needles in MALFORMED:
        if name in ("corpus 5",):
            continue
        line = change(dict(base, id="appended"))
        broken(f"appended {name}", good + json.dumps(line) + "\n", needles)
    for name, line, needles in BROKEN_LINES:
        broken(f"appended {name}", good + line + "\n", needles)
    broken("appended a repeated id", good + json.dumps(base) + "\n",
           ["q.jsonl:31: duplicate query id 'q02' (line 2 has it too)"], None)
    broken("appended an unknown document", good + json.dumps(
        dict(base, id="x", references=[dict(base["references"][0], document="nope.md")])) + "\n", ["'nope.md'"], None)
    broken("appended invalid UTF-8", good.encode() + b'{"id": "x", "question": "caf\xe9?"}\n', ["UTF-8"], None)
    broken("truncated mid-line", good[: len(good) - 40], ["not valid JSON"], 30)
    # accepted changes
    with queries.open("a") as out:
        out.write(json.dumps({k: v for k, v in base.items() if k != "id"} | {"question": "Appended, no id?"}) + "\n")
    judge(review, g, "appended without an id: the state", review.state(), 200)
    judge(review, g, "appended without an id: accepted as line-31",
          review.act({"action": "accept", "id": "line-31", "revision": 0}), 200)
    saved = json.loads(queries.read_text().splitlines()[30])
    record(g, "appended without an id: saved under its id", "id 'line-31' saved", repr(saved.get("id")),
           saved.get("id") != "line-31")
    queries.write_text(good + json.dumps(dict(base, id=99, question="A number id?")) + "\n")
    judge(review, g, "appended an id that is a number: accepted by it",
          review.act({"action": "accept", "id": "99", "revision": 0}), 200)
    queries.write_text(good + json.dumps(dict(base, id="big", revision=10**30)) + "\n")
    judge(review, g, "appended a revision of 10**30: accepted",
          review.act({"action": "accept", "id": "big", "revision": 10**30}), 200)
    queries.write_text(good.replace("\n", "\r\n"))
    judge(review, g, "rewritten with CRLF: an accept", review.act({"action": "accept", "id": "q07", "revision": 0}),
          200)
    queries.write_bytes(b"\xef\xbb\xbf" + good.encode())
    judge(review, g, "rewritten with a BOM: an accept", review.act({"action": "accept", "id": "q08", "revision": 0}),
          200)
    queries.write_text("")
    judge(review, g, "truncated to nothing: the state", review.state(), 200)
    judge(review, g, "truncated to nothing: an accept", review.act({"action": "accept", "id": "q01", "revision": 0}),
          404, "no question 'q01'")
    queries.unlink()
    judge(review, g, "deleted: an accept", review.act({"action": "accept", "id": "q01", "revision": 0}), 404,
          "no question 'q01'")
    record(g, "deleted: nothing written by an accept", "no file", "no file" if not queries.exists() else "a file",
           queries.exists())
    queries.mkdir()
    judge(review, g, "replaced by a folder: the state", review.state(), 409, "is a directory")
    judge(review, g, "replaced by a folder: a new question", review.act(
        {"action": "new", "question": "Q?", "references": [ref("installation.md", "Disk: reserve")]}), 409,
        "is a directory")
    queries.rmdir()
    other = folder / "other.jsonl"
    other.write_text(good)
    queries.symlink_to(other)
    judge(review, g, "replaced by a link: an accept", review.act({"action": "accept", "id": "q09", "revision": 0}),
          200)
    record(g, "replaced by a link: written through it", "the link stays a link; its target holds the accept",
           f"link {queries.is_symlink()}; target accepted "
           f"{json.loads(other.read_text().splitlines()[8]).get('review')!r}",
           not queries.is_symlink() or json.loads(other.read_text().splitlines()[8]).get("review") != "accepted")
    queries.unlink()
    queries.symlink_to("/dev/zero")
    judge(review, g, "replaced by a link to /dev/zero: the state", review.state(), 409, "character device")
    queries.unlink()
    os.mkfifo(queries)
    judge(review, g, "replaced by a FIFO: an accept", review.act({"action": "accept", "id": "q09", "revision": 1}),
          409, "FIFO")
    queries.unlink()
    queries.write_text(good)
    os.chmod(folder, 0o555)
    if os.geteuid() != 0:
        judge(review, g, "a read-only folder: an accept", review.act({"action": "accept", "id": "q11", "revision": 0}),
              500, "Permission denied", unchanged=(queries, queries.read_bytes()))
    os.chmod(folder, 0o755)
    terminal = review.new_stderr()
    rc = review.stop()
    record(g, "the review stops cleanly", "status 0, nothing on its terminal",
           f"exit {rc}; terminal {terminal.strip()[-200:]!r}", rc != 0 or bool(terminal.strip()))


def group_writers(tmp: Path) -> None:
    """Two reviews of one file at once: each accepts its own 15 questions, interleaved, and both
    try one question: all 30 saved, the second accept of the shared one refused (409)."""
    folder = tmp / "writers"
    folder.mkdir()
    queries = folder / "q.jsonl"
    queries.write_text(jsonl(good_records()))
    one, two = Review(folder, queries), Review(folder, queries)
    replies: list[Reply] = []

    def accept(review: Review, ids: list[str]) -> None:
        for question_id in ids:
            replies.append(review.act({"action": "accept", "id": question_id, "revision": 0}))

    ids = [r["id"] for r in good_records()]
    threads = [threading.Thread(target=accept, args=(one, ids[0::2])),
               threading.Thread(target=accept, args=(two, ids[1::2]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared = [one.act({"action": "reject", "id": "q01", "revision": 1}),
              two.act({"action": "reject", "id": "q01", "revision": 1})]
    problems = [r.describe() for r in replies if r.status != 200]
    if sorted(r.status for r in shared) != [200, 409]:
        problems.append(f"the shared question: {[r.describe()[:100] for r in shared]}")
    saved = [json.loads(line) for line in queries.read_text().splitlines()]
    if len(saved) != 30 or sum(r.get("review") in ("accepted", "rejected") for r in saved) != 30:
        problems.append(f"{len(saved)} questions, {sum('review' in r for r in saved)} reviewed")
    for review in (one, two):
        terminal = review.new_stderr()
        if review.stop() != 0 or terminal.strip():
            problems.append(f"terminal: {terminal[-200:]}")
    record("writers", "two reviews of one file", "all 30 accepts saved; the second change of a shared question 409",
           "; ".join(problems) or "30 saved, the shared one refused once", bool(problems))


def _hammer(review: Review, questions: list[dict[str, Any]], stop: threading.Event) -> None:
    """Accept ``questions`` one after another until ``stop``."""
    for q in questions:
        if stop.is_set():
            return
        review.act({"action": "accept", "id": q["id"], "revision": q["revision"]})


def group_kills(tmp: Path, kills: int = 6) -> None:
    """kill -9 of a review while it saves actions on 100,000 questions; then a new review: the file
    is whole (every line a question, none lost), the temporary files removed and said."""
    folder = tmp / "kills"
    folder.mkdir()
    queries = folder / "q.jsonl"
    records = good_records()
    queries.write_text("".join(json.dumps(dict(records[i % 30], id=f"q{i:06d}")) + "\n" for i in range(100_000)))
    rng = random.Random(0)
    for attempt in range(1, kills + 1):
        review = Review(folder, queries)
        state = review.state()
        if state.status != 200:
            raise RuntimeError(f"the state of 100,000 questions: {state.describe()}")
        left = [q for q in state.json()["questions"] if not q["review"]][:50]
        stop = threading.Event()
        worker = threading.Thread(target=_hammer, args=(review, left, stop))
        worker.start()
        time.sleep(rng.uniform(0.2, 1.5))
        os.killpg(review.process.pid, signal.SIGKILL)
        stop.set()
        worker.join()
        review.process.wait()
        review.process.stdout.close()
        leftovers = sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))
        lines = queries.read_text().splitlines()
        problems = []
        if len(lines) != 100_000:
            problems.append(f"{len(lines)} lines")
        try:
            [json.loads(line) for line in lines]
        except ValueError as exc:
            problems.append(f"a line is not JSON: {exc}")
        again = Review(folder, queries)
        again.stop()
        said = again.stderr()
        if [p for p in folder.iterdir() if p.name.endswith(".tmp")]:
            problems.append("temporary files still there after a restart")
        if leftovers and f"removed {len(leftovers)} temporary file" not in said:
            problems.append(f"the restart did not say it removed {leftovers}: {said[-200:]}")
        if "Traceback" in said:
            problems.append("traceback on restart")
        record("kills", f"kill -9 during saves, {attempt}",
               "the file whole (100,000 questions), leftovers removed at the next start and said",
               "; ".join(problems) or f"whole; {len(leftovers)} leftover(s) removed at restart", bool(problems))


def group_models(tmp: Path) -> None:
    """models/ of the cache folder is a file where generate --bundled writes its model: one message
    naming it; and the review's own folder being a file."""
    cache = tmp / "cache"
    cache.mkdir()
    (cache / "models").write_text("not a folder")
    env = dict(os.environ, CHUNKWISE_CACHE_DIR=str(cache))
    done = cli("generate", str(CORPUS), "-o", str(tmp / "gen.jsonl"), "--n", "1", "--bundled", env=env, timeout=120)
    bad, what = refused_cleanly(done, f"{cache / 'models'} is a file, not a folder")
    record("models", "generate --bundled with models/ a file", "status 2, naming models/ as a file", what, bad)
    record("models", "generate --bundled with models/ a file: nothing written", "no questions file",
           "none" if not (tmp / "gen.jsonl").exists() else "a file", (tmp / "gen.jsonl").exists())
    blocker = tmp / "blocker"
    blocker.write_text("x")
    done = cli("generate", str(CORPUS), "-o", str(blocker / "gen.jsonl"), "--n", "1", "--bundled", timeout=120)
    bad, what = refused_cleanly(done, str(blocker))
    record("models", "generate -o under a file", "status 2, naming the file in the way", what, bad)


GROUPS = {"files": group_files, "accepted": group_accepted_files, "paths": group_paths, "hosts": group_hosts,
          "requests": group_requests, "live": group_live, "writers": group_writers, "kills": group_kills,
          "models": group_models}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", action="append", choices=sorted(GROUPS), help="run only these groups")
    parser.add_argument("--list", action="store_true", help="print every attempt, not only the misbehaving ones")
    return parser


def main() -> int:
    args = parser().parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"{CORPUS} not found: run from a chunkwise checkout")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="review-faults-") as folder:
        tmp = Path(folder)
        os.chmod(tmp, 0o755)
        for name in args.group or GROUPS:
            print(f"== {name}", flush=True)
            try:
                GROUPS[name](tmp)
            except Exception as exc:  # the campaign's own failure: counted, and the next group runs
                record(name, "the group runs to its end", "every attempt recorded",
                       f"the campaign failed: {type(exc).__name__}: {exc}", True)
            finally:
                for review in Review.started:
                    if review.process.poll() is None:
                        review.stop()
        for path in tmp.rglob("*"):  # a test may leave a folder read-only
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    os.chmod(path, stat.S_IRWXU)
    print()
    print("| group | attempts | misbehave |")
    print("|---|---|---|")
    for group in dict.fromkeys(a.group for a in RESULTS):
        of = [a for a in RESULTS if a.group == group]
        print(f"| {group} | {len(of)} | {sum(a.bad for a in of)} |")
    bad = [a for a in RESULTS if a.bad]
    print(f"| all | {len(RESULTS)} | {len(bad)} |")
    for a in RESULTS if args.list else bad:
        print(f"- {'MISBEHAVES ' if a.bad else ''}{a.group}: {a.name}\n  expected: {a.expected}\n  actual: {a.actual}")
    print(f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
