"""Reading a job's logs: one replica's stdout or stderr, as its backend keeps them.

The control loop persists each launch's handle with the job (``JobRecord.backend_handle``);
the backend that launched it reads the logs (``Backend.read_log``). The API only sees a
``LogReader``: ``(stored handle, rank, stream, offset) -> chunks of bytes`` from ``offset`` on,
as far as written, given to ``create_app`` by whoever composes the control plane (so that the
API never opens a file nor knows a backend). ``log_chunks`` yields:

- not following: what the log holds now; a job that has no handle yet has no logs (``NoLogs``);
- following: what the log holds, then what is appended to it, until the job is in a terminal
  state and everything written has been sent. A pending job is waited for. A new launch of the
  job (a requeue gives a new handle) starts again from the top of its new log.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Iterator, Mapping

from rota.core import InvalidSpec, RotaError
from rota.store import JobRecord

STREAMS = ("stdout", "stderr")
LogReader = Callable[[Mapping[str, Any], int, str, int], Iterator[bytes]]


class NoLogs(RotaError):
    code = "no_logs"


def no_reader(_handle: Mapping[str, Any], _rank: int, _stream: str,
              _offset: int) -> Iterator[bytes]:
    """The reader of a server without a backend: no log has any content."""
    return iter(())


def check_request(rec: JobRecord, replica: int, stream: str, follow: bool) -> None:
    """Refuse, before any byte is sent, a request that can only fail."""
    if stream not in STREAMS:
        raise InvalidSpec("stream", f"must be stdout or stderr, got {stream!r}")
    if not 0 <= replica < rec.job.replicas:
        raise InvalidSpec("replica", f"job {rec.id} has replicas 0 to {rec.job.replicas - 1}, "
                          f"not {replica}")
    if not rec.backend_handle and rec.state.terminal:
        raise NoLogs(f"job {rec.id} ended ({rec.state}) without starting, so it has no logs")
    if not follow and not rec.backend_handle:
        raise NoLogs(f"job {rec.id} has not started yet ({rec.state}), so it has no logs; "
                     "follow them (rota logs -f) to wait for them")


def earlier_attempt(rec: JobRecord, attempt: int,
                    handle_of: Callable[[], Mapping[str, Any] | None], follow: bool) -> JobRecord:
    """The job as its ended attempt ``attempt`` left it, for its logs: that attempt's handle
    (``handle_of``, asked once the attempt is known to have ended; ``NoLogs`` where none was
    kept: it never launched, or launched before handles were kept per attempt). An ended
    attempt's logs are read whole: ``follow`` is refused."""
    if attempt > rec.attempts:
        raise InvalidSpec("attempt", f"job {rec.id} has had attempts 0 to {rec.attempts}, "
                          f"not {attempt}")
    if follow:
        raise InvalidSpec("follow", f"attempt {attempt} of job {rec.id} has ended: its logs "
                          "are read whole, without follow")
    handle = handle_of()
    if not handle:
        raise NoLogs(f"attempt {attempt} of job {rec.id} kept no logs: it never started, or "
                     "started before this release kept each attempt's")
    return replace(rec, backend_handle=handle)


def _launch(rec: JobRecord) -> object:
    handle = rec.backend_handle
    return None if not handle else handle.get("launch_id", handle.get("attempt_dir"))


def log_chunks(get: Callable[[], JobRecord], read: LogReader, replica: int, stream: str,
               follow: bool, poll_s: float = 0.25) -> Iterator[bytes]:
    """The bytes of the log; ``get`` re-reads the job (its state and handle)."""
    rec = get()
    if not follow:
        if rec.backend_handle:
            yield from read(rec.backend_handle, replica, stream, 0)
        return
    launch, offset = None, 0
    while True:
        if _launch(rec) != launch:
            launch, offset = _launch(rec), 0
        sent = False
        if rec.backend_handle:
            for chunk in read(rec.backend_handle, replica, stream, offset):
                offset += len(chunk)
                sent = True
                yield chunk
        if not sent:
            if rec.state.terminal:
                return
            time.sleep(poll_s)
        rec = get()
