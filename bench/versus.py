"""rota against Slurm on the same machine, every figure of one comparison in one run.

    eval "$(.ci/slurm)"                       # the Slurm fixture: 4 slurmd, 64 one-CPU slots
    python bench/versus.py                    # --jobs 1000 --idle 30 --calls 10
    python bench/versus.py --json

For each scheduler in turn (rota: a ``rota up`` with the local backend and a 64-CPU node file,
as ``bench/drain.py``; Slurm: the fixture's slurmctld and slurmd's), with the 1-minute load
average recorded before and after each part:

- ``idle``: ``--idle`` jobs of ``true`` submitted one at a time, each once the previous ran:
  submit-to-running p50/p99 as the scheduler stamped them (Slurm's ``sacct`` has whole
  seconds);
- ``burst``: ``bench/drain.py``'s burst of ``--jobs`` jobs of ``true`` from 8 submitters:
  submits/s, finished/s, CPU per job of everything the scheduler ran, submit-to-running p50/p99;
- ``clients 32`` and ``clients 150``: ``--jobs`` submits from that many concurrent clients (rota:
  kept-alive HTTP connections to ``POST /v1/jobs``; Slurm: ``sbatch`` processes): submits/s and
  the latency of one submit, p50/p99; every submit must be accepted;
- ``cli``: the wall time of one command, median of ``--calls``: ``rota ps`` / ``squeue`` on an
  empty queue, ``rota run -- true`` / ``sbatch --wrap true``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import drain  # noqa: E402
from drain import Rota, _epoch, _pct, run_rota, run_slurm  # noqa: E402


def _spread(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 4), "p99": round(_pct(values, 0.99), 4)}


def _timed(fn: Callable[[], Any], calls: int) -> float:
    took = []
    for _ in range(calls):
        began = time.perf_counter()
        fn()
        took.append(time.perf_counter() - began)
    return round(statistics.median(took) * 1000, 2)


def _concurrent(submit_one: Callable[[Any], None], make: Callable[[], Any], jobs: int,
                clients: int) -> dict[str, Any]:
    counter, lock, latencies, errors = iter(range(jobs)), threading.Lock(), [], []

    def work() -> None:
        handle = make()
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            began = time.perf_counter()
            try:
                submit_one(handle)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(repr(exc))
                continue
            latencies.append(time.perf_counter() - began)

    threads = [threading.Thread(target=work) for _ in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    return {"clients": clients, "submits_per_s": round(len(latencies) / wall, 1),
            "latency_s": _spread(latencies), "errors": len(errors),
            "first_error": errors[0] if errors else None}


# -- rota ---------------------------------------------------------------------------------------

def rota_parts(jobs: int, idle: int, calls: int) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    out["burst"] = run_rota(jobs, 8)
    with tempfile.TemporaryDirectory(prefix="rota-versus-") as tmp:
        rota = Rota(Path(tmp))
        try:
            out["idle"] = _rota_idle(rota, idle)
            body = json.dumps({"project": "default", "queue": "default", "entrypoint": ["true"],
                               "resources": {"cpu": 1, "memory": "16Mi"}}).encode()
            host, port = rota.url.split("//")[1].split(":")

            def connect():
                import http.client
                return http.client.HTTPConnection(host, int(port), timeout=60)

            def submit(conn) -> None:
                conn.request("POST", "/v1/jobs", body, {
                    "Authorization": f"Bearer {rota.token}", "Content-Type": "application/json"})
                reply = conn.getresponse()
                data = reply.read()
                if reply.status != 201:
                    raise RuntimeError(f"{reply.status} {data[:200]!r}")
            for clients in (32, 150):
                _wait_idle(rota)
                out[f"clients_{clients}"] = _concurrent(submit, connect, jobs, clients)
            _wait_idle(rota)
            env = {**os.environ, "ROTA_URL": rota.url, "ROTA_TOKEN": rota.token,
                   "XDG_CONFIG_HOME": str(Path(tmp) / "config")}
            rota_cmd = [sys.executable, "-m", "rota.cli.main"]
            out["cli_ms"] = {
                "ps": _timed(lambda: subprocess.run(rota_cmd + ["ps"], env=env,
                                                    capture_output=True, check=True), calls),
                "run": _timed(lambda: subprocess.run(
                    rota_cmd + ["run", "--cpu", "1", "--memory", "16Mi", "--", "true"], env=env,
                    capture_output=True, check=True), calls)}
        finally:
            rota.close()
    out["load_after"] = os.getloadavg()[0]
    return out


def _rota_idle(rota: Rota, count: int) -> dict[str, float]:
    body = json.dumps({"project": "default", "queue": "default", "entrypoint": ["true"],
                       "resources": {"cpu": 1, "memory": "16Mi"}}).encode()
    took = []
    for _ in range(count):
        status, job = rota._call("POST", "/v1/jobs", body)
        assert status == 201, job
        while True:
            _, events = rota._call("GET", f"/v1/jobs/{job['id']}/events")
            ran = [e["time"] for e in events if e["data"].get("to") == "running"]
            if ran:
                took.append(ran[0] - events[0]["time"])
                break
            time.sleep(0.01)
    return _spread(took)


def _wait_idle(rota: Rota) -> None:
    while not rota.ended([]):
        time.sleep(0.1)


# -- Slurm --------------------------------------------------------------------------------------

def slurm_parts(jobs: int, idle: int, calls: int) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    out["burst"] = run_slurm(jobs, 8)
    sbatch = ["sbatch", "--parsable", "-c", "1", "--mem", "16M", "-o", "/dev/null", "-J",
              "versus", "--wrap", "true"]
    try:
        out["idle"] = _slurm_idle(sbatch, idle)

        def submit(_: Any) -> None:
            subprocess.run(sbatch, capture_output=True, check=True)
        for clients in (32, 150):
            _slurm_wait_idle()
            out[f"clients_{clients}"] = _concurrent(submit, lambda: None, jobs, clients)
        _slurm_wait_idle()
        out["cli_ms"] = {
            "ps": _timed(lambda: subprocess.run(["squeue"], capture_output=True, check=True),
                         calls),
            "run": _timed(lambda: subprocess.run(sbatch, capture_output=True, check=True),
                          calls)}
    finally:
        subprocess.run(["scancel", "-n", "versus"], capture_output=True)
    out["load_after"] = os.getloadavg()[0]
    return out


def _slurm_idle(sbatch: list[str], count: int) -> dict[str, float]:
    took = []
    for _ in range(count):
        job = subprocess.run(sbatch, capture_output=True, text=True,
                             check=True).stdout.strip().split(";")[0]
        while True:
            row = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "Submit,Start",
                                  "--noconvert"], capture_output=True, text=True).stdout.strip()
            submit_t, _, start_t = row.partition("|")
            if start_t and start_t not in ("Unknown", "None"):
                took.append(_epoch(start_t) - _epoch(submit_t))
                break
            time.sleep(0.05)
    return _spread(took)


def _slurm_wait_idle() -> None:
    while subprocess.run(["squeue", "-h", "-n", "versus,drain", "-o", "%i"],
                         capture_output=True, text=True).stdout.split():
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--idle", type=int, default=30, help="jobs one at a time")
    parser.add_argument("--calls", type=int, default=10, help="CLI calls timed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("SLURM_CONF is not set: eval \"$(.ci/slurm)\" first")
    result = {"machine": drain.platform.processor() or "unknown", "cores": os.cpu_count(),
              "rota": rota_parts(args.jobs, args.idle, args.calls),
              "slurm": slurm_parts(args.jobs, args.idle, args.calls)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    rows = [("submits/s, burst (8 clients)", lambda r: f"{r['burst']['submits_per_s']:.0f}"),
            ("finished/s, burst", lambda r: f"{r['burst']['finished_per_s']:.1f}"),
            ("CPU per job, burst", lambda r: f"{r['burst']['cpu_ms_per_job']:.1f} ms"),
            ("submit to running p50 / p99, burst", lambda r: f"{r['burst']['run_p50_s']:.2f} / "
                                                             f"{r['burst']['run_p99_s']:.2f} s"),
            ("submit to running p50 / p99, idle", lambda r: f"{r['idle']['p50']:.3f} / "
                                                            f"{r['idle']['p99']:.3f} s"),
            ("submits/s, 32 clients (p50 / p99)", lambda r: _clients(r["clients_32"])),
            ("submits/s, 150 clients (p50 / p99)", lambda r: _clients(r["clients_150"])),
            ("`rota ps` / `squeue`, empty queue", lambda r: f"{r['cli_ms']['ps']} ms"),
            ("`rota run` / `sbatch`, one call", lambda r: f"{r['cli_ms']['run']} ms"),
            ("load average before / after", lambda r: f"{r['load_before']:.1f} / "
                                                      f"{r['load_after']:.1f}")]
    print("| | rota | Slurm |\n|---|---|---|")
    for name, cell in rows:
        print(f"| {name} | {cell(result['rota'])} | {cell(result['slurm'])} |")


def _clients(part: dict[str, Any]) -> str:
    lat = part["latency_s"]
    errors = f", {part['errors']} errors" if part["errors"] else ""
    return f"{part['submits_per_s']:.0f} ({lat['p50'] * 1000:.0f} / {lat['p99'] * 1000:.0f} ms{errors})"


if __name__ == "__main__":
    main()
