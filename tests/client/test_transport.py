"""``rota.client.transport`` against a real HTTP server on loopback whose connections misbehave as
real ones do: a kept-alive connection the server closed while idle (a request on it is sent
again on a new one; a streamed upload never goes on it), a server that refuses a large body
before reading it all and closes (its 413 is the answer, not a broken pipe), and a server
that is not there."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from rota.client.credentials import Credentials
from rota.client.errors import Unreachable
from rota.client.transport import Transport


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body: bytes, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if close:  # without saying so: as a server whose keep-alive timed out
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        self._answer(200, b'{"ok": true}', close=self.path == "/then-close")

    def do_POST(self) -> None:
        self.seen.append(f"POST {self.path}")
        if self.path == "/small-limit":
            self.rfile.read(1024)  # a little of the body, then refuse it all
            self._answer(413, b'{"error": {"code": "too_large"}}', close=True)
            return
        size = 0
        while True:  # a chunked body
            line = self.rfile.readline().strip()
            n = int(line, 16)
            chunk = self.rfile.read(n + 2)
            size += len(chunk) - 2
            if n == 0:
                break
        self._answer(201, f'{{"size": {size}}}'.encode())


@pytest.fixture
def url() -> Iterator[str]:
    Handler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def transport(url: str) -> Transport:
    return Transport(Credentials(url, None, "test"))


def chunks(n: int, size: int = 64 * 1024) -> Iterator[bytes]:
    for _ in range(n):
        yield b"x" * size


def test_a_request_on_a_connection_the_server_closed_is_sent_again(url):
    wire = transport(url)
    assert wire.request("GET", "/then-close").json() == {"ok": True}
    assert wire.request("GET", "/again").json() == {"ok": True}
    assert Handler.seen == ["GET /then-close", "GET /again"]


def test_a_streamed_upload_never_goes_on_a_kept_connection(url):
    wire = transport(url)
    wire.request("GET", "/then-close")  # kept, but closed by the server
    answer = wire.request("POST", "/upload", chunks(16))
    assert answer.status_code == 201 and answer.json() == {"size": 16 * 64 * 1024}


def test_a_body_refused_before_it_was_all_sent_gets_the_servers_answer(url):
    answer = transport(url).request("POST", "/small-limit", chunks(2048))
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"


def test_no_server_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable) as failed:
        transport(f"http://127.0.0.1:{port}").request("GET", "/")
    assert type(failed.value) is Unreachable  # not ConnectionLost: nothing was sent
