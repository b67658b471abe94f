"""Heavy request work off the event loop, with bounds that keep one member from crowding others.

Vocabulary:

- *Heavy work* is checking an upload archive and reading a YAML job file
  (``rota.api.offwork``). It runs in ``workers`` worker processes (``python -m
  rota.api.offwork``, at a lower CPU priority, started on first use and again if one dies),
  never on the event loop or its threads: both hold the interpreter lock for seconds, which
  stalled every other request. A thread per worker waits for its answer.
- *In flight*: a user's heavy requests from before their body is read to their answer, at
  most ``per_user``; and everyone's checks waiting for or running in a worker, at most
  ``total``. One more is refused at once with ``TooMany("busy")`` (HTTP 429, ``Retry-After``)
  and a message saying what to do, so no queue grows without bound and one member's burst
  waits in its own line, not in everyone's.
- *Strikes*: each heavy request of a token that was refused as bad (an archive that is not a
  safe tar.gz, a job file that is not valid YAML: 422) adds one; strikes drain at one per
  ``strike_drain_s``. A token with ``max_strikes`` or more has its uploads and job files
  refused (``TooMany("too_many_failures")``, 429) before they are read, until it has drained
  below: a client that keeps sending bad bodies (each of which may cost a second of CPU) is
  slowed to one try per ``strike_drain_s``. A bad JSON body costs microseconds to refuse and
  is not counted.
- *Upload rate*: each token has a bucket of ``upload_burst`` uploads that refills at
  ``uploads_per_s``; an upload with the bucket empty is ``TooMany("rate_limited")`` (429).

Operators are held to the same bounds: the bounds protect the event loop, not a quota. Tokens
are keyed by user and token name (``Principal.token``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import rota
from rota.core import InvalidSpec
from rota.store.errors import TooMany


@dataclass(frozen=True, slots=True)
class Bounds:
    workers: int = 2            # processes checking archives and reading YAML
    per_user: int = 2           # a user's heavy requests queued or running at once
    total: int = 16             # everyone's
    max_strikes: int = 5        # bad bodies a token may send before it is slowed
    strike_drain_s: float = 10.0  # one strike forgiven every this many seconds
    uploads_per_s: float = 1.0  # a token's uploads, sustained ...
    upload_burst: int = 10      # ... and at once


class Offload:
    """One server's worker pool and the counters that bound it (thread-safe)."""

    def __init__(self, bounds: Bounds = Bounds(),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.bounds, self._now = bounds, monotonic
        self._threads: ThreadPoolExecutor | None = None
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        self._total = 0
        self._strikes: dict[tuple[str, str], tuple[float, float]] = {}  # -> (level, at)
        self._uploads: dict[tuple[str, str], tuple[float, float]] = {}  # -> (tokens, at)

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(self.bounds.workers,
                                                   thread_name_prefix="rota-offload")
                for _ in range(self.bounds.workers):
                    self._idle.put(_Worker())
            return self._threads

    def close(self) -> None:
        """Stop the worker processes (a request in flight fails)."""
        with self._lock:
            threads, self._threads = self._threads, None
        if threads is None:
            return
        threads.shutdown(wait=False, cancel_futures=True)
        for _ in range(self.bounds.workers):
            self._idle.get().stop()

    def _call(self, request: list[Any]) -> list[Any]:
        worker = self._idle.get()
        try:
            return worker.call(request)
        finally:
            self._idle.put(worker)

    async def check_archive(self, user: str, token: str, path: str,
                            limits: Any) -> tuple[int, int]:
        """(members, unpacked bytes) of the archive at ``path``; ``InvalidSpec`` if unsafe."""
        return await self._run(user, token, "upload", "check_archive", path, limits.members,
                               limits.unpacked_bytes)

    async def parse_job_file(self, user: str, token: str, data: bytes) -> Any:
        """The YAML document in ``data`` as JSON values; ``InvalidSpec`` naming the line."""
        return await self._run(user, token, "job file", "parse_job_file",
                               base64.b64encode(data).decode())

    @contextmanager
    def slot(self, user: str, token: str, what: str) -> Iterator[None]:
        """One of the user's heavy requests in flight, from before its body is read to its
        answer: ``TooMany`` when the token has too many strikes or the user (or everyone)
        already has the most in flight."""
        self.refuse_if_striking(user, token)
        self._admit(user, what)
        try:
            yield
        finally:
            self._leave(user)

    async def _run(self, user: str, token: str, what: str, name: str, *args: Any) -> Any:
        """``name(*args)`` in a worker (``rota.api.offwork.FUNCTIONS``), inside a ``slot``;
        a refusal of what it read is a strike against the token."""
        with self._queued(what):
            loop = asyncio.get_running_loop()
            outcome = await loop.run_in_executor(self._executor(), self._call, [name, *args])
        if outcome[0] == "invalid":
            self.strike(user, token)
            raise InvalidSpec(outcome[1], outcome[2])
        if outcome[0] != "ok":
            raise RuntimeError(f"a worker failed on {name}: {outcome[1]}")
        return outcome[1]

    def _admit(self, user: str, what: str) -> None:
        with self._lock:
            mine = self._in_flight.get(user, 0)
            if mine >= self.bounds.per_user:
                raise TooMany("busy", f"user {user} already has {mine} uploads or job files "
                              f"being received or checked, the most one user may have at "
                              f"once; wait for them to be answered, then send this {what} "
                              "again (rota retries by itself)", 2.0)
            self._in_flight[user] = mine + 1

    def _leave(self, user: str) -> None:
        with self._lock:
            left = self._in_flight.get(user, 1) - 1
            if left > 0:
                self._in_flight[user] = left
            else:
                self._in_flight.pop(user, None)

    @contextmanager
    def _queued(self, what: str) -> Iterator[None]:
        """One more check waiting for or running in a worker; ``TooMany`` past ``total``
        (counted from the check, not while a body arrives, so slow senders fill no queue)."""
        with self._lock:
            if self._total >= self.bounds.total:
                raise TooMany("busy", f"the server is checking {self._total} uploads and job "
                              f"files, the most it queues; send this {what} again in a few "
                              "seconds (rota retries by itself)", 2.0)
            self._total += 1
        try:
            yield
        finally:
            with self._lock:
                self._total -= 1

    def refuse_if_striking(self, user: str, token: str) -> None:
        """``TooMany("too_many_failures")`` while the token has too many strikes."""
        b = self.bounds
        with self._lock:
            level = self._strike_level((user, token), self._now())
        if level > b.max_strikes - 1:  # the last strike not yet forgiven
            wait = (level - b.max_strikes + 1) * b.strike_drain_s
            raise TooMany("too_many_failures", f"token {token} of user {user} sent "
                          f"{math.ceil(level)} bad job files or archives recently (422 answers); "
                          "fix the job file or archive and send it again after "
                          "Retry-After", wait)

    def strike(self, user: str, token: str) -> None:
        """One bad body from the token."""
        with self._lock:
            now = self._now()
            key = (user, token)
            self._strikes[key] = (self._strike_level(key, now) + 1, now)

    def _strike_level(self, key: tuple[str, str], now: float) -> float:
        level, at = self._strikes.get(key, (0.0, now))
        level = max(0.0, level - (now - at) / self.bounds.strike_drain_s)
        if level == 0.0:
            self._strikes.pop(key, None)
        return level

    def take_upload(self, user: str, token: str) -> None:
        """One upload from the token's bucket; ``TooMany("rate_limited")`` when it is empty."""
        b = self.bounds
        with self._lock:
            now = self._now()
            key = (user, token)
            tokens, at = self._uploads.get(key, (float(b.upload_burst), now))
            tokens = min(float(b.upload_burst), tokens + (now - at) * b.uploads_per_s)
            if tokens < 1:
                raise TooMany("rate_limited", f"token {token} of user {user} is uploading "
                              f"faster than the {b.uploads_per_s:g} uploads per second it may "
                              f"(bursts of {b.upload_burst}); send it again after Retry-After, "
                              "or upload once and submit several jobs naming that upload",
                              (1 - tokens) / b.uploads_per_s)
            self._uploads[key] = (tokens - 1, now)


class _Worker:
    """One worker process and its pipes; used by one thread at a time."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None

    def call(self, request: list[Any]) -> list[Any]:
        """The worker's answer to ``request``; a worker that died is started again."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = _start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = b""
        if not line:
            self.stop()
            return ["error", "the worker process ended"]
        return list(json.loads(line))

    def stop(self) -> None:
        if self.proc is not None:
            _close(self.proc.stdin)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            _close(self.proc.stdout)
            self.proc = None


def _start() -> subprocess.Popen[bytes]:
    """``python -m rota.api.offwork``, finding this very ``rota`` first."""
    home = str(Path(rota.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", "rota.api.offwork"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)


def _close(pipe: IO[bytes] | None) -> None:
    try:
        if pipe is not None:
            pipe.close()
    except OSError:
        pass
