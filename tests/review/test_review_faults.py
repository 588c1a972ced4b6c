"""Issue 54, each item reproduced against a real ``chunkwise review`` process: a malformed question
file, a line another tool appended, a file ``validate`` refuses, requests built to break the server,
the Host and Origin a request names, a killed save's leftovers, a FIFO or device as ``--queries``,
100,000 questions in the page, and the messages that said the wrong thing.

Every refusal is checked for what it must say (the line, the field, the value) and for what must
not happen: a dropped connection, a traceback on the review's terminal, a changed file."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

TEXT = "Intro line.\n\nThe warranty lasts two years.\nReturns are accepted within 30 days.\n"


def ref(text: str, excerpt: str, document: str = "a.md") -> dict:
    start = text.index(excerpt)
    return {"document": document, "start_index": start, "end_index": start + len(excerpt), "content": excerpt}


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(TEXT, encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    write(queries, [{"id": f"q{i}", "question": f"Question {i}?", "origin": "generated", "model": "m",
                     "references": [ref(TEXT, "The warranty lasts two years.")]} for i in range(1, 4)])
    return folder, queries


def run_review(corpus_dir: Path, queries: Path | str, *options: str,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """``chunkwise review`` expected to refuse and exit: its status and output (a review that
    serves instead is stopped after ``timeout`` seconds, and the test fails on its status)."""
    command = [sys.executable, "-m", "tuner.cli", "review", "--corpus", str(corpus_dir), "--queries", str(queries),
               *options]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        err += f"\n[still running after {timeout} s: killed by the test]"
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def no_traceback(review) -> None:
    """The review stopped cleanly, and its terminal shows no traceback."""
    assert review.stop() == 0
    err = review.stderr()
    assert "Traceback" not in err and "Error:" not in err.replace("chunkwise: error:", ""), err


def validate(folder: Path, queries: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner.cli", "validate", "--corpus", str(folder), "--queries",
                           str(queries)], capture_output=True, text=True, timeout=120)


# ------------------------------------------------------------------------- 1. a malformed revision

def test_1_a_malformed_revision_written_meanwhile_is_named_and_nothing_is_saved(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    records = lines(queries)
    records[1]["revision"] = "x"  # an editor's change, after the review opened the file
    write(queries, records)
    before = queries.read_bytes()
    # The revision as a page that read the broken line sends it back (the connection dropped here).
    status, answer = review.act({"action": "accept", "id": "q2", "revision": "x"})
    assert status == 400 and "got 'x'" in answer["error"]
    status, answer = review.act({"action": "accept", "id": "q2", "revision": 0})
    assert status == 409
    assert f"{queries}:2: field 'revision' must be a whole number" in answer["error"] and "'x'" in answer["error"]
    status, answer = review.act({"action": "accept", "id": "q1", "revision": 0})  # another question: same answer
    assert status == 409 and f"{queries}:2" in answer["error"]
    assert queries.read_bytes() == before
    records[1]["revision"] = 3  # mended: the next action goes through, no restart
    write(queries, records)
    assert review.act({"action": "accept", "id": "q2", "revision": 3})[0] == 200
    assert lines(queries)[1]["revision"] == 4 and lines(queries)[1]["review"] == "accepted"
    no_traceback(review)


def test_1_review_does_not_open_a_file_with_a_malformed_revision(files):
    folder, queries = files
    records = lines(queries)
    records[2]["revision"] = "x"
    write(queries, records)
    before = queries.read_bytes()
    done = run_review(folder, queries)
    assert done.returncode == 2, done.stderr
    assert f"{queries}:3: field 'revision' must be a whole number" in done.stderr and "Traceback" not in done.stderr
    assert queries.read_bytes() == before


# ------------------------------------------------------------------------- 2. a line another tool appended

def test_2_a_line_appended_without_an_id_is_reviewed_under_its_line_id(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    with queries.open("a", encoding="utf-8") as out:  # another tool appends, as the guide allows
        out.write(json.dumps({"question": "Appended?", "references": [ref(TEXT, "30 days")]}) + "\n")
    status, state = review.request("GET", "/api/state")
    assert status == 200
    assert [q["id"] for q in state["questions"]] == ["q1", "q2", "q3", "line-4"]
    status, answer = review.act({"action": "accept", "id": "line-4", "revision": 0})
    assert status == 200 and answer["question"]["review"] == "accepted"
    assert lines(queries)[3] == {"question": "Appended?", "references": [ref(TEXT, "30 days")], "id": "line-4",
                                 "review": "accepted", "revision": 1}
    assert validate(folder, queries).returncode == 0
    no_traceback(review)


@pytest.mark.parametrize(("references", "message"), [
    (None, "4: field 'references' must be list, got null"),
    (["x"], "4 reference 1: a reference is an object with \"document\" and \"content\" (and offsets), got 'x'"),
])
def test_2_a_broken_line_appended_is_named_and_the_page_loads_once_it_is_mended(review_process, files, references,
                                                                                  message):
    folder, queries = files
    review = review_process(folder, queries)
    good = queries.read_text(encoding="utf-8")
    with queries.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"question": "Appended?", "references": references}) + "\n")
    broken = queries.read_bytes()
    status, answer = review.request("GET", "/api/state")
    assert status == 409 and f"{queries}:{message}" in answer["error"] and "reload" in answer["error"]
    status, answer = review.act({"action": "reject", "id": "q1", "revision": 0})
    assert status == 409 and f"{queries}:{message}" in answer["error"]
    assert queries.read_bytes() == broken  # nothing written over the line
    queries.write_text(good, encoding="utf-8")  # mended: no restart needed
    status, state = review.request("GET", "/api/state")
    assert status == 200 and len(state["questions"]) == 3
    no_traceback(review)


# ------------------------------------------------------------------------- 3. what validate refuses

@pytest.mark.parametrize(("field", "value", "message"), [
    ("origin", 5, "field 'origin' must be one of hand, generated (or left out), got 5"),
    ("stale", "yes", "field 'stale' must be true or false, got 'yes'"),
    ("model", 5, "field 'model' must be str, got 5"),
    ("references", [], "no references"),
])
def test_3_review_refuses_the_files_validate_refuses(files, field, value, message):
    folder, queries = files
    records = lines(queries)
    records[1][field] = value
    write(queries, records)
    before = queries.read_bytes()
    checked = validate(folder, queries)
    assert checked.returncode == 2 and message in checked.stderr  # the rule, as validate (and tune) apply it
    done = run_review(folder, queries)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and f"{queries}:2" in done.stderr and "Traceback" not in done.stderr
    assert queries.read_bytes() == before


def test_3_the_page_saves_no_blank_or_repeated_excerpt(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    before = queries.read_bytes()
    blank = {"document": "a.md", "start_index": TEXT.index("\n\n"), "end_index": TEXT.index("\n\n") + 2}
    status, answer = review.act({"action": "edit", "id": "q1", "revision": 0, "question": "Q?",
                                 "references": [blank]})
    assert status == 400 and "only white space" in answer["error"]
    twice = ref(TEXT, "two years")
    status, answer = review.act({"action": "edit", "id": "q1", "revision": 0, "question": "Q?",
                                 "references": [twice, twice]})
    assert status == 400 and "excerpts 1 and 2 are the same passage" in answer["error"]
    status, answer = review.act({"action": "new", "question": "Q?", "references": [twice, dict(twice)]})
    assert status == 400 and "same passage" in answer["error"]
    assert queries.read_bytes() == before
    no_traceback(review)


# ------------------------------------------------------------------------- 4. answers, not tracebacks

def reset(port: int, data: bytes) -> None:
    """Connect, send ``data`` and reset the connection (RST, as a client that crashed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(data)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_4_malformed_requests_get_a_json_answer_not_a_traceback(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    before = queries.read_bytes()
    surrogate = ('{"action": "edit", "id": "q1", "revision": 0, "question": "Why \\ud800?", "references": '
                 + json.dumps([ref(TEXT, "two years")]) + "}")
    status, answer = review.act(surrogate)
    assert status == 400 and "lone surrogate" in answer["error"] and "\\ud800" in answer["error"]
    status, answer = review.act("[" * 100_000 + "]" * 100_000)
    assert status == 400 and "nested too deep" in answer["error"]
    status, answer = review.act('{"action": "accept", "id": "q1", "revision": ' + "9" * 5000 + "}")
    assert status == 400 and "integer too long" in answer["error"]
    status, answer = review.act(b"\xff\xfe{}")
    assert status == 400 and "not UTF-8" in answer["error"]
    assert queries.read_bytes() == before
    no_traceback(review)


def test_4_clients_that_reset_their_connection_print_nothing(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    host = f"Host: {review.host}\r\n".encode()
    for _ in range(5):  # without the token: a request cut short, and one whose answer nobody reads
        reset(review.port, b"GET /api/state HTTP/1.1\r\n" + host)
        reset(review.port, b"GET /api/state HTTP/1.1\r\n" + host + b"\r\n")
        reset(review.port, b"POST /api/action HTTP/1.1\r\n" + host + b"Content-Length: 100\r\n\r\n{")
    assert review.request("GET", "/api/state")[0] == 200  # still serving
    no_traceback(review)


def test_4_a_burst_of_clients_is_taken_in_while_the_review_is_busy(review_process, files):
    """Connections the review has not accepted yet wait in the kernel's queue: the standard
    library's queue held 5, and a client beyond them was dropped (its handshake retried by the
    kernel after 1, 3, 7... s: a burst of 200 requests left some unanswered after 10 s)."""
    folder, queries = files
    review = review_process(folder, queries)
    clients = []
    os.kill(review.process.pid, signal.SIGSTOP)  # busy: it accepts nothing until it goes on
    try:
        for _ in range(40):
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", review.port))
            clients.append(client)
        taken = set()
        for _ in range(50):  # a handshake on this machine's loopback is taken in at once, or dropped
            taken |= set(select.select([], clients, [], 0.1)[1])
            if len(taken) == len(clients):
                break
        assert len(taken) == 40, f"{len(taken)} of 40 connections taken in"
        assert all(client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 for client in clients)
    finally:
        os.kill(review.process.pid, signal.SIGCONT)
        for client in clients:
            client.close()
    assert review.request("GET", "/api/state")[0] == 200
    no_traceback(review)


# ------------------------------------------------------------------------- 5. host and origin

def test_6_a_link_into_a_missing_folder_names_that_folder(files, tmp_path):
    """The folder a save needs is the one the link leads into, not the link's own (which exists):
    before, the message named only the link's folder ("cannot open the folder of LINK")."""
    folder, _ = files
    queries = tmp_path / "link.jsonl"
    queries.symlink_to(tmp_path / "gone" / "q.jsonl")
    done = run_review(folder, queries)
    assert done.returncode == 2, done.stderr
    assert f"cannot open the folder {tmp_path / 'gone'} of {queries}: No such file or directory" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(("given", "message"), [
    ("-", "--queries -: a review reads and saves a file, not standard input and output"),
    ("", "--queries is empty: give the path of the questions file to review"),
])
def test_6_queries_that_name_no_file_are_refused(files, given, message):
    """``-`` was served as a file not written yet, and a new question then went to standard
    output, not to a file; an empty value was refused as the folder '.'."""
    folder, _ = files
    done = run_review(folder, given, timeout=30)
    assert done.returncode == 2 and message in done.stderr and done.stdout == "", done.stderr


def test_5_an_empty_host_is_refused(files):
    folder, queries = files
    for host in ("", " "):
        done = run_review(folder, queries, "--host", host)
        assert done.returncode == 2, done.stderr
        assert "--host is empty" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""


def test_5_an_unexpected_host_or_a_write_from_another_origin_is_refused(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    before = queries.read_bytes()
    for host in (f"evil.example:{review.port}", "evil.example", f"127.0.0.1.evil.example:{review.port}"):
        status, answer = review.request("GET", "/api/state", headers={"Host": host})
        assert status == 403 and repr(host) in answer["error"], answer
    for host in (f"127.0.0.1:{review.port}", f"localhost:{review.port}", f"LOCALHOST:{review.port}"):
        assert review.request("GET", "/api/state", headers={"Host": host})[0] == 200
    accept = {"action": "accept", "id": "q1", "revision": 0}
    for origin in ("http://evil.example", f"http://localhost:{review.port + 1}", "null",
                   f"https://{review.host}"):
        status, answer = review.act(accept, Origin=origin, Host=review.host)
        assert status == 403 and "only the review page itself" in answer["error"], answer
    status, answer = review.act(accept, **{"Sec-Fetch-Site": "cross-site"})
    assert status == 403 and "another site" in answer["error"]
    assert queries.read_bytes() == before
    assert review.act(accept, Origin=f"http://{review.host}", Host=review.host)[0] == 200  # the page's own
    no_traceback(review)


def raw_answer(port: int, data: bytes) -> bytes:
    """Send ``data`` on a connection of its own and read everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def test_5_a_request_must_name_one_host(review_process, files):
    """HTTP/1.1 requires one Host: a request naming two (the check read the first) or none is a 400."""
    folder, queries = files
    review = review_process(folder, queries)
    token = f"X-Chunkwise-Token: {review.token}\r\nConnection: close\r\n".encode()
    two = raw_answer(review.port, f"GET /api/state HTTP/1.1\r\nHost: {review.host}\r\nHost: evil.example\r\n"
                     .encode() + token + b"\r\n")
    assert two.startswith(b"HTTP/1.1 400 ") and b"application/json" in two, two[:300]
    assert json.loads(two.partition(b"\r\n\r\n")[2]) == {"error": "a request names one Host (HTTP/1.1), not 2"}
    none = raw_answer(review.port, b"GET /api/state HTTP/1.1\r\n" + token + b"\r\n")
    assert none.startswith(b"HTTP/1.1 400 ")
    assert json.loads(none.partition(b"\r\n\r\n")[2]) == {"error": "a request names one Host (HTTP/1.1), not 0"}
    old = raw_answer(review.port, b"GET /api/state HTTP/1.0\r\n" + token + b"\r\n")  # HTTP/1.0 may name none
    assert old.startswith(b"HTTP/1.1 200 ")
    no_traceback(review)


def test_5_a_target_naming_another_host_is_refused(review_process, files):
    """``GET http://HOST/...`` (the absolute form) names its host in the target, which stands for
    the Host header: the check read only the header, and answered a target naming any host."""
    folder, queries = files
    review = review_process(folder, queries)
    headers = f"Host: {review.host}\r\nX-Chunkwise-Token: {review.token}\r\nConnection: close\r\n\r\n".encode()
    answer = raw_answer(review.port, f"GET http://evil.example:{review.port}/api/state HTTP/1.1\r\n".encode() + headers)
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:300]
    assert f"not to the Host 'evil.example:{review.port}'" in json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    answer = raw_answer(review.port, f"GET http://{review.host}/api/state HTTP/1.1\r\n".encode() + headers)
    assert answer.startswith(b"HTTP/1.1 200 ")
    no_traceback(review)


@pytest.mark.parametrize(("request_line", "status"), [(b"HELLO", 400), (b"PRI * HTTP/2.0", 505),
                                                      (b"GET /api/state", 403)])
def test_4_a_request_line_not_understood_gets_a_status_line_and_json(review_process, files, request_line, status):
    """A request line the server cannot read (or HTTP/0.9's, which has no headers): before, the
    answer was a bare JSON body, with no status line for the client to read."""
    folder, queries = files
    review = review_process(folder, queries)
    answer = raw_answer(review.port, request_line + b"\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:300]
    assert b"Content-Type: application/json" in head and "error" in json.loads(body)
    no_traceback(review)


# ------------------------------------------------------------------------- 6. leftovers and hangs

def test_6_a_killed_saves_temporary_files_are_removed_at_the_next_start(review_process, files, tmp_path):
    folder, queries = files
    # What write_atomically leaves when killed between creating its temporary file and renaming it.
    leftovers = [".q.jsonl.0123abcd.tmp", ".q.jsonl.deadbeef.tmp"]
    kept = [".q.jsonl.notes.tmp", ".other.jsonl.0123abcd.tmp", "q.jsonl.0123abcd.tmp", ".q.jsonl.0123abcd.tmp.bak"]
    for name in leftovers + kept:
        (tmp_path / name).write_text('{"id": "half', encoding="utf-8")
    (tmp_path / ".q.jsonl.aaaaaaaa.tmp").symlink_to(queries)  # a link is never ours: left alone
    review = review_process(folder, queries)
    names = set(os.listdir(tmp_path))
    assert not names & set(leftovers)
    assert set(kept) | {".q.jsonl.aaaaaaaa.tmp"} <= names
    assert review.act({"action": "accept", "id": "q1", "revision": 0})[0] == 200
    review.stop()
    assert "removed 2 temporary files an interrupted save left" in review.stderr()


@pytest.mark.parametrize("kind", ["fifo", "/dev/null", "folder", "socket", "link loop", "under a file"])
def test_6_a_fifo_a_device_or_a_folder_as_queries_is_refused_at_once(files, tmp_path, kind):
    folder, _ = files
    listening = None
    if kind == "fifo":
        queries = tmp_path / "pipe.jsonl"
        os.mkfifo(queries)
        expected = "is a FIFO (named pipe), not a file"
    elif kind == "folder":
        queries = tmp_path / "dir.jsonl"
        queries.mkdir()
        expected = "is a directory, not a file"
    elif kind == "socket":  # open() refuses it outright ("No such device or address")
        queries = tmp_path / "sock.jsonl"
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(queries))
        expected = "is a socket, not a file"
    elif kind == "link loop":  # was taken for a file not written yet: the review served, and no save could work
        queries = tmp_path / "loop.jsonl"
        queries.symlink_to(queries)
        expected = "is a symbolic link loop (it leads back to itself)"
    elif kind == "under a file":  # likewise
        (tmp_path / "notes").write_text("a file", encoding="utf-8")
        queries = tmp_path / "notes" / "q.jsonl"
        expected = f"cannot be created: {tmp_path / 'notes'} is a file, not a folder"
    else:
        queries, expected = Path(kind), "is a character device, not a file"
    try:
        done = run_review(folder, queries)
    finally:
        if listening is not None:
            listening.close()
    assert done.returncode == 2, done.stderr
    assert f"questions file {str(queries)!r} {expected}" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # no address printed: it never served


# ------------------------------------------------------------------------- 7. 100,000 questions

COUNTED_ROWS = """(() => {
    window.rowsAdded = 0;
    new MutationObserver((changes) => {
        for (const change of changes) {
            for (const node of change.addedNodes) if (node.nodeName === "LI") window.rowsAdded++;
        }
    }).observe(document.getElementById("list"), {childList: true, subtree: true});
})()"""


def test_7_a_move_or_an_accept_redraws_a_row_not_the_list(chromium, review_process, files):
    folder, queries = files
    count = 2000
    write(queries, [{"id": f"q{i:05d}", "question": f"Question {i}?", "references": [ref(TEXT, "two years")]}
                    for i in range(count)])
    review = review_process(folder, queries)
    tab = chromium.tab()
    tab.open(review.url)
    assert tab.text("progress") == f"0 of {count} reviewed · 0 accepted · 0 rejected · 0 edited"
    drawn = tab.evaluate("document.querySelectorAll('#list li').length")
    assert 0 < drawn < 200  # the rows in view, not all 2,000
    tab.evaluate(COUNTED_ROWS)
    tab.key("j")
    tab.wait("document.getElementById('qid').textContent === 'q00001'", "the next question")
    assert tab.evaluate("window.rowsAdded") <= 2
    tab.key("a")
    tab.wait("document.getElementById('qid').textContent === 'q00002'", "the question after the accepted one")
    assert tab.evaluate("window.rowsAdded") <= 4
    assert tab.evaluate("document.querySelector(\"#list li[data-id='q00001'] .badge\").textContent") == "accepted"
    assert lines(queries)[1]["review"] == "accepted"
    # Scrolled to the end, the last rows are drawn, and still only those in view.
    tab.evaluate("(() => { const v = document.getElementById('list-view'); v.scrollTop = v.scrollHeight;"
                 " v.dispatchEvent(new Event('scroll')); })()")
    tab.wait(f"document.querySelector(\"#list li[data-id='q{count - 1:05d}']\") !== null", "the last row")
    assert tab.evaluate("document.querySelectorAll('#list li').length") < 200
    # A question far down, named in the address: shown, its row drawn and marked current.
    tab.open(review.url + "#q01500")
    assert tab.text("qid") == "q01500"
    assert tab.evaluate("document.querySelector('#list li.current').dataset.id") == "q01500"
    # An action's answer is the question it changed and the counts, never the list.
    status, answer = review.act({"action": "accept", "id": "q00003", "revision": 0})
    assert status == 200 and set(answer) == {"question", "counts"} and answer["question"]["id"] == "q00003"
    assert answer["counts"]["accepted"] == 2 and answer["counts"]["total"] == count


# ------------------------------------------------------------------------- 8. messages

def test_8_a_bad_review_value_or_repeated_ids_do_not_blame_the_corpus(files):
    folder, queries = files
    records = lines(queries)
    records[0]["review"] = "maybe"
    write(queries, records)
    done = run_review(folder, queries)
    assert done.returncode == 2
    assert "field 'review' must be one of accepted, rejected, edited (or left out), got 'maybe'" in done.stderr
    assert "Is --corpus" not in done.stderr and f"{queries}:1" in done.stderr
    records[0].pop("review")
    records[2]["id"] = "q1"
    write(queries, records)
    done = run_review(folder, queries)
    assert done.returncode == 2
    assert f"{queries}:3: duplicate query id 'q1' (line 1 has it too)" in done.stderr
    assert "Is --corpus" not in done.stderr and "does not match" not in done.stderr


@pytest.mark.parametrize(("change", "said_lines", "blamed"), [
    (lambda r: [*r[:2], r[2] | {"id": "q1"}], ["{q}:3: duplicate query id 'q1' (line 1 has it too)"], False),
    # a rejected question's id counts too: validate left it out first, and took the file
    (lambda r: [r[0] | {"review": "rejected"}, r[1], r[2] | {"id": "q1"}],
     ["{q}:3: duplicate query id 'q1' (line 1 has it too)"], False),
    (lambda r: [r[0], r[1] | {"question": "  "}, r[2]], ["{q}:2: empty question"], False),
    (lambda r: [r[0], r[1] | {"references": []}, r[2]], ["{q}:2 (Question 2?): no references"], False),
    (lambda r: [r[0], r[1] | {"corpus": "other"}, r[2]], ["{q}:2 (Question 2?): unknown corpus 'other' (loaded: "
                                                          "'docs')"], True),
    (lambda r: [r[0], r[1] | {"references": [dict(r[1]["references"][0], document="nope.md")]}, r[2]],
     ["{q}:2 (Question 2?): reference 1 names unknown document 'nope.md' in corpus 'docs' (it has: 'a.md')"], True),
])
def test_8_review_and_validate_refuse_a_file_in_the_same_words(files, change, said_lines, blamed):
    """The rules a review checks beside the reader's (repeated ids, empty questions, unknown
    corpora and documents) say what validate says, and blame the corpus only when it is the cause;
    before, review said 'id ... is used by lines 1, 3', '... which the corpus does not hold'."""
    folder, queries = files
    write(queries, change(lines(queries)))
    expected = [line.format(q=queries) for line in said_lines]
    heading = f"evaluation set '{queries}'" + (" does not match its corpus" if blamed else "") + ": 1 problem(s)"
    said = {}
    for command, done in (("review", run_review(folder, queries)), ("validate", validate(folder, queries))):
        assert done.returncode == 2, done.stderr
        said[command] = done.stderr[done.stderr.index("chunkwise: error:"):]
        assert said[command].startswith(f"chunkwise: error: {heading}\n"), said[command]
        assert all(line in said[command] for line in expected), said[command]
        assert ("Is --corpus the corpus the questions were written about?" in said[command]) == blamed
    assert said["review"] == said["validate"]


def test_8_an_excerpt_now_found_twice_is_not_called_gone(review_process, files):
    folder, queries = files
    (folder / "a.md").write_text("Preface.\n" + TEXT + "Again: The warranty lasts two years.\n", encoding="utf-8")
    review = review_process(folder, queries)
    status, answer = review.act({"action": "accept", "id": "q1", "revision": 0})
    assert status == 400 and "excerpt 1 now occurs 2 times in 'a.md'" in answer["error"]
    assert "not in" not in answer["error"]
    status, state = review.request("GET", "/api/state")
    assert state["questions"][0]["references"][0]["problem"] == "ambiguous"
    review.stop()
    err = review.stderr()
    assert "3 marked stale whose excerpt now occurs more than once" in err and "gone" not in err


def test_8_a_revision_that_is_not_a_number_is_named_as_such(review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    status, answer = review.act({"action": "accept", "id": "q1", "revision": "0"})
    assert status == 400 and "got '0'" in answer["error"] and "whole number" in answer["error"]
    assert "the page had" not in answer["error"]
    status, answer = review.act({"action": "accept", "id": "q1", "revision": 5})
    assert status == 409 and "the file has revision 0, the page read revision 5" in answer["error"]
    no_traceback(review)


def test_8_a_malformed_fragment_still_shows_the_page(chromium, review_process, files):
    folder, queries = files
    review = review_process(folder, queries)
    tab = chromium.tab()
    tab.open(review.url + "#%E0%A4%A")  # a truncated escape: decodeURIComponent throws
    assert tab.text("qid") == "q1"
    assert "names no question" in tab.text("message")
    assert tab.evaluate("document.querySelectorAll('#list li').length") == 3
