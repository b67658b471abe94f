"""CLI start-up benchmark: wall time of short ``rota`` commands, and what importing costs.

    python bench/cli.py                 # 7 runs of each command, median and fastest
    python bench/cli.py --runs 15 --json

A real ``rota up --port 0 --gpus 1xH100-80GB`` runs in a subprocess (temporary XDG and data
directories, as in ``bench/control.py``); each command is the installed ``rota`` script in a
fresh process with that server's credentials, timed from spawn to exit with
``time.perf_counter``. The commands: ``rota --help`` (no server), ``rota ps``, ``rota queues``
and ``rota nodes`` (one or two HTTP requests to the plane). ``import rota.cli.main`` is the
import alone, timed inside a fresh interpreter; ``modules`` says whether the heavy ones
(FastAPI, SQLAlchemy, the scheduler, numpy, matplotlib, pydantic) were loaded by it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from control import server  # noqa: E402

HEAVY = ("fastapi", "sqlalchemy", "rota.scheduler", "rota.store", "numpy", "matplotlib",
         "pydantic", "uvicorn")
COMMANDS = (("rota --help", ["--help"]), ("rota ps", ["ps"]), ("rota queues", ["queues"]),
            ("rota nodes", ["nodes"]))
PROBE = ("import sys, time, json; t = time.perf_counter(); import rota.cli.main; "
         "print(json.dumps({'s': time.perf_counter() - t, 'heavy': [m for m in %r "
         "if m in sys.modules]}))" % (HEAVY,))


def rota_script() -> list[str]:
    script = Path(sys.executable).parent / "rota"
    found = str(script) if script.exists() else shutil.which("rota")
    return [found] if found else [sys.executable, "-m", "rota.cli.main"]


def timed(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True)
        out.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with server() as s:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        env.update(ROTA_URL=str(s.client.base_url).rstrip("/"),
                   ROTA_TOKEN=s.client.headers["Authorization"].split()[1])
        probes = [json.loads(subprocess.run([sys.executable, "-c", PROBE], env=env, check=True,
                                            capture_output=True, text=True).stdout)
                  for _ in range(args.runs)]
        results.append({"command": "import rota.cli.main",
                        "median_s": statistics.median(p["s"] for p in probes),
                        "min_s": min(p["s"] for p in probes), "modules": probes[0]["heavy"]})
        for name, argv in COMMANDS:
            times = timed(rota_script() + argv, env, args.runs)
            results.append({"command": name, "median_s": statistics.median(times),
                            "min_s": min(times)})
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"results": results, "load": load}, indent=2))
        return
    print(f"{args.runs} runs each; 1-minute load average {load:.1f}")
    print("| command | median | fastest | heavy modules imported |")
    print("|---|---|---|---|")
    for r in results:
        heavy = ", ".join(r.get("modules", [])) or ("none" if "modules" in r else "")
        print(f"| `{r['command']}` | {r['median_s']:.2f} s | {r['min_s']:.2f} s | {heavy} |")


if __name__ == "__main__":
    main()
