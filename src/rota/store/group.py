"""Group commit: one writer thread turns concurrent writes into one transaction and one fsync.

Vocabulary:

- an *item* is one caller's write, a function ``fn(conn, memo) -> result`` run inside a write
  transaction that the writer opened; ``memo`` is a dict that lives as long as that
  transaction, for facts every item of it may reuse (a project known to exist);
- a *batch* is every item waiting when the writer becomes free (up to ``max_batch``), run in
  arrival order in one transaction: one ``BEGIN IMMEDIATE``/``COMMIT`` on SQLite (one fsync
  with ``synchronous=FULL``), one ``BEGIN``/``COMMIT`` on PostgreSQL. Nothing is delayed on
  purpose: a batch is simply what queued up while the previous commit was being written.

Invariants:

- ``run`` returns only after the transaction holding its item has committed, so a result a
  caller has seen is durable; an item whose batch did not commit raised instead.
- An item's ``RotaError`` (bad input, a missing project) is that item's outcome and the rest of
  the batch commits. Items must therefore check before they write: an item that raises a
  ``RotaError`` must not have written anything. ``rota.store.jobs.submit`` validates first.
- Any other failure (the database refused the transaction) rolls the whole batch back; each of
  its items is then run again in a transaction of its own, so one item's fault stays its own.
- Items commit in arrival order: an item that arrives after another was acknowledged is in a
  later transaction, so identity keys it allocates are larger.

The writer thread starts with the first item and stops at ``close``, after finishing what was
queued before it; ``run`` after ``close`` raises ``StoreClosed``.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from sqlalchemy import Connection

from rota.core import RotaError

R = TypeVar("R")
DEFAULT_MAX_BATCH = 256
log = logging.getLogger(__name__)


class StoreClosed(RotaError):
    """The store was closed; nothing more is written through it."""

    code = "store_closed"


@dataclass(slots=True)
class _Pending(Generic[R]):
    fn: Callable[[Connection, dict[Any, Any]], R]
    future: Future = field(default_factory=Future)


_STOP = object()


class GroupCommit:
    """Runs items in batches on one writer thread; ``begin`` opens one write transaction."""

    def __init__(self, begin: Callable[[], AbstractContextManager[Connection]],
                 max_batch: int = DEFAULT_MAX_BATCH, name: str = "rota-group-commit") -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._begin = begin
        self._max_batch = max_batch
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0  # transactions committed, for tests and benchmarks
        self.items = 0

    def run(self, fn: Callable[[Connection, dict[Any, Any]], R]) -> R:
        """Run ``fn`` in the next batch; its result once the batch has committed."""
        return self.start(fn).result()

    def start(self, fn: Callable[[Connection, dict[Any, Any]], R]) -> Future:
        """Queue ``fn`` for the next batch; the future resolves once the batch has committed
        (for callers that must not block a thread, such as an event loop)."""
        pending: _Pending[R] = _Pending(fn)
        with self._lock:
            if self._closed:
                raise StoreClosed("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put(pending)
        return pending.future

    def close(self) -> None:
        """Finish what is queued, then stop the writer. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._commit(batch)
            if stop:
                return

    def _commit(self, batch: list[_Pending[Any]]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            with self._begin() as conn:
                memo: dict[Any, Any] = {}
                for item in batch:
                    try:
                        outcomes.append((True, item.fn(conn, memo)))
                    except RotaError as exc:
                        outcomes.append((False, exc))
        except BaseException as exc:  # the transaction did not commit
            if len(batch) > 1:
                log.warning("a batch of %d writes failed (%s); writing each alone",
                            len(batch), exc)
                for item in batch:
                    self._commit([item])
            else:
                batch[0].future.set_exception(exc)
            return
        self.batches += 1
        self.items += len(batch)
        for item, (ok, value) in zip(batch, outcomes):
            if ok:
                item.future.set_result(value)
            else:
                item.future.set_exception(value)
