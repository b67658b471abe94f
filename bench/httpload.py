"""HTTP load generator: how many requests per second an HTTP server answers, and how fast.

``--concurrency`` connections (HTTP/1.1, kept alive) each send the same request back to back,
for ``--duration`` seconds or until ``--requests`` have been sent in all; connections are opened
before the clock starts, and a request sent before the end is waited for. With ``--stream`` the
answers are server-sent event streams (an OpenAI ``"stream": true`` body): each is read, through
its chunked transfer encoding, to ``data: [DONE]``, and the time to its first chunk is recorded
too; a stream that ends without ``[DONE]`` is an error.

What it reports: ``requests`` (answered or failed), ``errors`` by status code (a non-2xx answer)
or by kind (``connection``: refused, reset or closed mid-answer; ``timeout``: no full answer in
``--timeout`` seconds; ``protocol``: an answer this client cannot read; ``no [DONE]``;
``not a stream``: a 2xx answer that is not ``text/event-stream``), ``rps`` (requests over the
wall time of the run), and over the successful requests the latency from writing the request to
the end of the answer (p50, p90, p99, max; nearest rank) and, for streams, to the first chunk of
the body (p50, p99).

    python bench/httpload.py http://127.0.0.1:8000/v1/completions --concurrency 64 \\
        --duration 10 --body '{"model": "tiny", "prompt": "hi"}' \\
        --header 'Authorization: Bearer X' [--stream] [--requests N] [--json]

Plain asyncio streams, no third-party client, so that one Python process can drive thousands
of requests per second. ``http://`` only. Importable: ``await run(url, ...)`` returns a
``Result``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


@dataclass
class Result:
    requests: int
    ok: int
    errors: dict[str, int]
    seconds: float
    rps: float
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_p99_ms: float | None
    latency_max_ms: float | None
    first_chunk_p50_ms: float | None = None  # streams only
    first_chunk_p99_ms: float | None = None


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class ProtocolError(Exception):
    """An answer that is not the HTTP this client reads."""


@dataclass
class Tally:
    """What the workers share: when to stop, and what they measured."""

    deadline: float | None
    remaining: int | None
    latencies: list[float] = field(default_factory=list)
    first_chunks: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    finished: int = 0

    def take(self) -> bool:
        """Whether one more request is to be sent (and counts it when there is a limit)."""
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return False
        if self.remaining is not None:
            if self.remaining <= 0:
                return False
            self.remaining -= 1
        return True

    def fail(self, kind: str) -> None:
        self.finished += 1
        self.errors[kind] = self.errors.get(kind, 0) + 1


def build_request(url: str, method: str, body: bytes | None, headers: list[str],
                  stream: bool) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"URL must be http://HOST[:PORT]/PATH, got {url!r}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", "User-Agent: rota-httpload"]
    if stream:
        lines.append("Accept: text/event-stream")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip() or any(c in header for c in "\r\n"):
            raise ValueError(f"a header must read 'Name: value', got {header!r}")
        lines.append(f"{name.strip()}: {value.strip()}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return parts.hostname, parts.port or 80, head + (body or b"")


async def read_answer(reader: asyncio.StreamReader, stream: bool,
                      started: float) -> tuple[int, float | None, bool, str | None]:
    """Reads one answer: (status, seconds to the first body chunk of a stream, whether the server
    keeps the connection, the kind of error of a 2xx stream that went wrong, else None)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise ProtocolError(f"not an HTTP status line: {lines[0][:80]!r}") from None
    length, chunked, keep, sse = None, False, True, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = value.endswith(b"chunked")
        elif name == b"connection":
            keep = b"close" not in value
        elif name == b"content-type":
            sse = value.startswith(b"text/event-stream")
    if status in (204, 304) or status < 200:
        length, chunked = 0, False  # no body, whatever the headers say
    reads_stream = stream and 200 <= status < 300
    if reads_stream and not sse:
        problem: str | None = "not a stream"
    else:
        problem = "no [DONE]" if reads_stream else None
    first: float | None = None
    if chunked:
        tail = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers
                break
            data = await reader.readexactly(size + 2)
            if reads_stream and sse:
                if first is None:
                    first = time.perf_counter() - started
                if b"data: [DONE]" in tail + data:
                    problem = None
                tail = data[-16:]
    elif length is not None:
        data = await reader.readexactly(length)
        if reads_stream and sse:
            first = time.perf_counter() - started
            problem = None if b"data: [DONE]" in data else problem
    else:
        await reader.read()  # the body ends with the connection
        keep = False
    return status, first, keep, problem


async def connect(host: str, port: int, timeout: float) -> Connection | None:
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return None  # tried again at the first request, where the failure counts


async def worker(host: str, port: int, request: bytes, stream: bool, timeout: float,
                 tally: Tally, connection: Connection | None) -> None:
    while tally.take():
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                if connection is None:
                    connection = await asyncio.open_connection(host, port)
                reader, writer = connection
                writer.write(request)
                status, first, keep, problem = await read_answer(reader, stream, started)
        except (OSError, asyncio.IncompleteReadError, ProtocolError, ValueError,
                asyncio.LimitOverrunError) as e:
            # TimeoutError is an OSError, IncompleteReadError an EOFError
            tally.fail("timeout" if isinstance(e, TimeoutError) else "connection"
                       if isinstance(e, (OSError, EOFError)) else "protocol")
            connection = close(connection)
            continue
        if not keep:
            connection = close(connection)
        if not 200 <= status < 300:
            tally.fail(str(status))
        elif problem:
            tally.fail(problem)
        else:
            tally.finished += 1
            tally.latencies.append(time.perf_counter() - started)
            if first is not None:
                tally.first_chunks.append(first)
    close(connection)


def close(connection: Connection | None) -> None:
    if connection is not None:
        connection[1].close()
    return None


async def run(url: str, *, concurrency: int = 64, duration: float | None = None,
              requests: int | None = None, body: bytes | str | None = None,
              method: str | None = None, headers: list[str] | tuple[str, ...] = (),
              stream: bool = False, timeout: float = 30.0) -> Result:
    """Sends the request over ``concurrency`` connections until ``duration`` seconds have
    passed or ``requests`` have been sent (whichever comes first; one of them is required)."""
    if duration is None and requests is None:
        raise ValueError("give a duration, a number of requests, or both")
    if concurrency < 1 or (duration is not None and duration <= 0) \
            or (requests is not None and requests < 1) or timeout <= 0:
        raise ValueError("concurrency, duration, requests and timeout must be positive")
    if isinstance(body, str):
        body = body.encode()
    host, port, request = build_request(url, method or ("POST" if body is not None else "GET"),
                                        body, list(headers), stream)
    connections = await asyncio.gather(*(connect(host, port, timeout) for _ in range(concurrency)))
    tally = Tally(deadline=None, remaining=requests)
    began = time.perf_counter()
    if duration is not None:
        tally.deadline = began + duration
    await asyncio.gather(*(worker(host, port, request, stream, timeout, tally, c)
                           for c in connections))
    seconds = time.perf_counter() - began
    lat = sorted(tally.latencies)
    firsts = sorted(tally.first_chunks)
    return Result(
        requests=tally.finished, ok=len(lat), errors=dict(sorted(tally.errors.items())),
        seconds=round(seconds, 3), rps=round(tally.finished / seconds, 1),
        latency_p50_ms=pct(lat, 50), latency_p90_ms=pct(lat, 90), latency_p99_ms=pct(lat, 99),
        latency_max_ms=pct(lat, 100),
        first_chunk_p50_ms=pct(firsts, 50) if stream else None,
        first_chunk_p99_ms=pct(firsts, 99) if stream else None)


def pct(values: list[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of sorted ``values``, in milliseconds."""
    if not values:
        return None
    return round(values[max(0, math.ceil(p / 100 * len(values)) - 1)] * 1000, 3)


def report(result: Result, stream: bool) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} ms"

    errors = ", ".join(f"{kind}: {count:,}" for kind, count in result.errors.items()) or "none"
    rows = [
        ("requests", f"{result.requests:,} in {result.seconds:.2f} s: {result.rps:,.1f}/s"),
        ("ok", f"{result.ok:,}"),
        ("errors", errors),
        ("latency", f"p50 {ms(result.latency_p50_ms)}   p90 {ms(result.latency_p90_ms)}   "
                    f"p99 {ms(result.latency_p99_ms)}   max {ms(result.latency_max_ms)}"),
    ]
    if stream:
        rows.append(("first chunk", f"p50 {ms(result.first_chunk_p50_ms)}   "
                                    f"p99 {ms(result.first_chunk_p99_ms)}"))
    return "\n".join(f"{name:<12} {value}" for name, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="HTTP/1.1 keep-alive load generator "
                                     "(see the module docstring for what it measures).")
    parser.add_argument("url", help="http://HOST:PORT/PATH")
    parser.add_argument("--concurrency", type=int, default=64, help="connections (default 64)")
    parser.add_argument("--duration", type=float, help="seconds to send for (default 10 "
                        "unless --requests is given)")
    parser.add_argument("--requests", type=int, help="requests to send in all")
    parser.add_argument("--body", help="JSON request body, or @FILE to read it from a file")
    parser.add_argument("--method", help="default POST with a body, else GET")
    parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                        help="an extra request header (repeatable)")
    parser.add_argument("--stream", action="store_true",
                        help="answers are server-sent events: read each to data: [DONE] and "
                        "time its first chunk")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds one request may take (default 30)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    body = args.body
    if body is not None and body.startswith("@"):
        body = Path(body[1:]).read_text()
    duration = 10.0 if args.duration is None and args.requests is None else args.duration
    try:
        result = asyncio.run(run(args.url, concurrency=args.concurrency, duration=duration,
                                 requests=args.requests, body=body, method=args.method,
                                 headers=args.header, stream=args.stream, timeout=args.timeout))
    except ValueError as e:
        parser.error(str(e))
    print(json.dumps(asdict(result)) if args.json else report(result, args.stream))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
