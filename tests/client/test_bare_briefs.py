"""``BareClient.briefs`` against a real HTTP server on loopback: brief views in pages, read by
the names in each page's ``columns``, so a server that answers with its columns in another
order (or with more of them) on a later page is read right."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from rota.client.bare import BareClient
from rota.client.credentials import Credentials

FIRST = {"columns": ["id", "name", "state"],
         "items": [["5", "e", "pending"], ["4", "d", "running"]], "next_after": "4"}
# an upgraded server: another order and a column more
SECOND = {"columns": ["state", "gpu_count", "id", "name"],
          "items": [["pending", 1, "3", "c"], ["pending", 0, "2", "b"]], "next_after": None}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    asked: list[dict[str, list[str]]] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        self.asked.append(query)
        body = json.dumps(SECOND if query.get("after") == ["4"] else FIRST).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def client() -> Iterator[BareClient]:
    Handler.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with BareClient(Credentials(f"http://127.0.0.1:{server.server_address[1]}", "t",
                                    "test")) as bare:
            yield bare
    finally:
        server.shutdown()
        server.server_close()


def test_pages_of_brief_views_are_read_by_the_names_of_the_first(client):
    columns, rows, after = client.briefs(states=["pending", "running"], limit=10)
    assert columns == ["id", "name", "state"] and after is None
    assert rows == [["5", "e", "pending"], ["4", "d", "running"], ["3", "c", "pending"],
                    ["2", "b", "pending"]]
    first, second = Handler.asked
    assert first["view"] == ["brief"] and first["limit"] == ["10"] and "after" not in first
    assert second["after"] == ["4"] and second["limit"] == ["8"]
    assert first["state"] == ["pending", "running"]


def test_a_limit_reached_stops_and_gives_the_cursor(client):
    columns, rows, after = client.briefs(limit=2)
    assert (len(rows), after, len(Handler.asked)) == (2, "4", 1)
