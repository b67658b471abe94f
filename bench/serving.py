"""Serving benchmark: what rota's OpenAI-compatible gateway adds over calling a model server
directly, and how long a cold start takes.

    python bench/serving.py                       # 10 s per point, 5 cold starts
    python bench/serving.py --duration 5 --cold 3 --json

A real ``rota up`` (local backend, 4 virtual H100s) serves ``examples/serving/bigram_lm.py`` as
a service with exactly one replica. For 1, 64 and 512 concurrent keep-alive clients
(``bench/httpload.py``), streaming and not, ``POST /v1/completions`` (16 tokens) is sent for
``--duration`` seconds once to the replica directly and once through the gateway, alternately
on the same replica: requests per second, latency p50/p99 (streams: time to the first chunk
too), errors, the gateway's added latency (gateway p50 - direct p50), and the CPU time of the
``rota up`` process per request through it (the figure that load on the machine changes
least).

Cold starts: a second service with ``min: 0`` and a 1 s idle period; ``--cold`` times, once
it has scaled to zero, one request is sent and timed to its answer, and the service's own
split of that cold start is read back (``rota services --json``, ``last_cold_start``): rota's
part, from the request to the replica running (submit, schedule, launch), and the server's,
from running to ready (Python, numpy and uvicorn starting, then the readiness probe).
Everything shares this machine's cores: the load generator, the gateway, the control loop and
the model server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from control import server  # noqa: E402 - a rota up in a temporary directory
from httpload import run  # noqa: E402

SERVER = ROOT / "examples" / "serving"
CONCURRENCY = (1, 64, 512)


def service(name: str, model: str, **settings: Any) -> dict[str, Any]:
    return {"name": name, "kind": "service", "project": "default", "queue": "default",
            "priority": 100, "workdir": str(SERVER),
            "entrypoint": [sys.executable, "bigram_lm.py", "--model", model],
            "resources": {"cpu": "500m", "memory": "512Mi", "gpu": 1},
            "service": {"models": [model], "readiness": "/health", **settings}}


def wait_for(what: str, check, timeout: float = 120.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def load_point(url: str, token: str, concurrency: int, stream: bool,
               duration: float) -> dict[str, Any]:
    body = json.dumps({"model": "tiny", "prompt": "hello there", "max_tokens": 16,
                       "stream": stream})
    result = asyncio.run(run(url, concurrency=concurrency, duration=duration, body=body,
                             headers=[f"Authorization: Bearer {token}"], stream=stream,
                             timeout=60.0))
    return {"rps": round(result.rps, 1), "p50_ms": result.latency_p50_ms,
            "p99_ms": result.latency_p99_ms, "first_chunk_p50_ms": result.first_chunk_p50_ms,
            "errors": result.errors, "requests": result.requests}


def throughput(s, token: str, duration: float) -> list[dict[str, Any]]:
    made = s.api.post("/v1/services", json=service(
        "tiny", "tiny", replicas={"min": 1, "max": 1}, target=10_000, idle="1h"))
    made.raise_for_status()
    seen = wait_for("the replica to be ready", lambda: _ready(s, "tiny"))
    direct = f"http://{seen['jobs'][0]['endpoint']}/v1/completions"
    gateway = f"{s.url}/v1/completions"
    rows = []
    for stream in (False, True):
        for concurrency in CONCURRENCY:
            row: dict[str, Any] = {"stream": stream, "concurrency": concurrency}
            row["direct"] = load_point(direct, token, concurrency, stream, duration)
            cpu = s.cpu_s()
            row["gateway"] = load_point(gateway, token, concurrency, stream, duration)
            row["gateway"]["cpu_ms_per_request"] = round(
                (s.cpu_s() - cpu) * 1000 / max(1, row["gateway"]["requests"]), 3)
            if row["direct"]["p50_ms"] is not None and row["gateway"]["p50_ms"] is not None:
                row["added_p50_ms"] = round(row["gateway"]["p50_ms"] - row["direct"]["p50_ms"], 3)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    s.api.delete("/v1/services/tiny").raise_for_status()
    return rows


def cold_starts(s, token: str, count: int) -> dict[str, Any]:
    s.api.post("/v1/services", json=service(
        "cold", "tiny-cold", replicas={"min": 0, "max": 1}, idle="1s")).raise_for_status()
    url = f"{s.url}/v1/completions"
    body = json.dumps({"model": "tiny-cold", "prompt": "hi", "max_tokens": 4}).encode()
    totals, rota_part, server_part = [], [], []
    for _ in range(count):
        wait_for("the service to scale to zero",
                 lambda: _view(s, "cold")["replicas"]["live"] == 0)
        began = time.perf_counter()
        request = urllib.request.Request(url, body, {"Authorization": f"Bearer {token}",
                                                     "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            answer.read()
        totals.append(time.perf_counter() - began)
        split = _view(s, "cold")["last_cold_start"]
        rota_part.append(split["to_running_s"])
        server_part.append(split["to_ready_s"])
    s.api.delete("/v1/services/cold").raise_for_status()
    return {"cold_starts": count, "request_to_answer_s": _median(totals),
            "rota_request_to_running_s": _median(rota_part),
            "server_running_to_ready_s": _median(server_part)}


def _view(s, name: str) -> dict[str, Any]:
    return s.api.get(f"/v1/services/{name}").json()


def _ready(s, name: str) -> dict[str, Any] | None:
    seen = _view(s, name)
    return seen if seen["replicas"]["ready"] >= 1 else None


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per point")
    parser.add_argument("--cold", type=int, default=5, help="cold starts to time")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with server() as s:
        token = s.token
        out = {"machine": f"{platform.node()} ({os.cpu_count()} cores)",
               "load_before": os.getloadavg()[0],
               "points": throughput(s, token, args.duration),
               "cold": cold_starts(s, token, args.cold)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{'stream':>6} {'clients':>7} {'direct rps':>10} {'gateway rps':>11} "
          f"{'direct p50':>10} {'gateway p50':>11} {'added p50':>9} {'gateway p99':>11} "
          f"{'cpu/req':>8} {'errors':>6}")
    for row in out["points"]:
        d, g = row["direct"], row["gateway"]
        print(f"{str(row['stream']):>6} {row['concurrency']:>7} {d['rps']:>10} {g['rps']:>11} "
              f"{d['p50_ms'] or 0:>9.2f}m {g['p50_ms'] or 0:>10.2f}m "
              f"{row.get('added_p50_ms', 0):>8.2f}m {g['p99_ms'] or 0:>10.2f}m "
              f"{g['cpu_ms_per_request']:>7.2f}m {sum(g['errors'].values()):>6}")
    print(json.dumps(out["cold"]))


if __name__ == "__main__":
    main()
