"""Telling a busy SQLite database apart from other database errors, and what to say.

SQLite has one writer at a time. With WAL, a busy timeout and long jobs writing in short
transactions this is rare, but a write can still wait longer than the timeout (a big import is
one transaction by design). Pages then answer 503 (config/middleware.py) and commands a
`CommandError`, both with this advice, instead of a traceback.
"""
from __future__ import annotations

from django.db import OperationalError

BUSY_MESSAGE = (
    "The database is busy with another write (SQLite allows one writer at a time); try again "
    "in a few seconds. Studies that run heavy jobs while people work should use PostgreSQL "
    "(DATABASE_URL, docs/DEPLOYMENT.md)."
)


def is_database_busy(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError) and "database is locked" in str(exc).lower()
