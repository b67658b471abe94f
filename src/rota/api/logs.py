"""Reading a job's logs: the stdout or stderr file of one replica, named by its backend handle.

The control loop persists each launch's handle with the job (``JobRecord.backend_handle``, the
JSON of ``rota.backends.base.Handle``); every replica of it names its ``stdout`` and ``stderr``
files. ``log_chunks`` yields the file in chunks of bytes:

- not following: what the file holds now; a job that has no handle yet has no logs (``NoLogs``);
- following: what the file holds, then what is appended to it, until the job is in a terminal
  state and everything written has been sent. A pending job is waited for. A new launch of the
  job (a requeue gives a new handle) starts again from the top of its new file.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

from rota.backends.base import Handle
from rota.core import InvalidSpec, RotaError
from rota.store import JobRecord

CHUNK = 64 * 1024
STREAMS = ("stdout", "stderr")


class NoLogs(RotaError):
    code = "no_logs"


def handle_of(rec: JobRecord) -> Handle | None:
    if not rec.backend_handle:
        return None
    try:
        return Handle.from_dict(rec.backend_handle)
    except InvalidSpec:
        return None


def check_request(rec: JobRecord, replica: int, stream: str, follow: bool) -> None:
    """Refuse, before any byte is sent, a request that can only fail."""
    if stream not in STREAMS:
        raise InvalidSpec("stream", f"must be stdout or stderr, got {stream!r}")
    if not 0 <= replica < rec.job.replicas:
        raise InvalidSpec("replica", f"job {rec.id} has replicas 0 to {rec.job.replicas - 1}, "
                          f"not {replica}")
    if handle_of(rec) is None and rec.state.terminal:
        raise NoLogs(f"job {rec.id} ended ({rec.state}) without starting, so it has no logs")
    if not follow and log_path(rec, replica, stream) is None:
        raise NoLogs(f"job {rec.id} has not started yet ({rec.state}), so it has no logs; "
                     "follow them (rota logs -f) to wait for them")


def log_path(rec: JobRecord, replica: int, stream: str) -> str | None:
    handle = handle_of(rec)
    if handle is None or replica >= len(handle.replicas):
        return None
    return getattr(handle.replicas[replica], stream)


def log_chunks(get: Callable[[], JobRecord], replica: int, stream: str, follow: bool,
               poll_s: float = 0.25) -> Iterator[bytes]:
    """The bytes of the log; ``get`` re-reads the job (its state and handle)."""
    rec = get()
    if not follow:
        path = log_path(rec, replica, stream)
        if path is not None:
            yield from _read_from(path, 0)
        return
    path, offset = None, 0
    while True:
        current = log_path(rec, replica, stream)
        if current != path:
            path, offset = current, 0
        sent = False
        if path is not None:
            for chunk in _read_from(path, offset):
                offset += len(chunk)
                sent = True
                yield chunk
        if not sent:
            if rec.state.terminal:
                return
            time.sleep(poll_s)
        rec = get()


def _read_from(path: str, offset: int) -> Iterator[bytes]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            while chunk := f.read(CHUNK):
                yield chunk
    except FileNotFoundError:
        return
