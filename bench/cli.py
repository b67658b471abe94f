"""CLI start-up benchmark: wall time of short ``rota`` commands, and what importing costs.

    python bench/cli.py                 # 7 runs of each command, median and fastest
    python bench/cli.py --runs 15 --json
    git archive ecb6266 src | tar -x -C /tmp/before    # an earlier rota to compare with
    python bench/cli.py --baseline /tmp/before/src

A real ``rota up --port 0 --gpus 1xH100-80GB`` runs in a subprocess (temporary XDG and data
directories, as in ``bench/control.py``); each command is the installed ``rota`` script in a
fresh process with that server's credentials, timed from spawn to exit with
``time.perf_counter``. The commands: ``rota --help`` (no server), ``rota ps``, ``rota queues``
and ``rota nodes`` (one or two HTTP requests to the plane). ``import rota.cli.main`` is the
import alone, timed inside a fresh interpreter; ``modules`` says whether the heavy ones
(FastAPI, SQLAlchemy, the scheduler, numpy, matplotlib, pydantic) were loaded by it.

``--baseline SRC`` also runs every command with ``PYTHONPATH=SRC`` (another checkout's
``src``), alternating run by run with this tree's, so that both see the same load on a shared
machine; the server is this tree's for both.
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


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds from spawn to exit, and the last line the command printed."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
    return took, (done.stdout.strip().splitlines() or [""])[-1]


def measure(envs: dict[str, dict[str, str]], runs: int) -> list[dict]:
    """Every command ``runs`` times in each environment, alternating between them."""
    cases = [("import rota.cli.main", [sys.executable, "-c", PROBE])]
    cases += [(name, rota_script() + argv) for name, argv in COMMANDS]
    results = []
    for name, argv in cases:
        times: dict[str, list[float]] = {label: [] for label in envs}
        heavy: dict[str, list[str]] = {}
        for _ in range(runs):
            for label, env in envs.items():
                took, last = run_once(argv, env)
                if argv[1] == "-c":
                    probe = json.loads(last)
                    took, heavy[label] = probe["s"], probe["heavy"]
                times[label].append(took)
        for label, values in times.items():
            results.append({"tree": label, "command": name, "median_s": statistics.median(values),
                            "min_s": min(values), "modules": heavy.get(label)})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", metavar="SRC", help="another rota's src directory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with server() as s:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        env.update(ROTA_URL=str(s.client.base_url).rstrip("/"),
                   ROTA_TOKEN=s.client.headers["Authorization"].split()[1])
        envs = {"this": env}
        if args.baseline:
            envs["baseline"] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
        results = measure(envs, args.runs)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"results": results, "load": load}, indent=2))
        return
    print(f"{args.runs} runs each; 1-minute load average {load:.1f}")
    print("| tree | command | median | fastest | heavy modules imported |")
    print("|---|---|---|---|---|")
    for r in results:
        heavy = "" if r["modules"] is None else ", ".join(r["modules"]) or "none"
        print(f"| {r['tree']} | `{r['command']}` | {r['median_s']:.2f} s | {r['min_s']:.2f} s "
              f"| {heavy} |")


if __name__ == "__main__":
    main()
