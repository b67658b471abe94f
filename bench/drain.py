"""Drain benchmark: how fast a burst of short jobs goes through, end to end.

    python bench/drain.py rota --jobs 1000                # rota up, the local backend
    python bench/drain.py slurm --jobs 1000               # plain sbatch on the Slurm fixture
    python bench/drain.py both --jobs 1000 --repeat 3     # interleaved, medians of 3

A burst of ``--jobs`` jobs that run ``true``, each asking for 1 CPU, on 64 one-CPU slots (rota:
a node file of 64 CPUs and no GPU; Slurm: its fixture's 4 nodes x 16 CPUs), submitted by
``--clients`` parallel submitters (rota: keep-alive HTTP clients on ``POST /v1/jobs``; Slurm:
``sbatch`` processes). Measured:

- ``submits_per_s``: jobs over the time until the last submit was acknowledged;
- ``finished_per_s``: jobs over the time from the first submit until the last job ended;
- ``cpu_ms_per_job``: the CPU time of everything the scheduler ran for the burst (rota: the
  ``rota up`` process, its supervisors and the jobs; Slurm: slurmctld, the slurmd's, the
  slurmstepd's and the jobs, and the sbatch processes), divided by the jobs; the whole
  machine's is printed beside it, with the load average, since other work may share it;
- ``run_p50_s`` / ``run_p99_s``: submit to running, as the scheduler stamped them.

Every figure is printed as JSON, one object per run.
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
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from rotaup import RotaUp  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and every live process below it, with the children they reaped."""
    kids: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        kids.setdefault(ppid, []).append(pid)
        times[pid] = sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(kids.get(pid, []))
    return total


def machine_cpu_s() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(f) for f in fields) - int(fields[3]) - int(fields[4])  # minus idle, iowait
    return busy / TICK


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


# -- rota -------------------------------------------------------------------------------------

class Rota(RotaUp):
    """``rota up`` on a node file of 64 CPUs and no GPU, started, and the calls the benchmark
    makes."""

    def __init__(self, root: Path) -> None:
        (root / "node.yaml").write_text("name: bench\ncpu: 64\nmemory: 256Gi\n")
        super().__init__(root, "--node-file", str(root / "node.yaml"), "--interval", "0.5",
                         start_timeout_s=120)
        self.start()

    def _call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        host, port = self.url.split("//")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            conn.request(method, path, body, {"Authorization": f"Bearer {self.token}",
                                               "Content-Type": "application/json"})
            reply = conn.getresponse()
            return reply.status, json.loads(reply.read() or b"null")
        finally:
            conn.close()

    def submit_all(self, jobs: int, clients: int) -> list[str]:
        body = json.dumps({"project": "default", "queue": "default", "entrypoint": ["true"],
                           "resources": {"cpu": 1, "memory": "16Mi"}}).encode()
        host, port = self.url.split("//")[1].split(":")
        counter, lock, ids, errors = iter(range(jobs)), threading.Lock(), [], []

        def work() -> None:
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                conn.request("POST", "/v1/jobs", body, {
                    "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
                reply = conn.getresponse()
                data = reply.read()
                (ids if reply.status == 201 else errors).append(
                    json.loads(data)["id"] if reply.status == 201 else data[:200])

        threads = [threading.Thread(target=work) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"{len(errors)} submits failed: {errors[0]!r}")
        return ids

    def ended(self, ids: list[str]) -> bool:
        status, page = self._call("GET", "/v1/jobs?state=pending,scheduled,running,preempting"
                                         "&limit=1")
        return status == 200 and not page["items"]

    def run_latencies(self, ids: list[str]) -> list[float]:
        out = []
        for job in ids[:: max(1, len(ids) // 200)]:  # a sample of 200: enough for p99
            _, events = self._call("GET", f"/v1/jobs/{job}/events")
            ran = [e["time"] for e in events if e["data"].get("to") == "running"]
            if ran:
                out.append(ran[0] - events[0]["time"])
        return out


def run_rota(jobs: int, clients: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rota-drain-") as tmp:
        rota = Rota(Path(tmp))
        try:
            assert rota.proc is not None
            return _measure("rota", rota.proc.pid, lambda: rota.submit_all(jobs, clients),
                            rota.ended, rota.run_latencies)
        finally:
            rota.close()


# -- Slurm ------------------------------------------------------------------------------------

def run_slurm(jobs: int, clients: int) -> dict[str, Any]:
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("SLURM_CONF is not set: eval \"$(.ci/slurm)\" first")
    ctld = int(subprocess.run(["pgrep", "-o", "slurmctld"], capture_output=True, text=True)
               .stdout.split()[0])
    out_dir = Path(tempfile.mkdtemp(prefix="slurm-drain-"))

    def submit() -> list[str]:
        counter, lock, ids = iter(range(jobs)), threading.Lock(), []

        def work() -> None:
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                done = subprocess.run(["sbatch", "--parsable", "-c", "1", "--mem", "16M",
                                       "-o", "/dev/null", "-J", "drain", "--wrap", "true"],
                                      capture_output=True, text=True)
                ids.append(done.stdout.strip().split(";")[0])
        threads = [threading.Thread(target=work) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return ids

    def ended(ids: list[str]) -> bool:
        left = subprocess.run(["squeue", "-h", "-n", "drain", "-o", "%i"],
                              capture_output=True, text=True).stdout.split()
        return not left

    def latencies(ids: list[str]) -> list[float]:
        sample = ",".join(ids[:: max(1, len(ids) // 200)])
        rows = subprocess.run(["sacct", "-n", "-X", "-P", "-j", sample, "-o",
                               "Submit,Start", "--noconvert"], capture_output=True,
                              text=True).stdout.split()
        out = []
        for row in rows:
            submit_t, _, start_t = row.partition("|")
            try:
                out.append(_epoch(start_t) - _epoch(submit_t))
            except ValueError:
                continue
        return out

    try:
        return _measure("slurm", ctld, submit, ended, latencies, extra=_slurm_roots)
    finally:
        subprocess.run(["scancel", "-n", "drain"], capture_output=True)


def _slurm_roots() -> list[int]:
    """slurmd's (their slurmstepd's and jobs run below them)."""
    found = subprocess.run(["pgrep", "-x", "slurmd"], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def _epoch(text: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(text).timestamp()


# -- the measurement --------------------------------------------------------------------------

def _measure(name: str, root: int, submit: Callable[[], list[str]],
             ended: Callable[[list[str]], bool], latencies: Callable[[list[str]], list[float]],
             extra: Callable[[], list[int]] = lambda: []) -> dict[str, Any]:
    def cpu() -> float:
        return tree_cpu_s(root) + sum(tree_cpu_s(p) for p in extra()) + \
            time.process_time()
    cpu0, machine0, t0 = cpu(), machine_cpu_s(), time.monotonic()
    ids = submit()
    submitted = time.monotonic() - t0
    while not ended(ids):
        time.sleep(0.05)
    wall = time.monotonic() - t0
    cpu_s, machine_s = cpu() - cpu0, machine_cpu_s() - machine0
    lat = latencies(ids)
    return {"scheduler": name, "jobs": len(ids), "submits_per_s": len(ids) / submitted,
            "finished_per_s": len(ids) / wall, "wall_s": wall,
            "cpu_ms_per_job": cpu_s * 1000 / len(ids),
            "machine_cpu_ms_per_job": machine_s * 1000 / len(ids),
            "run_p50_s": statistics.median(lat) if lat else None,
            "run_p99_s": _pct(lat, 0.99) if lat else None,
            "loadavg_1m": os.getloadavg()[0], "machine": platform.processor() or "unknown"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("which", choices=("rota", "slurm", "both"))
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    runners = {"rota": [run_rota], "slurm": [run_slurm],
               "both": [run_rota, run_slurm]}[args.which]
    for _ in range(args.repeat):
        for runner in runners:
            print(json.dumps(runner(args.jobs, args.clients)), flush=True)


if __name__ == "__main__":
    main()
