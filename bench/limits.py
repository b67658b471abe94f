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
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rotaup import running  # noqa: E402

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
        with running(root, "--gpus", "1xT4-16GB", "--interval", "0.5", "--job-pids",
                     str(args.job_pids), start_timeout_s=120) as server, \
                server.client() as client:
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
