"""The gateway's client to replicas (``rota.api.upstream``) against small real HTTP/1.1 servers
on loopback: connections kept alive and reused, chunked bodies passed on piece by piece, a
kept-alive connection closed by the server retried once on a new one, failures named."""

from __future__ import annotations

import asyncio
import socket

import pytest

from rota.api.upstream import Upstream, UpstreamError

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
CHUNKED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n")


async def serve(handler):
    """A server that answers each request line with ``handler(writer, request)``; returns it,
    its endpoint and a list of accepted connections."""
    accepted: list[int] = []

    async def one(reader, writer) -> None:
        accepted.append(1)
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                break
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), b"0"))
            await reader.readexactly(length)
            if await handler(writer, head) == "close":
                writer.close()
                return

    server = await asyncio.start_server(one, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"127.0.0.1:{port}", accepted


def test_connections_are_kept_alive_and_reused():
    async def main():
        async def ok(writer, _):
            writer.write(OK)
        server, endpoint, accepted = await serve(ok)
        up = Upstream()
        for _ in range(5):
            answer = await up.send(endpoint, "POST", "/v1/x", b'{"a": 1}')
            assert (answer.status, await answer.read()) == (200, b"{}")
            assert answer.header("content-type") == "application/json"
            answer.close()
        server.close()
        return len(accepted)
    assert asyncio.run(main()) == 1


def test_a_chunked_stream_comes_piece_by_piece():
    async def main():
        sent = asyncio.Event()

        async def stream(writer, _):
            writer.write(CHUNKED + b"5\r\nhello\r\n")
            await writer.drain()
            await sent.wait()  # the second piece only once the first was received
            writer.write(b"5\r\nworld\r\n0\r\n\r\n")
        server, endpoint, _ = await serve(stream)
        answer = await Upstream().send(endpoint, "POST", "/v1/x", b"{}")
        pieces = []
        async for piece in answer.chunks():
            pieces.append(piece)
            sent.set()
        answer.close()
        server.close()
        return pieces
    assert asyncio.run(main()) == [b"hello", b"world"]


def test_a_kept_alive_connection_the_server_closed_is_retried_once_on_a_new_one():
    async def main():
        async def ok_then_close(writer, _):
            writer.write(OK)
            await writer.drain()
            return "close"  # the client still pools the connection
        server, endpoint, accepted = await serve(ok_then_close)
        up = Upstream()
        for _ in range(2):
            answer = await up.send(endpoint, "GET", "/health")
            assert await answer.read() == b"{}"
            answer.close()
            await asyncio.sleep(0.05)
        server.close()
        return len(accepted)
    assert asyncio.run(main()) == 2


def test_failures_are_upstream_errors_that_say_what_happened():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]  # nothing listens there once closed

    async def refused():
        await Upstream().send(f"127.0.0.1:{free}", "GET", "/")

    with pytest.raises(UpstreamError, match="cannot connect"):
        asyncio.run(refused())

    async def broken():
        async def half(writer, _):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            await writer.drain()
            return "close"
        server, endpoint, _ = await serve(half)
        answer = await Upstream().send(endpoint, "GET", "/")
        try:
            await answer.read()
        finally:
            server.close()

    with pytest.raises(UpstreamError, match="before the end"):
        asyncio.run(broken())
