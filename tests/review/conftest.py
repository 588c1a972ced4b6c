"""A real headless Chromium driven over the Chrome DevTools Protocol, for the review page's tests.

The browser is Debian's (``apt-get install chromium-headless-shell``, or ``chromium``; nothing is
downloaded): the first of ``$CHUNKWISE_TEST_CHROMIUM``, ``chromium-headless-shell`` and ``chromium``
found on the PATH. Without one the browser tests are skipped, unless ``$CHUNKWISE_TEST_CHROMIUM`` is
set (``.ci/run`` sets it to the one it installs): then they fail. It is driven through
``--remote-debugging-pipe`` (file descriptors 3 and 4, NUL-separated JSON): no WebSocket library,
no port.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuner.data.corpus import load_corpus
from tuner.review import ReviewServer, ReviewStore

#: Seconds one DevTools command, or a wait for the page, may take.
TIMEOUT_S = 20


def chromium_binary() -> str | None:
    """The browser to drive; None (the tests skip) only when none is given and none is installed."""
    given = os.environ.get("CHUNKWISE_TEST_CHROMIUM")
    if given:  # CI names the one it installed: the tests must run, not skip
        found = shutil.which(given)
        if found is None:
            raise AssertionError(f"CHUNKWISE_TEST_CHROMIUM={given!r} is not an executable")
        return found
    return next(filter(None, map(shutil.which, ("chromium-headless-shell", "chromium"))), None)


class Tab:
    """One page of the browser (a DevTools session)."""

    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser, self.session = browser, session

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, self.session, **params)

    def evaluate(self, expression: str) -> Any:
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in answer:
            raise AssertionError(f"the page raised: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait(self, expression: str, what: str) -> Any:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what} ({expression})")

    def open(self, url: str) -> None:
        """Load ``url`` afresh (by way of about:blank: a change of the fragment alone reloads nothing)."""
        self.send("Page.navigate", url="about:blank")
        self.wait("location.href === 'about:blank'", "about:blank")
        self.send("Page.navigate", url=url)
        self.wait("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'",
                  "the review page to load")

    def text(self, element_id: str) -> str:
        return self.evaluate(f"document.getElementById({json.dumps(element_id)}).textContent")

    def mouse(self, kind: str, x: float, y: float, buttons: int = 0) -> None:
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", buttons=buttons, clickCount=1)

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element."""
        x, y = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                             ".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        self.mouse("mousePressed", x, y, 1)
        self.mouse("mouseReleased", x, y)

    def drag_select(self, start: int, end: int) -> None:
        """Select characters ``start:end`` (code points of the shown document) with the mouse: press
        on the left edge of the first, move, release on the right edge of the last."""
        x1, y1, x2, y2 = self.evaluate(f"""(() => {{
            function at(cp) {{
                for (const span of document.getElementById("doc").children) {{
                    const first = +span.dataset.start, chars = Array.from(span.textContent);
                    if (cp >= first && cp < first + chars.length) {{
                        const range = document.createRange(), from = chars.slice(0, cp - first).join("").length;
                        range.setStart(span.firstChild, from);
                        range.setEnd(span.firstChild, from + chars[cp - first].length);
                        return range.getBoundingClientRect();
                    }}
                }}
                throw new Error("no character " + cp);
            }}
            const a = at({start}), b = at({end - 1});
            return [a.left + 1, (a.top + a.bottom) / 2, b.right - 1, (b.top + b.bottom) / 2];
        }})()""")
        self.mouse("mousePressed", x1, y1, 1)
        self.mouse("mouseMoved", (x1 + x2) / 2, (y1 + y2) / 2, 1)
        self.mouse("mouseMoved", x2, y2, 1)
        self.mouse("mouseReleased", x2, y2)

    def key(self, key: str, *, ctrl: bool = False) -> None:
        codes = {"Enter": 13, "Escape": 27}
        params: dict[str, Any] = {"key": key, "modifiers": 2 if ctrl else 0}
        if key in codes:
            params |= {"code": key, "windowsVirtualKeyCode": codes[key]}
        elif not ctrl:
            params["text"] = key
        self.send("Input.dispatchKeyEvent", type="keyDown", **params)
        self.send("Input.dispatchKeyEvent", type="keyUp", **{k: v for k, v in params.items() if k != "text"})

    def type(self, text: str) -> None:
        self.send("Input.insertText", text=text)


class Chromium:
    """A headless Chromium process and its DevTools pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def on_fds_3_and_4() -> None:  # in the child: the pipe's ends where Chromium looks for them
            read, write = os.dup(commands_read), os.dup(answers_write)
            os.dup2(read, 3)
            os.dup2(write, 4)

        arguments = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                     "--no-default-browser-check", "--disable-extensions", "--window-size=1280,1000",
                     f"--user-data-dir={profile}", "about:blank"]
        if os.geteuid() == 0:
            arguments.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
        self.process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=on_fds_3_and_4,
                                        # after preexec_fn, close_fds would close 3 and 4; Python's own
                                        # descriptors are not inherited anyway (PEP 446)
                                        close_fds=False)
        os.close(commands_read)
        os.close(answers_write)
        self._buffer = b""
        self._next_id = 0

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            answer = self._receive(deadline, method)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise AssertionError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _receive(self, deadline: float, method: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise AssertionError(f"Chromium did not answer {method} in {TIMEOUT_S} s")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise AssertionError(f"Chromium closed its DevTools pipe (exit status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def tab(self) -> Tab:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        tab = Tab(self, session)
        tab.send("Page.enable")
        return tab

    def close(self) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._answers)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium: apt-get install chromium-headless-shell (or set CHUNKWISE_TEST_CHROMIUM)")
    browser = Chromium(binary, tmp_path_factory.mktemp("chromium-profile"))
    try:
        browser.send("Browser.getVersion")
        yield browser
    finally:
        browser.close()


class Review:
    """A review server on a corpus folder and questions file, serving from a thread."""

    def __init__(self, corpus_dir: Path, queries: Path) -> None:
        self.corpus = load_corpus(corpus_dir)
        self.queries = queries
        self.store = ReviewStore(queries, self.corpus)
        self.opened = self.store.open()
        self.server = ReviewServer(self.store)
        self.server.start()
        self.url = self.server.url

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.queries.read_text(encoding="utf-8").splitlines() if line.strip()]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.records()}


@pytest.fixture
def review_of() -> Iterator[Any]:
    """``review_of(corpus_dir, queries)``: a started :class:`Review`, stopped after the test."""
    started: list[Review] = []

    def start(corpus_dir: Path, queries: Path) -> Review:
        started.append(Review(corpus_dir, queries))
        return started[-1]

    yield start
    for review in started:
        review.server.stop()


class ReviewProcess:
    """A real ``chunkwise review`` process (``python -m tuner.cli review``), its standard error
    kept in a file to read once it stopped."""

    def __init__(self, corpus_dir: Path, queries: Path, stderr: Path, *options: str) -> None:
        self.queries = queries
        self.stderr_path = stderr
        self._stderr = stderr.open("w", encoding="utf-8")
        self.process = subprocess.Popen([sys.executable, "-m", "tuner.cli", "review", "--corpus", str(corpus_dir),
                                         "--queries", str(queries), *options],
                                        stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        line = self.process.stdout.readline()
        if " at http" not in line:
            self.stop()
            raise AssertionError(f"chunkwise review did not start: {line!r}\n{self.stderr()}")
        self.url = line.split(" at ", 1)[1].split()[0]
        self.base, self.token = self.url.split("?token=")
        self.host = self.base.split("//", 1)[1].rstrip("/")  # 127.0.0.1:PORT
        self.port = int(self.host.rsplit(":", 1)[1])

    def request(self, method: str, path: str, body: bytes | str | dict | None = None,
                headers: dict[str, str] | None = None, token: bool = True) -> tuple[int, Any]:
        """One request on a connection of its own: the status and the JSON answer (a dropped
        connection raises, as it would in the page)."""
        sent = {"X-Chunkwise-Token": self.token} if token else {}
        sent |= headers or {}
        if isinstance(body, dict):
            body = json.dumps(body)
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        try:
            connection.request(method, path, body=body.encode() if isinstance(body, str) else body, headers=sent)
            answer = connection.getresponse()
            data = answer.read()
            assert answer.getheader("Content-Type", "").startswith("application/json"), data[:200]
            return answer.status, json.loads(data)
        finally:
            connection.close()

    def act(self, action: dict | str | bytes, **headers: str) -> tuple[int, Any]:
        return self.request("POST", "/api/action", action, headers)

    def stop(self) -> int:
        """SIGTERM, as Ctrl-C would; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self._stderr.close()
        return self.process.returncode

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8")


@pytest.fixture
def review_process(tmp_path: Path) -> Iterator[Any]:
    """``review_process(corpus_dir, queries, *options)``: a started :class:`ReviewProcess`, stopped after the test."""
    started: list[ReviewProcess] = []

    def start(corpus_dir: Path, queries: Path, *options: str) -> ReviewProcess:
        started.append(ReviewProcess(corpus_dir, queries, tmp_path / f"review-{len(started)}.stderr", *options))
        return started[-1]

    yield start
    for review in started:
        review.stop()

