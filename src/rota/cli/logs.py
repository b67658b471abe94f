"""A job's output on the terminal: ``rota logs``, ``rota run --wait``, and ``rota show``'s tail.

- Both streams by default, as Slurm's output file and ``kubectl logs`` give them: the job's
  standard output goes to rota's standard output and its standard error to rota's standard
  error (so ``rota logs 12 > out.txt`` still separates them). ``--stdout`` or ``--stderr``
  picks one, printed on standard output (``rota logs 12 --stderr | grep ...``). Without
  ``-f`` the streams are printed one after the other (output first); with ``-f`` both are
  followed at once, each written as it arrives.
- ``--tail N``: only the last N lines of each stream (then, with ``-f``, what comes next).
- ``--all-replicas``: every replica's streams, each line labelled with its replica's rank as
  ``srun --label`` does (``1: loss 0.3``); without ``-f`` replica by replica, with ``-f`` all
  at once, a line printed whole once it ends (the last one, unended, when its stream ends).
- Following ends when the job has ended and everything it wrote was printed; the exit status
  is then the job's (``outcome``): 0 when it succeeded, its exit code when it failed with one,
  1 otherwise (failed without a code, cancelled, rejected), and one line on stderr says how it
  ended when that was not a success.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable

if TYPE_CHECKING:
    from rota.client import Client

STREAMS = ("stdout", "stderr")
EXIT_FAILED = 1


def outcome(job: dict[str, Any]) -> int:
    """The exit status that stands for how ``job`` ended (see the module docstring)."""
    if job["state"] == "succeeded":
        return 0
    code = job.get("exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else EXIT_FAILED


def ended_line(job: dict[str, Any]) -> str:
    code = f", exit code {job['exit_code']}" if job.get("exit_code") is not None else ""
    why = f" ({job['reason']})" if job.get("reason") else ""
    return f"rota: job {job['id']} {job['state']}{why}{code}; rota show {job['id']} says more"


def _sink(stream: str, streams: Iterable[str] = STREAMS) -> BinaryIO:
    """Where ``stream`` is printed: standard error only when both streams are shown."""
    both = "stdout" in streams and "stderr" in streams
    return sys.stderr.buffer if both and stream == "stderr" else sys.stdout.buffer


def _write(out: BinaryIO, chunks: Iterable[bytes]) -> None:
    for chunk in chunks:
        out.write(chunk)
        out.flush()


def _last_lines(data: bytes, n: int) -> bytes:
    if n <= 0:
        return b""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[-n:])


def current(client: Client, job: str, replica: int, stream: str, **attempt: int) -> bytes:
    """What the log holds now; nothing for a job that has not started (or never did).
    ``attempt=N``: an ended attempt's."""
    try:
        return b"".join(client.logs(job, replica, stream, False, **attempt))
    except Exception as exc:
        from rota.client import ApiError  # here, not above: rota.cli.fast loads it on errors only
        if isinstance(exc, ApiError) and exc.code == "no_logs":
            return b""
        raise


def _skipped(chunks: Iterable[bytes], skip: int) -> Iterable[bytes]:
    for chunk in chunks:
        if skip >= len(chunk):
            skip -= len(chunk)
            continue
        yield chunk[skip:]
        skip = 0


class Labelled:
    """A sink that writes each line with ``RANK: `` before it (as ``srun --label``), keeping a
    line that has not ended until it does; ``lock`` keeps the lines of several replicas that
    share one stream whole."""

    def __init__(self, out: BinaryIO, rank: int, lock: threading.Lock) -> None:
        self.out, self.prefix, self.lock = out, f"{rank}: ".encode(), lock
        self.partial = b""

    def write(self, chunk: bytes) -> None:
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        if lines:
            with self.lock:
                self.out.write(b"".join(self.prefix + line + b"\n" for line in lines))

    def flush(self) -> None:
        with self.lock:
            self.out.flush()

    def close(self) -> None:
        """The last line, if it never ended."""
        if self.partial:
            self.partial, last = b"", self.partial
            self.write(last + b"\n")
        self.flush()


def _sinks(streams: tuple[str, ...], replica: int, ranks: tuple[int, ...] | None
           ) -> list[tuple[int, str, Any]]:
    """(replica, stream, where it is printed) for each stream of each replica in ``ranks``
    (labelled), or (``ranks`` None) of ``replica`` alone, as they are."""
    if ranks is None:
        return [(replica, s, _sink(s, streams)) for s in streams]
    locks = {s: threading.Lock() for s in streams}
    return [(r, s, Labelled(_sink(s, streams), r, locks[s])) for r in ranks for s in streams]


def _follow_one(client: Client, job: str, replica: int, stream: str, tail: int | None,
                out: BinaryIO, errors: list[BaseException]) -> None:
    try:
        skip = 0
        if tail is not None:
            now = current(client, job, replica, stream)
            skip = len(now)
            _write(out, [_last_lines(now, tail)])
        _write(out, _skipped(client.logs(job, replica, stream, True), skip))
    except BaseException as exc:  # noqa: BLE001 - handed to the main thread
        errors.append(exc)


def follow(client: Client, job: str, replica: int = 0, streams: Iterable[str] = STREAMS,
           tail: int | None = None, ranks: tuple[int, ...] | None = None) -> None:
    """Print the streams as they grow until the job has ended; errors of the server are
    raised here, in the calling thread. ``ranks``: those replicas' streams at once, labelled
    (``Labelled``), instead of ``replica``'s."""
    errors: list[BaseException] = []
    streams = tuple(streams)
    sinks = _sinks(streams, replica, ranks)
    threads = [threading.Thread(target=_follow_one, daemon=True, args=(
        client, job, r, s, tail, out, errors)) for r, s, out in sinks]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)  # wakes up for Ctrl-C
    for _, _, out in sinks:
        if isinstance(out, Labelled):
            out.close()
    if errors:
        raise errors[0]


def show_now(client: Client, job: str, replica: int = 0, streams: Iterable[str] = STREAMS,
             tail: int | None = None, ranks: tuple[int, ...] | None = None,
             **attempt: int) -> bool:
    """Print what the streams hold now, one after the other (``ranks``: those replicas',
    replica by replica, labelled, instead of ``replica``'s); whether anything was printed.
    ``attempt=N``: an ended attempt's (the full client only)."""
    wrote = False
    streams = tuple(streams)
    sinks = _sinks(streams, replica, ranks)
    for rank, stream, out in sinks:
        if tail is None:
            chunks = list(client.logs(job, rank, stream, False, **attempt))
        else:
            chunks = [_last_lines(current(client, job, rank, stream, **attempt), tail)]
        _write(out, chunks)
        if isinstance(out, Labelled):
            out.close()
        wrote = wrote or any(chunks)
    return wrote
