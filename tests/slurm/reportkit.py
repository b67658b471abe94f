"""A recording stand-in for rota's API on loopback, for the reports of their end that batch
scripts send (``POST $ROTA_URL/v1/jobs/J/exited``): it keeps each one's path, Authorization and
body text, calls ``on_report(path, authorization, body as JSON)`` and answers 200 once that
returned (as rota answers once it acted on the report)."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from typing import Callable


class Reports(http.server.ThreadingHTTPServer):
    def __init__(self, on_report: Callable[[str, str, dict], None] = lambda *seen: None,
                 tls: tuple[str, str] | None = None) -> None:
        """``tls``: the certificate and key files to answer HTTPS with."""
        self.on_report = on_report
        self.seen: list[tuple[str, str, str]] = []
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.socket = context.wrap_socket(self.socket, server_side=True)
            self.scheme = "https"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Reports

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        seen = (self.path, self.headers.get("Authorization", ""), body)
        self.server.seen.append(seen)
        self.server.on_report(seen[0], seen[1], json.loads(body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass
