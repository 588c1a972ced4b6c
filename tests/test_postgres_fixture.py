"""The PostgreSQL fixtures give a working server and a separate, dropped database per test."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

# Databases handed out by fresh_postgres_url in this module, in the order the tests ran.
_seen: list[str] = []


def _scalar(url: str, sql: str, **params: object) -> object:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql), params).scalar_one()
    finally:
        engine.dispose()


def test_postgres_url_answers(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+psycopg://")
    assert _scalar(postgres_url, "SELECT 1") == 1


@pytest.mark.parametrize("run", [1, 2])
def test_fresh_postgres_url_is_a_new_empty_database(
    postgres_url: str, fresh_postgres_url: str, run: int
) -> None:
    name = _scalar(fresh_postgres_url, "SELECT current_database()")
    assert name != _scalar(postgres_url, "SELECT current_database()")
    assert name not in _seen
    # The other run's database was dropped after its test.
    for earlier in _seen:
        assert _scalar(postgres_url, "SELECT count(*) FROM pg_database WHERE datname = :n", n=earlier) == 0
    _seen.append(name)

    engine = sa.create_engine(fresh_postgres_url)
    try:
        with engine.begin() as conn:
            # Empty: nothing written by another test is here.
            assert conn.execute(sa.text("SELECT to_regclass('public.marker')")).scalar_one() is None
            conn.execute(sa.text("CREATE TABLE marker (run integer)"))
            conn.execute(sa.text("INSERT INTO marker VALUES (:run)"), {"run": run})
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT run FROM marker")).scalar_one() == run
    finally:
        engine.dispose()  # the fixture would terminate a leaked connection, but don't leak one
