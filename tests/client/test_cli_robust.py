"""The CLI under careless use and bad networks: a submit whose answer is lost is sent again with
the same ``Idempotency-Key`` and makes one job; a 429 is waited out; a YAML alias bomb and a
byte that is not UTF-8 are refused naming the line, quickly and without a traceback."""

from __future__ import annotations

import socket
import struct
import threading
from urllib.parse import urlsplit

import pytest

from rota.store import JobFilter

JOB = "name: {name}\nproject: vision\nqueue: default\nentrypoint: 'true'\n"


class LosingProxy:
    """A TCP proxy to ``target`` that lets the first ``lose`` requests reach the server but
    closes their connections before the answer goes back (as when the server is killed, or a
    connection is dropped under load, right after the job was made)."""

    def __init__(self, target: str, lose: int = 1) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname, parts.port)
        self.lose = lose
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(self.target)
        if self.lose > 0:
            self.lose -= 1
            upstream.sendall(_one_request(conn))
            upstream.recv(65536)  # the server answered: the job exists
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # a reset, and no answer
            upstream.close()
            return
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.sock.close()


def _one_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def jobs_named(server, name: str) -> list:
    return [r for r in server.store.list_jobs(JobFilter(user="alice"), limit=1000).items
            if r.name == name]


def test_a_submit_whose_answer_is_lost_is_sent_again_and_makes_one_job(server, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB.format(name="lost-answer"))
    proxy = LosingProxy(server.url)
    try:
        result = server.rota("submit", path, env=server.env(ROTA_URL=proxy.url))
    finally:
        proxy.close()
    assert result.returncode == 0, result.stderr
    assert "note: the connection to" in result.stderr and "sending it again" in result.stderr
    [job] = jobs_named(server, "lost-answer")
    assert f"Submitted job {job.id} " in result.stdout


def test_a_429_is_waited_out(server, tmp_path):
    """A token every 5 s: the first submit takes it, the CLI's waits for the next."""
    import httpx
    root = {"Authorization": f"Bearer {server.tokens['root']}"}
    alice = {"Authorization": f"Bearer {server.tokens['alice']}"}
    caps = {"queues": [{"name": "default"}], "fair_use": {"user": {"submits_per_s": 0.2,
                                                                    "burst": 1}}}
    assert httpx.put(f"{server.url}/v1/queues", json=caps, headers=root).status_code == 200
    try:
        first = httpx.post(f"{server.url}/v1/jobs", headers=alice, json={
            "name": "rate-1", "project": "vision", "queue": "default", "entrypoint": "true"})
        assert first.status_code == 201, first.text
        path = tmp_path / "job.yaml"
        path.write_text(JOB.format(name="rate-2"))
        result = server.rota("submit", path)
    finally:
        caps["fair_use"] = None
        httpx.put(f"{server.url}/v1/queues", json=caps, headers=root)
    assert result.returncode == 0, result.stderr
    assert "note: the server asks to wait (user alice is submitting faster" in result.stderr
    assert len(jobs_named(server, "rate-2")) == 1


def alias_bomb() -> str:
    levels = "abcdefghi"
    lines = [JOB.format(name="bomb").rstrip("\n"),
             "x-a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for up, name in zip(levels, levels[1:]):
        lines.append(f"x-{name}: &{name} [" + ", ".join([f"*{up}"] * 9) + "]")
    lines.append("env: {X: *i}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("content, words", [
    (alias_bomb().encode(), "line 11: its aliases expand to more than 1000000 values"),
    (b"name: x\nproject: vision\nqueue: default\nentrypoint: 'caf\xe9'\n",
     "line 4: byte 0xe9 at column 17 is not UTF-8"),
], ids=["alias-bomb", "not-utf8"])
def test_a_hostile_job_file_is_refused_naming_the_line(server, tmp_path, content, words):
    path = tmp_path / "job.yaml"
    path.write_bytes(content)
    result = server.rota("submit", path, timeout=30)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"error: {path}: {words}" or words in result.stderr, \
        result.stderr
    assert not jobs_named(server, "bomb")


def test_the_same_key_from_the_client_library_gives_one_job(server):
    from rota.client import Client, Credentials
    with Client(Credentials(server.url, server.tokens["alice"], "test")) as client:
        body = {"name": "keyed", "project": "vision", "queue": "default", "entrypoint": "true"}
        first, again = client.submit(body, key="k-77"), client.submit(body, key="k-77")
    assert first["id"] == again["id"] and len(jobs_named(server, "keyed")) == 1


def test_the_client_gives_up_on_a_server_that_never_answers(tmp_path):
    from rota.client import Client, Credentials, Unreachable
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there
    waits: list[float] = []
    notes: list[str] = []
    with Client(Credentials(f"http://127.0.0.1:{port}", "t", "test"), on_retry=notes.append,
                sleep=waits.append) as client:
        with pytest.raises(Unreachable):
            client.submit({"name": "x"})
    assert waits == [0.5, 1.0, 2.0, 4.0] and len(notes) == 4
