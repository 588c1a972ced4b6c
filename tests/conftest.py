"""Shared pytest fixtures."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from openai_stub import OpenAIStub
from postgres import PostgresUnavailable, postgres_server


@pytest.fixture
def openai_server() -> Iterator[OpenAIStub]:
    """A started :class:`openai_stub.OpenAIStub` on 127.0.0.1 (free port), stopped afterwards.

    It accepts any API key unless the test sets ``openai_server.api_key``.  Point the client at
    ``openai_server.base_url``; nothing in the environment (``OPENAI_BASE_URL``) is changed.
    """
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A SQLAlchemy URL (``postgresql+psycopg://``) for a real PostgreSQL server on 127.0.0.1.

    ``CHUNKWISE_TEST_POSTGRES_URL`` when set, else a throwaway cluster started for this session
    (see ``tests/postgres.py``); the test is skipped, with the reason, when neither is possible.
    Tests share its database: use ``fresh_postgres_url`` for one of your own.
    """
    pytest.importorskip("psycopg", reason="psycopg not installed: pip install -e '.[test]'")
    try:
        with postgres_server() as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """The URL of a new, empty database on the ``postgres_url`` server, dropped after the test."""
    name = f"chunkwise_test_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            # DROP DATABASE fails while anything (a leaked engine, a worker) is still connected.
            conn.execute(
                sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"),
                {"name": name},
            )
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
    finally:
        admin.dispose()


@pytest.fixture(autouse=True)
def _forget_endpoint_credentials(monkeypatch) -> Iterator[None]:
    """Credentials taken out of an endpoint URL live in the process (and its environment, for the
    workers it starts): each test starts and ends without any."""
    from tuner._io import secrets

    monkeypatch.setenv(secrets.ENDPOINT_CREDENTIALS_ENVIRONMENT, "")  # restored (unset) after the test
    secrets._credentials.clear()
    yield
    secrets._credentials.clear()


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory) -> Iterator[None]:
    """Keep the tests' embedding cache and calibration out of the user's ~/.cache."""
    import os

    previous = os.environ.get("CHUNKWISE_CACHE_DIR")
    os.environ["CHUNKWISE_CACHE_DIR"] = str(tmp_path_factory.mktemp("chunkwise-cache"))
    yield
    if previous is None:
        os.environ.pop("CHUNKWISE_CACHE_DIR", None)
    else:
        os.environ["CHUNKWISE_CACHE_DIR"] = previous


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request, tmp_path) -> str:
    """A study storage on SQLite (a file in ``tmp_path``), then on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/study.db"
    return request.getfixturevalue("fresh_postgres_url")
