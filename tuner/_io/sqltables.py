"""Creating chunkwise's own tables beside Optuna's, when several processes start at once."""

from __future__ import annotations

import time

import sqlalchemy as sa

#: Error text of a concurrent CREATE TABLE that lost the race (SQLite, PostgreSQL).
_RACE_MARKS = ("already exists", "UNIQUE", "duplicate")


def create_tables(metadata: sa.MetaData, engine: sa.Engine, attempts: int = 5) -> None:
    """``metadata.create_all`` that tolerates another process creating the same tables at the same
    moment (PostgreSQL answers the loser with a unique violation on its catalogue, SQLite with
    "already exists"): it checks again, up to ``attempts`` times, then re-raises."""
    for attempt in range(attempts):
        try:
            metadata.create_all(engine, checkfirst=True)
            return
        except sa.exc.SQLAlchemyError as exc:
            raced = isinstance(exc, sa.exc.IntegrityError) or any(mark in str(exc) for mark in _RACE_MARKS)
            if not raced or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
