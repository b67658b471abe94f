"""The gateway's HTTP/1.1 client to model replicas: kept-alive connections per replica, answers
parsed by httptools (uvicorn's C parser), bodies passed on as they arrive.

Why not a general client: the gateway sends one kind of request (a POST with a JSON body, or
a GET) to servers on the cluster's network, and must cost little per request at hundreds of
concurrent requests; a general pool checks every pooled connection on every request (one
system call each), which at 64 connections took most of the gateway's time.

- ``Upstream.send(endpoint, method, path, body, headers)`` returns an ``Answer`` once the status
  line and headers are in; ``Answer.read()`` gives the whole body, ``Answer.chunks()`` the body as
  it arrives (de-chunked); ``Answer.close()`` gives the connection back for the next request
  when the answer was read to its end and the server keeps it alive, and closes it otherwise
  (a client that went away mid-stream: the replica sees the connection close and stops).
- A kept-alive connection the server closed meanwhile fails before any byte of an answer; such
  a request is sent once more on a new connection (nothing of it was processed).
- ``UpstreamError`` is every failure to connect, send or read, with the reason.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator

import httptools

READ_SIZE = 64 * 1024


class UpstreamError(Exception):
    """The replica could not be reached, or broke off its answer."""


class _Parsed:
    """httptools' callbacks: the status, headers and body pieces of one answer."""

    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.headers_done = False
        self.body: deque[bytes] = deque()
        self.done = False
        self.keep_alive = False
        self.parser: httptools.HttpResponseParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(bytes(body))

    def on_message_complete(self) -> None:
        # asked here: once the message is over the parser forgets what its headers said
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()
        self.done = True


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Answer:
    def __init__(self, pool: Upstream, endpoint: str, conn: Connection,
                 parser: httptools.HttpResponseParser, parsed: _Parsed) -> None:
        self._pool, self._endpoint, self._conn = pool, endpoint, conn
        self._parser, self._parsed = parser, parsed
        self.status: int = parser.get_status_code()
        self.headers = parsed.headers
        self._closed = False

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k == name), "")

    async def chunks(self) -> AsyncIterator[bytes]:
        parsed = self._parsed
        while True:
            while parsed.body:
                yield parsed.body.popleft()
            if parsed.done:
                return
            await self._feed()

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.chunks()])

    async def _feed(self) -> None:
        try:
            data = await self._conn[0].read(READ_SIZE)
        except OSError as exc:
            raise UpstreamError(f"reading the answer failed: {exc}") from None
        if not data:
            raise UpstreamError("the replica closed the connection before the end of its "
                                "answer")
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise UpstreamError(f"the replica's answer is not HTTP/1.1: {exc}") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._parsed.done and self._parsed.keep_alive:
            self._pool._give_back(self._endpoint, self._conn)
        else:
            self._conn[1].close()


class Upstream:
    def __init__(self, idle_per_endpoint: int = 512, connect_timeout_s: float = 10.0) -> None:
        self.idle_per_endpoint, self.connect_timeout_s = idle_per_endpoint, connect_timeout_s
        self._idle: dict[str, list[Connection]] = {}

    async def send(self, endpoint: str, method: str, path: str, body: bytes = b"",
                   headers: tuple[tuple[str, str], ...] = ()) -> Answer:
        """``method path`` to ``host:port`` ``endpoint``; the answer once its headers are in."""
        head = [f"{method} {path} HTTP/1.1", f"Host: {endpoint}",
                f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        pooled = self._idle.get(endpoint)
        if pooled:
            conn = pooled.pop()
            try:
                return await self._exchange(endpoint, conn, request)
            except _Stale:
                pass  # closed by the server while idle: once more on a new connection
        conn = await self._connect(endpoint)
        try:
            return await self._exchange(endpoint, conn, request)
        except _Stale:
            raise UpstreamError("the replica closed the connection without an answer") \
                from None

    async def _connect(self, endpoint: str) -> Connection:
        host, _, port = endpoint.rpartition(":")
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), int(port)), self.connect_timeout_s)
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            raise UpstreamError(f"cannot connect to {endpoint}: "
                                f"{exc or type(exc).__name__}") from None

    async def _exchange(self, endpoint: str, conn: Connection, request: bytes) -> Answer:
        reader, writer = conn
        parsed = _Parsed()
        parser = parsed.parser = httptools.HttpResponseParser(parsed)
        first = True
        try:
            writer.write(request)
            await writer.drain()
            while not parsed.headers_done:
                data = await reader.read(READ_SIZE)
                if not data:
                    writer.close()
                    if first:
                        raise _Stale
                    raise UpstreamError("the replica closed the connection mid-answer")
                first = False
                parser.feed_data(data)
        except (ConnectionError, BrokenPipeError) as exc:
            writer.close()
            if first:
                raise _Stale from None
            raise UpstreamError(f"the replica broke off: {exc}") from None
        except httptools.HttpParserError as exc:
            writer.close()
            raise UpstreamError(f"the replica's answer is not HTTP/1.1: {exc}") from None
        except OSError as exc:
            writer.close()
            raise UpstreamError(f"talking to {endpoint} failed: {exc}") from None
        return Answer(self, endpoint, conn, parser, parsed)

    def _give_back(self, endpoint: str, conn: Connection) -> None:
        idle = self._idle.setdefault(endpoint, [])
        if len(idle) < self.idle_per_endpoint and not conn[0].at_eof():
            idle.append(conn)
        else:
            conn[1].close()


class _Stale(Exception):
    """A connection that ended before any byte of an answer."""
