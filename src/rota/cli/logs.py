"""A job's output on the terminal: ``rota logs``, ``rota run --wait``, and ``rota show``'s tail.

- Both streams by default, as Slurm's output file and ``kubectl logs`` give them: the job's
  standard output goes to rota's standard output and its standard error to rota's standard
  error (so ``rota logs 12 > out.txt`` still separates them). ``--stdout`` or ``--stderr``
  picks one, printed on standard output (``rota logs 12 --stderr | grep ...``). Without
  ``-f`` the streams are printed one after the other (output first); with ``-f`` both are
  followed at once, each written as it arrives.
- ``--tail N``: only the last N lines of each stream (then, with ``-f``, what comes next).
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
           tail: int | None = None) -> None:
    """Print the streams as they grow until the job has ended; errors of the server are
    raised here, in the calling thread."""
    errors: list[BaseException] = []
    streams = tuple(streams)
    threads = [threading.Thread(target=_follow_one, daemon=True, args=(
        client, job, replica, s, tail, _sink(s, streams), errors)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)  # wakes up for Ctrl-C
    if errors:
        raise errors[0]


def show_now(client: Client, job: str, replica: int = 0, streams: Iterable[str] = STREAMS,
             tail: int | None = None, **attempt: int) -> bool:
    """Print what the streams hold now, one after the other; whether anything was printed.
    ``attempt=N``: an ended attempt's (the full client only)."""
    wrote = False
    streams = tuple(streams)
    for stream in streams:
        if tail is None:
            chunks = list(client.logs(job, replica, stream, False, **attempt))
        else:
            chunks = [_last_lines(current(client, job, replica, stream, **attempt), tail)]
        _write(_sink(stream, streams), chunks)
        wrote = wrote or any(chunks)
    return wrote
