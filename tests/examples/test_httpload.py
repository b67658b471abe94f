"""bench/httpload.py against examples/serving/bigram_lm.py: what it counts is what the server
counted (``/stats``), for plain answers, streams, errors and a timed run; and its command line."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys

import pytest

from bigramkit import ROOT

spec = importlib.util.spec_from_file_location("httpload", ROOT / "bench" / "httpload.py")
httpload = sys.modules["httpload"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(httpload)

COMPLETION = {"model": "tiny", "prompt": "The cluster", "max_tokens": 8}
CHAT_STREAM = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True,
               "max_tokens": 8}


def load(server, path: str, body: dict | None, **options) -> tuple[httpload.Result, dict]:
    """Runs the load generator; returns its result and how the server's counters moved."""
    before = server.stats()
    result = asyncio.run(httpload.run(
        server.url + path, body=None if body is None else json.dumps(body),
        headers=["Authorization: Bearer x"], **options))
    after = server.stats()
    return result, {k: after[k] - before[k] for k in after}


def test_a_fixed_number_of_requests_over_kept_alive_connections(bigram_server):
    result, moved = load(bigram_server, "/v1/completions", COMPLETION, concurrency=8,
                         requests=400)
    assert (result.requests, result.ok, result.errors) == (400, 400, {})
    assert moved == {"requests": 400, "in_flight": 0, "completed": 400, "cancelled": 0}
    assert 0 < result.latency_p50_ms <= result.latency_p90_ms <= result.latency_p99_ms \
        <= result.latency_max_ms
    assert result.first_chunk_p50_ms is None and result.rps > 0


def test_streams_are_read_to_done_and_their_first_chunk_timed(bigram_server):
    result, moved = load(bigram_server, "/v1/chat/completions", CHAT_STREAM, concurrency=4,
                         requests=60, stream=True)
    assert (result.requests, result.ok, result.errors) == (60, 60, {})
    assert moved["completed"] == 60 and moved["cancelled"] == 0
    assert 0 < result.first_chunk_p50_ms <= result.first_chunk_p99_ms <= result.latency_max_ms


def test_errors_are_counted_by_status_and_kind(bigram_server):
    result, moved = load(bigram_server, "/v1/completions", {**COMPLETION, "model": "nope"},
                         concurrency=3, requests=30)
    assert (result.requests, result.ok, result.errors) == (30, 0, {"404": 30})
    assert moved["requests"] == 30 and result.latency_p50_ms is None
    # a plain JSON answer where a stream was expected
    result, _ = load(bigram_server, "/v1/completions", COMPLETION, concurrency=2, requests=10,
                     stream=True)
    assert result.errors == {"not a stream": 10}
    result, _ = load(bigram_server, "/health", None, concurrency=2, requests=10)
    assert (result.ok, result.errors) == (10, {})


def test_a_timed_run_waits_for_what_it_sent(bigram_server):
    result, moved = load(bigram_server, "/v1/completions", COMPLETION, concurrency=16,
                         duration=0.5)
    assert result.requests > 0 and result.errors == {}
    assert moved == {"requests": result.requests, "in_flight": 0, "completed": result.requests,
                     "cancelled": 0}


def test_nothing_listening_is_a_connection_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening
        result = asyncio.run(httpload.run(f"http://127.0.0.1:{port}/", concurrency=2,
                                          requests=4))
    assert (result.requests, result.ok, result.errors) == (4, 0, {"connection": 4})


@pytest.mark.parametrize("options, message", [
    ({"requests": 0}, "must be positive"),
    ({"requests": 1, "headers": ["no colon"]}, "Name: value"),
    ({}, "duration"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        asyncio.run(httpload.run("http://127.0.0.1:1/", **options))
    with pytest.raises(ValueError, match="http://"):
        asyncio.run(httpload.run("https://example.org/", requests=1))


def test_the_command_line_prints_a_table_or_json(bigram_server):
    command = [sys.executable, str(ROOT / "bench" / "httpload.py"),
               bigram_server.url + "/v1/completions", "--concurrency", "4", "--requests", "40",
               "--body", json.dumps(COMPLETION), "--header", "Authorization: Bearer x"]
    table = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("requests     40 in") and "errors       none" in table.stdout
    out = subprocess.run(command + ["--json"], capture_output=True, text=True, timeout=60)
    result = json.loads(out.stdout)
    assert (result["requests"], result["ok"], result["errors"]) == (40, 40, {})
    refused = subprocess.run(command[:3] + ["--requests", "0"], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2 and "must be positive" in refused.stderr


def test_the_request_carries_the_headers_and_the_body():
    host, port, request = httpload.build_request(
        "http://127.0.0.1:8000/v1/completions?x=1", "POST", b'{"a": 1}',
        ["Authorization:  Bearer x"], stream=True)
    head, body = request.split(b"\r\n\r\n")
    assert (host, port, body) == ("127.0.0.1", 8000, b'{"a": 1}')
    assert head.split(b"\r\n") == [
        b"POST /v1/completions?x=1 HTTP/1.1", b"Host: 127.0.0.1:8000",
        b"User-Agent: rota-httpload", b"Accept: text/event-stream",
        b"Content-Type: application/json", b"Content-Length: 8", b"Authorization: Bearer x"]
