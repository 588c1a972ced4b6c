"""mkdocs hook: links from a page to a file outside docs/ (``../../BENCHMARKS.md``,
``../../examples/notebook.py``) work on GitHub, where the pages are read in the repository, but
name nothing in the site. Here each becomes its text, so the strict build checks every other
link and the reader still sees what was named."""

from __future__ import annotations

import posixpath
import re

LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"(^```.*?^```[^\n]*$)", re.S | re.M)


def _outside(src_uri: str, target: str) -> bool:
    if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return False
    path = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), target.split("#", 1)[0]))
    return path == ".." or path.startswith("../")


def on_page_markdown(markdown: str, page, **_) -> str:
    src = page.file.src_uri
    parts = FENCE.split(markdown)
    for n in range(0, len(parts), 2):  # outside code fences
        parts[n] = LINK.sub(lambda m: m.group(1) if _outside(src, m.group(2)) else m.group(0), parts[n])
    return "".join(parts)
