"""A member's heavy bodies against everyone else's latency, and a burst of submits, on a real
``rota up`` (subprocess, loopback HTTP, local backend), for one or two source trees in one run.

    python bench/heavy.py latency --against /tmp/oldrota/src     # this tree, then the other
    python bench/heavy.py submits --against /tmp/oldrota/src --jobs 1000 --in-flight 150

- latency: four members each send two uploads of ``--files`` empty files (a 100,000-file
  archive is about 620 KB and takes about 6 s of CPU to check), and four more each send two
  64 KiB job files of bad YAML (about 0.6 s of CPU each to refuse), all 16 at once, while a
  ninth member sends ``GET /v1/whoami`` back to back (20 ms apart) until the last of the 16 is
  answered. Reported: that member's latencies (p50, p99, max; nearest rank), how the 16 were
  answered, and the 1-minute load average before and after. Each member stays within the
  server's per-user bound (two heavy requests at once), so all 16 are really checked.
- submits: ``--jobs`` submits of a job running ``true`` (one CPU, no GPU), ``--in-flight``
  connections at once (``bench/httpload.py``), by the operator's token (operators are not
  rate-limited); reported: jobs/s, request latencies, errors, the 1-minute load average before,
  at its highest during the burst (sampled each second) and after, and the seconds until
  every job has ended.

``--src`` (default: this tree's ``src``) and ``--against`` are put on the server's
``PYTHONPATH``; the load generator is the same for both. ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from httpload import pct, run  # noqa: E402
from rotaup import RotaUp, running  # noqa: E402


@contextmanager
def rota_up(src: str, prefix: str) -> Iterator[RotaUp]:
    """``rota up`` on a free port with ``src`` first on its ``PYTHONPATH``, in a temporary
    directory; killed at the end with every job it left."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, running(
            Path(tmp), "--gpus", "4xH100-80GB", pythonpath=src, start_timeout_s=120) as server:
        yield server


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def many_files(count: int, tag: str) -> bytes:
    headers = b"".join(tarfile.TarInfo(f"{tag}/f{i}").tobuf() for i in range(count))
    return gzip.compress(headers + bytes(1024), compresslevel=1)


BAD_YAML = b"name: x\nentrypoint: [" + b"aaaa, " * 10700 + b"\n: ]"


def latency(src: str, files: int) -> dict[str, Any]:
    with rota_up(src, "rota-heavy-") as server:
        op = server.client(timeout=300)
        op.post("/v1/projects", json={"name": "p"}).raise_for_status()
        names = [f"up{i}" for i in range(4)] + [f"bad{i}" for i in range(4)] + ["carol"]
        clients = {}
        for name in names:
            op.post("/v1/users", json={"name": name, "projects": ["p"]}).raise_for_status()
            token = op.post("/v1/tokens", json={"name": "t", "user": name}).json()["token"]
            clients[name] = server.client(token, timeout=300)
        archives = {n: many_files(files, n) for n in names if n.startswith("up")}
        return _attack(clients, archives) | {"archive_bytes": len(archives["up0"])}


def _attack(clients: dict[str, httpx.Client], archives: dict[str, bytes]) -> dict[str, Any]:
    carol, done, seen = clients["carol"], threading.Event(), []

    def sample() -> None:
        while not done.is_set():
            start = time.perf_counter()
            reply = carol.get("/v1/whoami")
            seen.append((time.perf_counter() - start, reply.status_code))
            time.sleep(0.02)

    def upload(name: str) -> int:
        return clients[name].post("/v1/uploads", content=archives[name]).status_code

    def bad(name: str) -> int:
        return clients[name].post("/v1/jobs", content=BAD_YAML, headers={
            "Content-Type": "application/yaml"}).status_code

    before = load1()
    sampler = threading.Thread(target=sample)
    started = time.perf_counter()
    sampler.start()
    try:
        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(upload, n) for n in archives for _ in range(2)]
            futures += [pool.submit(bad, f"bad{i}") for i in range(4) for _ in range(2)]
            codes = [f.result() for f in futures]
    finally:
        done.set()
        sampler.join()
    wall = time.perf_counter() - started
    times = sorted(s for s, code in seen if code == 200)
    return {"attack_s": round(wall, 1), "uploads": _count(codes[:8]),
            "bad_bodies": _count(codes[8:]), "whoami": len(seen),
            "whoami_errors": sum(code != 200 for _, code in seen),
            "p50_ms": pct(times, 50), "p99_ms": pct(times, 99),
            "max_ms": round(times[-1] * 1000, 1) if times else None,
            "load1_before": before, "load1_after": load1()}


def _count(codes: list[int]) -> dict[str, int]:
    return {str(c): codes.count(c) for c in sorted(set(codes))}


def submits(src: str, jobs: int, in_flight: int, member: bool) -> dict[str, Any]:
    with rota_up(src, "rota-submits-") as server:
        token = _member(server) if member else server.token
        body = json.dumps({"name": "t", "entrypoint": "true", "queue": "default",
                           "project": "b" if member else "default", "resources": {"cpu": 1}}).encode()
        loads, done = [load1()], threading.Event()

        def watch() -> None:
            while not done.wait(1.0):
                loads.append(load1())
        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        try:
            result = asyncio.run(run(
                f"{server.url}/v1/jobs", concurrency=in_flight, requests=jobs, body=body,
                method="POST", timeout=120, headers=[
                    f"Authorization: Bearer {token}",
                    "Content-Type: application/json"]))
        finally:
            done.set()
            watcher.join()
        peak = max(loads)
        drained = _drained(server, started, 240)
        return {"jobs": jobs, "in_flight": in_flight, "ok": result.ok,
                "errors": result.errors, "seconds": round(result.seconds, 2),
                "jobs_per_s": round(result.ok / result.seconds, 1),
                "p50_ms": result.latency_p50_ms, "p99_ms": result.latency_p99_ms,
                "max_ms": result.latency_max_ms, "load1_before": loads[0],
                "load1_peak": peak, "load1_after": load1(),
                "all_ended_s": drained}


def _member(server: RotaUp) -> str:
    """A member token of user ``bench`` (OS account ``nobody``) in project ``b``, with the
    rate and pending caps lifted and the storage cap left at its default, so that every submit
    is checked against the project's storage."""
    op = server.client(timeout=300)
    op.post("/v1/projects", json={"name": "b"}).raise_for_status()
    op.post("/v1/users", json={"name": "bench", "projects": ["b"],
                               "unix_user": "nobody"}).raise_for_status()
    lifted = {"pending": None, "submits_per_s": None}
    queues = op.get("/v1/queues").json()
    op.put("/v1/queues", json={"queues": [{"name": q["name"]} for q in queues],
                               "fair_use": {"user": lifted, "project": lifted}}
           ).raise_for_status()
    return op.post("/v1/tokens", json={"name": "t", "user": "bench"}).json()["token"]


def _drained(server: RotaUp, started: float, limit_s: float) -> float | None:
    """Seconds from the start of the burst until no job is pending or running (None: not
    within ``limit_s``)."""
    op = server.client(timeout=300)
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        live = op.get("/v1/jobs", params={"state": ["pending", "scheduled", "running"],
                                          "limit": 1}).json()
        if not (live.get("items") if isinstance(live, dict) else live):
            return round(time.perf_counter() - started, 1)
        time.sleep(1.0)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["latency", "submits"])
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--against", help="a second source tree, run after the first")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=150)
    parser.add_argument("--member", action="store_true",
                        help="submits: as a member (storage quota checked), not the operator")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": f"{platform.processor() or platform.machine()}, "
                           f"{os.cpu_count()} cores, Python {platform.python_version()}"}
    for src in [args.src] + ([args.against] if args.against else []):
        figures = (latency(src, args.files) if args.what == "latency"
                   else submits(src, args.jobs, args.in_flight, args.member))
        out[src] = figures
        if not args.json:
            print(src, json.dumps(figures), flush=True)
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
