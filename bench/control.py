"""Control-plane benchmark: a real ``rota up`` (subprocess, loopback HTTP, local backend).

    python bench/control.py latency --jobs 100             # submit -> running, p50 / p99
    python bench/control.py throughput --jobs 1000 --db sqlite
    python bench/control.py throughput --jobs 10000 --db postgres   # URL from .ci/postgres
    python bench/control.py memory                          # RSS of an idle control plane
    python bench/control.py queued --jobs 10000             # RSS per queued job
    python bench/control.py all                             # everything, one markdown table

- latency: jobs are submitted one at a time (each waits for the previous to be running), each
  asking for one of four virtual GPUs and exiting at once. The latency of a job is the time of
  its ``-> running`` event minus its submit time, both stamped by the server, so the client's
  polling does not count. The loop is woken by the submit (no periodic pass is waited for).
- throughput: ``--clients`` threads (32 by default), each with its own keep-alive HTTP
  connection (``http.client``: a light client, since it shares the machine with the server),
  submit ``--jobs`` jobs through ``POST /v1/jobs`` as fast as the server answers; every job
  asks for one GPU and sleeps, so four run and the rest pile up pending while the control loop
  keeps scheduling (as in production). Only 201 answers count (any other answer fails the
  run). Jobs/s = acknowledged jobs / wall time of the whole burst; p50 / p99 are the client's
  request latencies. The server is then killed with SIGKILL and the database read back: every
  acknowledged id must be there, exactly once. CPU per job is the server process's user +
  system time (and the load generator's own) over the burst, divided by the jobs: on a shared
  machine it is steadier than jobs/s. On PostgreSQL a fresh database is created and dropped.
- memory: VmRSS of ``rota up`` after it has started and idled for ``--idle`` seconds.
- queued: what a queued job costs in resident memory. Two bursts of ``--jobs`` jobs that can
  never start while the burst runs (each asks for one GPU; four long jobs hold the four GPUs),
  with the VmRSS of ``rota up`` read after start-up and after each burst once the control loop
  has scheduled the pending jobs for ``--idle`` seconds. The first burst also pays for one-off
  growth (code paths imported on first use, the allocator's arenas, SQLite's page cache); the
  second shows what each further queued job costs, which is the figure to quote.

Every run uses temporary XDG and data directories and kills what it started.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from rotaup import RotaUp  # noqa: E402


class Server(RotaUp):
    """``rota up`` with four virtual GPUs, on ``db`` (else SQLite in its data directory), started;
    ``api``: an operator's client of it."""

    def __init__(self, root: Path, db: str | None) -> None:
        super().__init__(root, "--gpus", "4xH100-80GB", *(["--db", db] if db else []),
                         start_timeout_s=120)
        self.start()
        self.api = self.client(timeout=60)

    def rss_mib(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server process has used so far."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def server(db: str | None = None) -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="rota-bench-") as tmp:
        s = Server(Path(tmp), db)
        try:
            yield s
        finally:
            s.close()


def job_body(command: list[str]) -> dict[str, Any]:
    return {"project": "default", "queue": "default", "entrypoint": command,
            "resources": {"gpu": 1, "cpu": "10m", "memory": "16Mi"}}


def latency(jobs: int) -> dict[str, Any]:
    lat = []
    with server() as s:
        for _ in range(jobs):
            job_id = s.api.post("/v1/jobs", json=job_body(["true"])).json()["id"]
            end = time.monotonic() + 60
            while time.monotonic() < end:
                events = s.api.get(f"/v1/jobs/{job_id}/events").json()
                ran = [e for e in events if e["kind"] == "state" and e["data"].get("to") == "running"]
                if ran:
                    lat.append(ran[0]["time"] - events[0]["time"])
                    break
                time.sleep(0.01)
            else:
                raise SystemExit(f"job {job_id} did not run")
    lat.sort()
    return {"scenario": "latency", "jobs": jobs, "p50_s": statistics.median(lat),
            "p99_s": lat[min(len(lat) - 1, int(len(lat) * 0.99))], "max_s": lat[-1]}


def throughput(jobs: int, db: str, clients: int) -> dict[str, Any]:
    """``clients`` threads, each with its own keep-alive connection, submit until ``jobs``
    submits were answered; only 201 answers count. The server is then killed (SIGKILL) and
    the database read: every acknowledged id must be there, exactly once."""
    url = postgres_database() if db == "postgres" else None
    try:
        with server(url) as s:
            cpu0, own0 = s.cpu_s(), time.process_time()
            run = _burst(s, jobs, clients)
            server_cpu, client_cpu = s.cpu_s() - cpu0, time.process_time() - own0
            rss = s.rss_mib()
            loadavg = os.getloadavg()
            s.end()
            stored = _stored_ids(url or f"sqlite:///{s.data_dir / 'rota.db'}")
    finally:
        if url:
            drop_database(url)
    acked, failures, lat, wall = run
    if failures:
        raise SystemExit(f"{len(failures)} submits failed, first: {failures[0]}")
    missing = set(acked) - stored
    if missing or len(set(acked)) != len(acked):
        raise SystemExit(f"{len(missing)} acknowledged jobs are missing after a kill, "
                         f"{len(acked) - len(set(acked))} ids were acknowledged twice")
    lat.sort()
    return {"scenario": "throughput", "db": db, "jobs": len(acked), "clients": clients,
            "wall_s": wall, "jobs_per_s": len(acked) / wall, "rss_after_mib": rss,
            "stored": len(stored), "p50_ms": statistics.median(lat) * 1000,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
            "loadavg_1m": loadavg[0], "server_cpu_ms_per_job": server_cpu * 1000 / len(acked),
            "client_cpu_ms_per_job": client_cpu * 1000 / len(acked)}


def _burst(s: Server, jobs: int, clients: int) -> tuple[list[str], list[str], list[float], float]:
    body = json.dumps(job_body([sys.executable, "-c", "import time; time.sleep(600)"])).encode()
    base = urlsplit(s.url)
    headers = {"Authorization": f"Bearer {s.token}",
               "Content-Type": "application/json"}
    counter, lock = iter(range(jobs)), threading.Lock()
    acked: list[str] = []
    failures: list[str] = []
    lat: list[float] = []

    def work() -> None:
        conn = http.client.HTTPConnection(base.hostname, base.port, timeout=60)
        try:
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                t0 = time.perf_counter()
                conn.request("POST", "/v1/jobs", body, headers)
                reply = conn.getresponse()
                data = reply.read()
                took = time.perf_counter() - t0
                if reply.status == 201:
                    acked.append(json.loads(data)["id"])
                    lat.append(took)
                else:
                    failures.append(f"{reply.status} {data[:200]!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=work) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acked, failures, lat, time.perf_counter() - start


def _stored_ids(url: str) -> set[str]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        ids = {str(r[0]) for r in conn.execute(text("SELECT id FROM jobs"))}
    engine.dispose()
    return ids


def memory(idle_s: float) -> dict[str, Any]:
    with server() as s:
        time.sleep(idle_s)
        return {"scenario": "memory", "idle_s": idle_s, "rss_mib": s.rss_mib()}


def queued(jobs: int, clients: int, idle_s: float) -> dict[str, Any]:
    with server() as s:
        _burst(s, 4, 4)                      # four sleepers hold the GPUs
        time.sleep(idle_s)
        rss = [s.rss_mib()]
        for _ in range(2):
            acked, failures, _, _ = _burst(s, jobs, clients)
            if failures:
                raise SystemExit(f"{len(failures)} submits failed, first: {failures[0]}")
            time.sleep(idle_s)
            rss.append(s.rss_mib())
    return {"scenario": "queued", "jobs": jobs, "idle_s": idle_s, "rss_mib": rss,
            "first_kib_per_job": (rss[1] - rss[0]) * 1024 / jobs,
            "next_kib_per_job": (rss[2] - rss[1]) * 1024 / jobs}


def postgres_database() -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = os.environ.get("ROTA_TEST_POSTGRES_URL") or subprocess.run(
        [str(ROOT / ".ci" / "postgres")], capture_output=True, text=True, check=True).stdout.strip()
    name = f"rota_bench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    engine = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
    engine.dispose()


def row(r: dict[str, Any]) -> str:
    if r["scenario"] == "latency":
        return (f"| submit -> running, {r['jobs']} jobs one at a time | p50 {r['p50_s'] * 1000:.0f} ms, "
                f"p99 {r['p99_s'] * 1000:.0f} ms (max {r['max_s'] * 1000:.0f} ms) |")
    if r["scenario"] == "throughput":
        return (f"| API submit, {r['db']}, {r['jobs']:,} jobs, {r['clients']} clients | "
                f"{r['jobs_per_s']:.0f} jobs/s ({r['wall_s']:.1f} s; p50 {r['p50_ms']:.1f} ms, "
                f"p99 {r['p99_ms']:.1f} ms; {r['stored']:,} in the database after kill -9; "
                f"RSS after {r['rss_after_mib']:.0f} MiB; CPU per job: server "
                f"{r['server_cpu_ms_per_job']:.2f} ms, client {r['client_cpu_ms_per_job']:.2f} ms; "
                f"load {r['loadavg_1m']:.1f}) |")
    if r["scenario"] == "queued":
        return (f"| RSS per queued job, {r['jobs']:,} + {r['jobs']:,} queued | first burst "
                f"{r['first_kib_per_job']:.2f} KiB/job, next {r['next_kib_per_job']:.2f} KiB/job "
                f"(RSS {' -> '.join(f'{m:.0f}' for m in r['rss_mib'])} MiB) |")
    return f"| idle control plane, {r['idle_s']:.0f} s after start | RSS {r['rss_mib']:.0f} MiB |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=["latency", "throughput", "memory", "queued", "all"])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    if args.scenario in ("latency", "all"):
        results.append(latency(args.jobs or 100))
    if args.scenario in ("memory", "all"):
        results.append(memory(args.idle))
    if args.scenario == "queued":
        results.append(queued(args.jobs or 10000, args.clients, args.idle))
    if args.scenario == "throughput":
        results.append(throughput(args.jobs or 1000, args.db, args.clients))
    if args.scenario == "all":
        for db in ("sqlite", "postgres"):
            for n in (1000, 10000):
                results.append(throughput(n, db, args.clients))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")
    print("| measure | result |\n|---|---|")
    for r in results:
        print(row(r))


if __name__ == "__main__":
    main()
