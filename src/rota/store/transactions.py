"""``Transactions``: what every part of ``Store`` is built on — the engine, the clock, and one
transaction per public method.

``Store`` is one class put together from parts that each say one thing (``tenancy``,
``inventory``, ``billing``, and the jobs and the cycle in ``store``); each part reaches the
database only through ``_write``, ``_read`` and ``_retry`` here, so the transaction rules in
``rota.store.store`` hold for all of them alike.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from sqlalchemy import Connection

from rota.store.authcache import AuthCache
from rota.store.engine import WRITE, display_url, make_engine, migrate
from rota.store.errors import Conflict

T = TypeVar("T")
RETRIES = 5


class Transactions:
    """The engine (schema migrated to the newest revision on construction), the injected
    clock, the usage half-life, and the authentication cache the writes clear."""

    def __init__(self, url: str, clock: Callable[[], float], usage_half_life_s: float,
                 auth_ttl_s: float) -> None:
        self.url = url  # never print it: it may hold a password (``display_url``)
        self.display_url = display_url(url)
        self.clock = clock
        self.usage_half_life_s = usage_half_life_s
        self._engine = make_engine(url)
        self.revision = migrate(self._engine)
        self._auth = AuthCache(auth_ttl_s)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._engine.execution_options(**{WRITE: True}).begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        engine = self._engine
        if engine.dialect.name == "postgresql":
            engine = engine.execution_options(isolation_level="REPEATABLE READ")
        with engine.begin() as conn:
            yield conn

    @contextmanager
    def _auth_write(self) -> Iterator[Connection]:
        """A write that changes what a principal is made of: the authentication cache is
        cleared once it ends, committed or not."""
        try:
            with self._write() as conn:
                yield conn
        finally:
            self._auth.invalidate()

    def _retry(self, fn: Callable[[Connection], T]) -> T:
        """``fn`` in a write transaction, run again (re-reading what it read) on ``Conflict``
        up to ``RETRIES`` times in all."""
        for attempt in range(RETRIES):
            try:
                with self._write() as conn:
                    return fn(conn)
            except Conflict:
                if attempt == RETRIES - 1:
                    raise
        raise AssertionError("unreachable")
