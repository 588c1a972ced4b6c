"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai_stub import OpenAIStub


@pytest.fixture
def openai_server() -> Iterator[OpenAIStub]:
    """A started :class:`openai_stub.OpenAIStub` on 127.0.0.1 (free port), stopped afterwards.

    It accepts any API key unless the test sets ``openai_server.api_key``.  Point the client at
    ``openai_server.base_url``; nothing in the environment (``OPENAI_BASE_URL``) is changed.
    """
    with OpenAIStub() as stub:
        yield stub
