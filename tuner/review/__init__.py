"""``chunkwise review``: a local page to review an evaluation set's questions beside their documents.

:mod:`.store` keeps the questions file (each action saved atomically, stale questions marked), with
:mod:`.actions` (what an action may hold, checked) and :mod:`.files` (the file's identity, the leftovers
of a killed save); :mod:`.server` serves the page and its JSON API behind a secret token.
"""

from .server import ReviewServer, serve_review
from .store import ReviewError, ReviewStore

__all__ = ["ReviewError", "ReviewServer", "ReviewStore", "serve_review"]
