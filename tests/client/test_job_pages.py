"""``jobs_page`` of both clients (``Client`` and the fast commands' ``BareClient``) against a
real HTTP server on loopback that, like rota's, gives at most 1,000 jobs a page: pages are
followed up to ``limit`` jobs, each asking only for what is still wanted, and the cursor of
what is left comes back (None once the server has no more)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from rota.client import Client
from rota.client.bare import BareClient
from rota.client.credentials import Credentials

JOBS = [str(i) for i in range(2500, 0, -1)]  # newest first
PAGE = 1000  # the most the server gives at once


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    asked: list[dict[str, list[str]]] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        self.asked.append(query)
        start = JOBS.index(query["after"][0]) + 1 if "after" in query else 0
        items = JOBS[start:start + min(int(query["limit"][0]), PAGE)]
        more = start + len(items) < len(JOBS)
        body = json.dumps({"items": [{"id": i} for i in items],
                           "next_after": items[-1] if more else None}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=["Client", "BareClient"])
def client(request) -> Iterator[Client | BareClient]:
    Handler.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    credentials = Credentials(f"http://127.0.0.1:{server.server_address[1]}", "t", "test")
    try:
        with {"Client": Client, "BareClient": BareClient}[request.param](credentials) as made:
            yield made
    finally:
        server.shutdown()
        server.server_close()


def test_pages_are_followed_up_to_the_limit_and_the_cursor_names_the_last_job(client):
    jobs, after = client.jobs_page(states=["running"], limit=2200)
    assert [j["id"] for j in jobs] == JOBS[:2200] and after == JOBS[2199]
    # 1000 + 1000 + the 200 still wanted
    assert [q["limit"] for q in Handler.asked] == [["1000"], ["1000"], ["200"]]
    assert [q.get("after") for q in Handler.asked] == [None, ["1501"], ["501"]]
    assert all(q["state"] == ["running"] for q in Handler.asked)


def test_the_last_page_ends_with_no_cursor(client):
    jobs, after = client.jobs_page(limit=5000, after=JOBS[99])
    assert [j["id"] for j in jobs] == JOBS[100:] and after is None
    assert len(Handler.asked) == 3  # 2400 jobs: 1000 + 1000 + 400
