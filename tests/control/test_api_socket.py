"""The API's listening socket (``rota.server.compose._bind``): connections accepted from it have
Nagle's algorithm off, as asyncio sets it only for sockets whose protocol says TCP. With it on,
an answer written in two parts (headers, then body) waited for the client's delayed ACK: about
40 ms on every request to rota's API."""

from __future__ import annotations

import asyncio
import socket

import pytest

from rota.server.compose import _bind


@pytest.mark.parametrize("host", ["127.0.0.1",
                                  pytest.param("::1", marks=pytest.mark.may_skip)])
def test_connections_to_the_api_socket_send_small_writes_at_once(host):
    try:
        sock = _bind(host, 0)
    except OSError:
        pytest.skip(f"{host} cannot be listened on here")
    seen: list[int] = []

    async def main() -> None:
        def accepted(reader, writer) -> None:
            conn = writer.get_extra_info("socket")
            seen.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection(host, port)
        while not seen:
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    asyncio.run(main())
    assert seen == [1]
