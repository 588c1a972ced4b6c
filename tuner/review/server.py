"""The review page's server: the standard library's threaded HTTP server, one static page and a
small JSON API, every request checked against a secret token.

* ``GET /?token=T``: the page (``page.html``, a strict Content-Security-Policy: its own script
  only, no other origin, no frames);
* ``GET /api/state``: the questions, the documents' ids and the progress counts;
* ``GET /api/document?id=ID``: one document's converted text, looked up by its id in the loaded
  corpus (never a path joined to the corpus folder: nothing outside the corpus can be named);
* ``POST /api/action``: one action (:meth:`tuner.review.store.ReviewStore.act`).

The token is ``secrets.token_urlsafe``; a request gives it as the ``token`` query parameter or
the ``X-Chunkwise-Token`` header, compared in constant time. Without it the answer is 403 and
nothing else. Two more checks stand beside the token: the ``Host`` a request names (one, as
HTTP/1.1 requires: two, or none in HTTP/1.1, is a 400) must be the address the server was bound to
or a loopback name (a page on another name that resolves here, DNS rebinding, is refused), and a
write (``POST``) from a browser must come from the review page's own origin (another site's form or
script is refused, whatever it guessed). Answers are JSON (``{"error": message}`` when refused: a
malformed request, a file another tool broke, even a bug, is an answer, never a dropped connection
or a traceback on the terminal), never cached, and the page renders every document and question
as text.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import secrets
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..data.evalset import parse_json_object
from ..errors import ChunkwiseError, EvaluationSetError, option
from .store import ReviewError, ReviewStore

#: The largest request body read (an action is a question and a few offsets).
MAX_BODY = 1 << 20
#: The page, with ``{{NONCE}}`` where each answer puts the nonce its script and style run under.
PAGE = Path(__file__).with_name("page.html")
#: The names a request may give as its ``Host`` whatever the server is bound to: this machine's own.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: Addresses that mean every interface: a request may then name any of the machine's addresses.
WILDCARDS = ("0.0.0.0", "::")
#: Methods that change nothing (the others must come from the page's own origin).
READS = ("GET", "HEAD")


class ReviewServer(ThreadingHTTPServer):
    """Serves ``store`` on ``host:port`` (0: a free port) behind ``token``."""

    # A browser keeps its connections open between requests: stopping does not wait for them, but
    # for the action being saved, if any (:meth:`stop` takes the store's lock).
    daemon_threads = True
    block_on_close = False
    # Connections waiting to be accepted (the standard library's 5 made a burst of a few dozen wait
    # seconds for the kernel's retries of a dropped handshake, or give up).
    request_queue_size = 128

    def __init__(self, store: ReviewStore, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> None:
        if not host.strip():  # the socket library would take "" as every interface, without a word
            raise ChunkwiseError(f"{option('host')} is empty: give the address to listen on (127.0.0.1, this "
                                 "machine only; 0.0.0.0 for every interface)")
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.store = store
        self.token = token or secrets.token_urlsafe(24)
        self.page = PAGE.read_text(encoding="utf-8")
        self.host_names = {host.strip("[]").lower().rstrip("."), *LOOPBACK_NAMES}
        self.any_address = host.strip("[]") in WILDCARDS
        super().__init__((host, port), _Handler)

    def host_allowed(self, name: str) -> bool:
        """Whether a request naming host ``name`` (no port) reached this server under a name it
        answers to: the bound address or a loopback name; on every interface, any address (a
        name that is not an address could have been made to resolve here)."""
        if name in self.host_names:
            return True
        if not self.any_address:
            return False
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (reset, closed, timed out) is no error; anything else is one
        line on the terminal, not a traceback (the request was answered 500 if it could be)."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        print(f"chunkwise review: a request from {client_address[0]} failed: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)

    @property
    def url(self) -> str:
        """The page's address, token included."""
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}/?token={self.token}"

    def start(self) -> threading.Thread:
        """Serve from a thread of its own (see :func:`serve_review`)."""
        thread = threading.Thread(target=self.serve_forever, name="chunkwise-review", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop serving; returns once no action is being saved."""
        self.shutdown()
        self.server_close()
        with self.store.lock:
            pass


def serve_review(server: ReviewServer) -> None:
    """Serve until Ctrl-C or SIGTERM (raised in the main thread, which only waits: the server
    answers from a thread of its own, as ``chunkwise dashboard`` does); an action being saved is
    saved before it returns."""
    serving = server.start()
    try:
        while serving.is_alive():
            serving.join(0.5)
    finally:
        server.stop()


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    server_version = "chunkwise-review"
    protocol_version = "HTTP/1.1"
    timeout = 120  # seconds an idle connection is kept

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:  # no line per request on the terminal
        pass

    def address_string(self) -> str:  # no reverse DNS lookup per request
        return str(self.client_address[0])

    # ------------------------------------------------------------------------------ dispatch

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_PUT(self) -> None:
        self._answer("PUT")

    def do_DELETE(self) -> None:
        self._answer("DELETE")

    def do_HEAD(self) -> None:
        self._answer("HEAD")

    def _answer(self, method: str) -> None:
        try:
            self._route(method)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
            raise  # the client went away: nobody to answer (ReviewServer.handle_error says nothing)
        except Exception as exc:  # a bug: still an answer, and one line on the terminal
            self.close_connection = True
            print(f"chunkwise review: {method} {urlsplit(self.path).path} failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            with contextlib.suppress(OSError):
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR,
                           {"error": f"the review server failed ({type(exc).__name__}: {exc}); see its terminal"})

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        body = self._body()
        if body is None:
            return
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1 or (not hosts and self.request_version == "HTTP/1.1"):
            self.close_connection = True
            self._send(HTTPStatus.BAD_REQUEST, {"error": f"a request names one Host (HTTP/1.1), not {len(hosts)}"})
            return
        refusal = self._refusal(method, query, url.netloc)
        if refusal is not None:
            self._send(HTTPStatus.FORBIDDEN, {"error": refusal})
            return
        route = (method, url.path)
        try:
            if route == ("GET", "/"):
                self._send_page()
            elif route == ("GET", "/api/state"):
                self._send(HTTPStatus.OK, self.server.store.state())
            elif route == ("GET", "/api/document"):
                self._send(HTTPStatus.OK, self.server.store.document((query.get("id") or [""])[0]))
            elif route == ("POST", "/api/action"):
                self._send(HTTPStatus.OK, self.server.store.act(_action(body)))
            elif url.path in ("/", "/api/state", "/api/document", "/api/action"):
                self._send(HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{method} {url.path} is not allowed"})
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path} (this server serves the review "
                                                           "page and its questions' documents, nothing else)"})
        except ReviewError as exc:
            self._send(HTTPStatus(exc.status), {"error": str(exc)})
        except (ChunkwiseError, OSError) as exc:  # the file became unreadable or unwritable meanwhile: said
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})

    def _refusal(self, method: str, query: dict[str, list[str]], target_host: str) -> str | None:
        """Why the request is refused (403), or None: a Host this server does not answer to (in the
        header, or in a target of the absolute form, ``GET http://HOST/...``, which stands for it), a
        write from another origin, no token."""
        host = self.headers.get("Host")
        for named in (host, target_host or None):
            if named is not None and not self.server.host_allowed(_host_name(named)):
                names = ", ".join(sorted(self.server.host_names))
                return (f"this server answers to {names}, not to the Host {named!r} this request names (a page "
                        "that made its own name lead here is refused): open the address chunkwise review printed")
        if method not in READS:
            origin = self.headers.get("Origin")
            own = f"http://{host}".lower() if host is not None else None
            if origin is not None and origin.lower().rstrip("/") != own:
                return (f"a change sent from {origin!r} is refused: only the review page itself ({own}) may change "
                        "the questions")
            if origin is None and self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
                return ("a change sent from another site is refused: only the review page itself may change the "
                        "questions")
        given = self.headers.get("X-Chunkwise-Token") or (query.get("token") or [""])[0]
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.server.token.encode()):
            return "this page needs the token that chunkwise review printed in its address (…/?token=…)"
        return None

    def _body(self) -> bytes | None:
        """The request's body (empty for none); None once too large a body was refused."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE if length > MAX_BODY else HTTPStatus.BAD_REQUEST,
                       {"error": f"the request body must be at most {MAX_BODY} bytes, with its Content-Length"})
            return None
        return self.rfile.read(length) if length else b""

    # ------------------------------------------------------------------------------ answers

    def _headers(self, status: HTTPStatus, content_type: str, length: int, policy: str) -> None:
        if self.request_version == "HTTP/0.9":  # a request line not understood (or HTTP/0.9): the answer still
            self.request_version = "HTTP/1.0"   # has its status line and headers, which 0.9 would leave out
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")  # the token never leaves in a Referer
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy", policy)
        self.end_headers()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request line, a header too long), as JSON."""
        self.close_connection = True
        status = HTTPStatus(code)
        self._send(status, {"error": f"{message or status.phrase} ({code})"})

    def _send(self, status: HTTPStatus, payload: Any) -> None:
        try:
            data = json.dumps(payload, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate quoted from a request: escaped, still JSON
            data = json.dumps(payload).encode()
        self._headers(status, "application/json; charset=utf-8", len(data), "default-src 'none'")
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_page(self) -> None:
        nonce = secrets.token_urlsafe(16)
        data = self.server.page.replace("{{NONCE}}", nonce).encode()
        policy = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
                  "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        self._headers(HTTPStatus.OK, "text/html; charset=utf-8", len(data), policy)
        self.wfile.write(data)


def _host_name(header: str) -> str:
    """The name a ``Host`` header gives, without its port or brackets: ``[::1]:8000`` is ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    name, _, port = header.rpartition(":")
    return (name if name and port.isdigit() else header).rstrip(".")


def _action(body: bytes) -> Any:
    """A request's body as the action it holds: one JSON object, read by the rules a questions
    file's line is read by (not nested too deep, no integer of thousands of digits, no lone
    surrogate), or a 400 naming what is wrong."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReviewError(f"the request body is not UTF-8 text (byte {exc.start})") from None
    try:
        return parse_json_object(text, "the request body")
    except EvaluationSetError as exc:
        raise ReviewError(str(exc)) from None
