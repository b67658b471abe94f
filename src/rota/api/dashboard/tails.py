"""The end of a job's logs for its page: the last ``TAIL_BYTES`` of each replica's standard
output and standard error (the first ``MAX_REPLICAS`` replicas of a larger gang), read through
the API's own log code (``rota.api.logs``: ``check_request`` refuses what the log route
refuses, ``log_chunks`` reads what it reads), for a job the page has already found visible to
its viewer (``rota.api.reads``), so that the page shows what ``rota logs`` prints, no more.

A job that has not started, or ended without starting, has no logs: ``tails`` says why in the
API's words. A log that cannot be read (removed by retention, a backend that cannot read it)
is said as such, and the rest of the page is shown.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

from rota.api.logs import STREAMS, LogReader, NoLogs, check_request, log_chunks
from rota.core import RotaError
from rota.store import JobRecord

TAIL_BYTES = 16 * 1024
MAX_REPLICAS = 8


@dataclass(frozen=True)
class Tail:
    """One stream of one replica: its last lines (``text``), whether earlier bytes were left
    out (``cut``), or why it could not be read (``problem``)."""

    replica: int
    stream: str
    text: str
    cut: bool = False
    problem: str | None = None


def tails(rec: JobRecord, read: LogReader) -> tuple[list[Tail], str | None]:
    """The tails of ``rec``'s logs, replica by replica (stdout, then stderr), and why there
    are none when the job has no logs (None: it has)."""
    try:
        check_request(rec, 0, STREAMS[0], False)
    except NoLogs as exc:
        return [], str(exc)
    out = []
    for replica in range(min(rec.job.replicas, MAX_REPLICAS)):
        for stream in STREAMS:
            try:
                data, cut = last_bytes(log_chunks(lambda: rec, read, replica, stream, False),
                                       TAIL_BYTES)
            except (OSError, RotaError) as exc:
                out.append(Tail(replica, stream, "", problem=f"could not be read ({exc})"))
                continue
            out.append(Tail(replica, stream, _text(data, cut), cut))
    return out, None


def last_bytes(chunks: Iterable[bytes], size: int) -> tuple[bytes, bool]:
    """The last ``size`` bytes of ``chunks``, and whether any came before them."""
    kept: deque[bytes] = deque()
    held = 0
    cut = False
    for chunk in chunks:
        kept.append(chunk)
        held += len(chunk)
        while held - len(kept[0]) >= size:
            held -= len(kept.popleft())
            cut = True
    data = b"".join(kept)
    if len(data) > size:
        data, cut = data[-size:], True
    return data, cut


def _text(data: bytes, cut: bool) -> str:
    """The bytes as text (bad bytes replaced); where earlier bytes were left out, from the
    first whole line on."""
    if cut and b"\n" in data[:-1]:
        data = data[data.index(b"\n") + 1:]
    return data.decode("utf-8", "replace")
