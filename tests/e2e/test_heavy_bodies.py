"""Heavy request bodies do not stall other users, on a real ``rota up``.

Checking an archive of tens of thousands of files and reading a bad YAML job file each take
seconds of CPU (``rota.api.offload``). While two members send 8 such uploads and a third sends 8
bad job files, all at once, a fourth member's ``GET /v1/whoami`` keeps answering: every one of
its requests completes within 2 s (a generous bound: with the checks on the event loop they took
5-20 s). The bounds show as they should: a user's third upload in flight is 429 ``busy``, and
the token sending bad job files ends up refused with 429 ``too_many_failures``.
"""

from __future__ import annotations

import gzip
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from serverkit import RotaServer

FILES = 30_000  # members of each upload: about 2 s of CPU to check on this machine
WHOAMI_BOUND_S = 2.0


def many_files(count: int, tag: str) -> bytes:
    """A tar.gz of ``count`` empty files (headers written directly: tarfile's own writer
    takes 20 s for 100,000)."""
    headers = b"".join(tarfile.TarInfo(f"{tag}/f{i}").tobuf() for i in range(count))
    return gzip.compress(headers + bytes(1024), compresslevel=1)


def bad_job_file() -> bytes:
    """64 KiB of YAML whose error is at its end: half a second or more of CPU to refuse."""
    return b"name: x\nentrypoint: [" + b"aaaa, " * 10700 + b"\n: ]"


@pytest.fixture
def members(rota_server: RotaServer) -> dict[str, httpx.Client]:
    op = rota_server.client()
    assert op.post("/v1/projects", json={"name": "p"}).status_code == 201
    clients = {}
    for name in ("up1", "up2", "bad", "carol"):
        assert op.post("/v1/users", json={"name": name, "projects": ["p"]}).status_code == 201
        token = op.post("/v1/tokens", json={"name": "t", "user": name}).json()["token"]
        clients[name] = httpx.Client(base_url=rota_server.url, timeout=120,
                                     headers={"Authorization": f"Bearer {token}"})
    yield clients
    for client in clients.values():
        client.close()


def test_another_user_keeps_its_latency_while_uploads_and_bad_bodies_run(members):
    archives = {name: many_files(FILES, name) for name in ("up1", "up2")}
    bad = bad_job_file()
    carol = members["carol"]
    assert carol.get("/v1/whoami").status_code == 200
    done = threading.Event()
    latencies: list[float] = []

    def sample() -> None:
        while not done.is_set():
            start = time.monotonic()
            reply = carol.get("/v1/whoami")
            latencies.append(time.monotonic() - start)
            assert reply.status_code == 200, reply.text
            time.sleep(0.05)

    def upload(name: str) -> httpx.Response:
        return members[name].post("/v1/uploads", content=archives[name],
                                  headers={"Content-Type": "application/gzip"})

    def send_bad() -> httpx.Response:
        return members["bad"].post("/v1/jobs", content=bad,
                                   headers={"Content-Type": "application/yaml"})

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        with ThreadPoolExecutor(16) as pool:
            uploads = [pool.submit(upload, name) for name in ("up1", "up2") * 4]
            bodies = [pool.submit(send_bad) for _ in range(8)]
            answers = [f.result() for f in uploads]
            refused = [f.result() for f in bodies]
    finally:
        done.set()
        sampler.join()

    print(f"whoami: {len(latencies)} requests, slowest {max(latencies):.3f} s")
    slow = [round(s, 2) for s in latencies if s > WHOAMI_BOUND_S]
    assert len(latencies) >= 5 and not slow, \
        f"whoami took {slow} s during the attack (of {len(latencies)} requests)"
    codes = sorted(a.status_code for a in answers)
    assert codes.count(201) >= 2, [a.text for a in answers]  # the checks really ran
    assert all(a.json()["files"] == FILES for a in answers if a.status_code == 201)
    busy = [a for a in answers if a.status_code == 429]
    assert busy and all(a.json()["error"]["code"] == "busy" and "Retry-After" in a.headers
                        for a in busy), codes  # at most two of a user's uploads at once
    assert set(codes) <= {201, 429}, [a.text for a in answers]
    assert {r.status_code for r in refused} <= {422, 429}
    assert any(r.status_code == 422 for r in refused)
    # the bad-body token is slowed: its next job file is refused before it is read
    for _ in range(10):
        again = send_bad()
        if again.status_code == 429 and again.json()["error"]["code"] == "too_many_failures":
            break
    assert again.status_code == 429, again.text
    assert int(again.headers["Retry-After"]) >= 1
    assert "fix the job file" in again.json()["error"]["message"]
    assert carol.get("/v1/whoami").status_code == 200  # others are not refused
