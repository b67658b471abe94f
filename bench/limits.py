"""The API's latency while a job fork-bombs inside its cgroup (``rota up --job-pids``).

Starts a real ``rota up`` (local backend, a temporary data directory, ``--job-pids N``), one
job that ticks into a file every 0.1 s, then measures ``GET /v1/jobs/<id>`` back to back from
one client for ``--seconds`` (quiet), submits a fork bomb (a Python loop that forks children
which sleep, until ``fork`` fails or it made ``--bound``, then holds them ``--hold`` seconds),
and measures again for as long as the bomb runs (under the bomb). It reports, for each phase,
the requests, errors, p50 / p99 / max latency (nearest rank), how many processes the bomb made
before ``fork`` failed, and how many ticks the other job made meanwhile.

    python bench/limits.py                    # --job-pids 512, --seconds 10, --hold 10
    python bench/limits.py --job-pids 4096 --bound 5000 --json

Needs writable cgroups (root); without them the bomb is bounded only by ``--bound``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BOMB = ("import os, sys, time\n"
        "made = 0\n"
        "try:\n"
        "    while made < {bound}:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep({hold} + 5); os._exit(0)\n"
        "        made += 1\n"
        "except OSError as exc:\n"
        "    print(f'fork failed after {{made}}: {{exc}}', flush=True)\n"
        "time.sleep({hold})\n"
        "print(f'made {{made}}', flush=True)\n")
TICKER = ("import os, time\n"
          "n = 0\n"
          "while True:\n"
          "    n += 1; open('ticks.tmp', 'w').write(str(n)); os.replace('ticks.tmp', 'ticks')\n"
          "    time.sleep(0.1)\n")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def start(root: Path, pids: int) -> tuple[subprocess.Popen, str, str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(root / "config"),
           "XDG_DATA_HOME": str(root / "share")}
    env.pop("ROTA_URL", None)
    env.pop("ROTA_TOKEN", None)
    log = open(root / "rota-up.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "rota.cli.main", "up", "--port", "0",
                             "--data-dir", str(root / "data"), "--gpus", "1xT4-16GB",
                             "--interval", "0.5", "--job-pids", str(pids)],
                            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    credentials = root / "config" / "rota" / "credentials.json"
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit((root / "rota-up.log").read_text())
        try:
            creds = json.loads(credentials.read_text())
            if httpx.get(f"{creds['url']}/v1/whoami", timeout=5, headers={
                    "Authorization": f"Bearer {creds['token']}"}).status_code == 200:
                return proc, creds["url"], creds["token"]
        except (OSError, ValueError, KeyError, httpx.HTTPError):
            pass
        time.sleep(0.2)
    raise SystemExit("rota up did not answer in 120 s")


def submit(client: httpx.Client, code: str, memory: str) -> str:
    reply = client.post("/v1/jobs", json={
        "project": "default", "queue": "default", "entrypoint": [sys.executable, "-c", code],
        "resources": {"cpu": "500m", "memory": memory}, "checkpoint": {"grace": 1}})
    reply.raise_for_status()
    return str(reply.json()["id"])


def measure(client: httpx.Client, path: str, until) -> dict:
    latencies, errors = [], 0
    while not until():
        t0 = time.perf_counter()
        try:
            ok = client.get(path).status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok:
            latencies.append((time.perf_counter() - t0) * 1000)
        else:
            errors += 1
    return {"requests": len(latencies) + errors, "errors": errors,
            "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-pids", type=int, default=512)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hold", type=float, default=10.0)
    parser.add_argument("--bound", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rota-bench-limits-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        proc, url, token = start(root, args.job_pids)
        try:
            with httpx.Client(base_url=url, timeout=30,
                              headers={"Authorization": f"Bearer {token}"}) as client:
                ticker = submit(client, TICKER, "64Mi")
                ticks = root / "data" / "jobs" / ticker / "work" / "ticks"
                while not ticks.exists():
                    time.sleep(0.1)
                path = f"/v1/jobs/{ticker}"
                end = time.monotonic() + args.seconds
                quiet = measure(client, path, lambda: time.monotonic() > end)
                before = int(ticks.read_text())
                bomb = submit(client, BOMB.format(bound=args.bound, hold=args.hold), "1Gi")
                state = {"n": 0}

                def bomb_over() -> bool:
                    state["n"] += 1  # ask about the bomb every 20th request
                    if state["n"] % 20:
                        return False
                    return client.get(f"/v1/jobs/{bomb}").json()["state"] in (
                        "succeeded", "failed", "cancelled")
                loaded = measure(client, path, bomb_over)
                log = client.get(f"/v1/jobs/{bomb}/logs").text
                result = {"job_pids": args.job_pids, "quiet": quiet, "under_bomb": loaded,
                          "bomb": log.strip().splitlines()[:2],
                          "bomb_exit": client.get(f"/v1/jobs/{bomb}").json().get("exit_code"),
                          "other_job_ticks_meanwhile": int(ticks.read_text()) - before}
                client.post(f"/v1/jobs/{ticker}/cancel")  # jobs outlive rota up: end it
                while client.get(path).json()["state"] != "cancelled":
                    time.sleep(0.2)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for phase in ("quiet", "under_bomb"):
        r = result[phase]
        print(f"{phase:>10}: {r['requests']} requests, {r['errors']} errors, p50 "
              f"{r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms")
    print(f"      bomb: {' / '.join(result['bomb'])} (exit {result['bomb_exit']}); the other "
          f"job ticked {result['other_job_ticks_meanwhile']} times meanwhile")


if __name__ == "__main__":
    main()
