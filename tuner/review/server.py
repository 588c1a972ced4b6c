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
nothing else. Answers are JSON (``{"error": message}`` when refused), never cached, and the page
renders every document and question as text.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import ChunkwiseError
from .store import ReviewError, ReviewStore

#: The largest request body read (an action is a question and a few offsets).
MAX_BODY = 1 << 20
#: The page, with ``{{NONCE}}`` where each answer puts the nonce its script and style run under.
PAGE = Path(__file__).with_name("page.html")


class ReviewServer(ThreadingHTTPServer):
    """Serves ``store`` on ``host:port`` (0: a free port) behind ``token``."""

    # A browser keeps its connections open between requests: stopping does not wait for them, but
    # for the action being saved, if any (:meth:`stop` takes the store's lock).
    daemon_threads = True
    block_on_close = False

    def __init__(self, store: ReviewStore, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.store = store
        self.token = token or secrets.token_urlsafe(24)
        self.page = PAGE.read_text(encoding="utf-8")
        super().__init__((host, port), _Handler)

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

    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        body = self._body()
        if body is None:
            return
        if not self._authorized(query):
            self._send(HTTPStatus.FORBIDDEN, {"error": "this page needs the token that chunkwise review printed in "
                                                       "its address (…/?token=…)"})
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
                try:
                    action = json.loads(body or b"null")
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise ReviewError("the request body is not JSON") from None
                self._send(HTTPStatus.OK, self.server.store.act(action))
            elif url.path in ("/", "/api/state", "/api/document", "/api/action"):
                self._send(HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{method} {url.path} is not allowed"})
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path} (this server serves the review "
                                                           "page and its questions' documents, nothing else)"})
        except ReviewError as exc:
            self._send(HTTPStatus(exc.status), {"error": str(exc)})
        except (ChunkwiseError, OSError) as exc:  # the file became unreadable or unwritable meanwhile: said
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})

    def _authorized(self, query: dict[str, list[str]]) -> bool:
        given = self.headers.get("X-Chunkwise-Token") or (query.get("token") or [""])[0]
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.server.token.encode())

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
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")  # the token never leaves in a Referer
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy", policy)
        self.end_headers()

    def _send(self, status: HTTPStatus, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self._headers(status, "application/json; charset=utf-8", len(data), "default-src 'none'")
        self.wfile.write(data)

    def _send_page(self) -> None:
        nonce = secrets.token_urlsafe(16)
        data = self.server.page.replace("{{NONCE}}", nonce).encode()
        policy = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
                  "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        self._headers(HTTPStatus.OK, "text/html; charset=utf-8", len(data), policy)
        self.wfile.write(data)
