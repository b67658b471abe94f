"""Group commit: one writer thread turns concurrent writes into one transaction and one fsync.

Vocabulary:

- a *payload* is one caller's write (for submits: a ``Submission``), handed to ``start``;
- a *batch* is every payload waiting when the writer becomes free (up to ``max_batch``), in
  arrival order, written by ``write(conn, payloads)`` in one transaction: one ``BEGIN
  IMMEDIATE``/``COMMIT`` on SQLite (one fsync with ``synchronous=FULL``), one ``BEGIN``/
  ``COMMIT`` on PostgreSQL. Nothing is delayed on purpose: a batch is simply what queued up
  while the previous commit was being written.

``write`` returns one outcome per payload, in order: the result, or the ``RotaError`` that
refused that payload (bad input, a missing project). A refused payload must have written
nothing; ``rota.store.submit.submit_many`` checks every payload before it writes any.

Invariants:

- A caller's future resolves only after the transaction holding its payload has committed, so
  a result a caller has seen is durable; a payload whose batch did not commit gets an error.
- Any failure other than a per-payload ``RotaError`` (the database refused the transaction)
  rolls the whole batch back; each of its payloads is then written again in a transaction of
  its own, so one payload's fault stays its own.
- Payloads commit in arrival order: a payload queued after another was acknowledged is in a
  later transaction, so identity keys it allocates are larger.

The writer thread starts with the first payload and stops at ``close``, after finishing what
was queued before it; ``start`` after ``close`` raises ``StoreClosed``.
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
from rota.store.errors import StoreClosed

P = TypeVar("P")
R = TypeVar("R")
DEFAULT_MAX_BATCH = 256
log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    payload: Any
    future: Future = field(default_factory=Future)


_STOP = object()


class GroupCommit(Generic[P, R]):
    """Writes payloads in batches on one writer thread; ``begin`` opens one write
    transaction, ``write`` writes a batch in it."""

    def __init__(self, begin: Callable[[], AbstractContextManager[Connection]],
                 write: Callable[[Connection, list[P]], list[R | RotaError]],
                 max_batch: int = DEFAULT_MAX_BATCH, name: str = "rota-group-commit") -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._begin = begin
        self._write = write
        self._max_batch = max_batch
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0  # transactions committed, for tests and benchmarks
        self.items = 0

    def run(self, payload: P) -> R:
        """Write ``payload`` in the next batch; its result once the batch has committed."""
        return self.start(payload).result()

    def start(self, payload: P) -> Future:
        """Queue ``payload`` for the next batch; the future resolves once the batch has
        committed (for callers that must not block a thread, such as an event loop)."""
        pending = _Pending(payload)
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

    def _commit(self, batch: list[_Pending]) -> None:
        try:
            with self._begin() as conn:
                outcomes = self._write(conn, [item.payload for item in batch])
                if len(outcomes) != len(batch):
                    raise AssertionError(f"{len(outcomes)} outcomes for {len(batch)} writes")
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
        for item, outcome in zip(batch, outcomes):
            if isinstance(outcome, RotaError):
                item.future.set_exception(outcome)
            else:
                item.future.set_result(outcome)
