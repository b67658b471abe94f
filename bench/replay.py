"""Replay benchmark: wall time of replaying the Philly trace (or a window of it) per policy.

    python bench/replay.py --gpus 64 --window 2017-10-26..2017-10-27
    python bench/replay.py --gpus 512 --policy fifo,sjf            # the whole trace
    python bench/replay.py --gpus 64 --window 2017-10-26..2017-10-27 --depth 16,256 --policy fair

The trace is loaded once (not timed); each run times ``rota.simulator.replay.replay`` with
``time.perf_counter`` (wall) and ``time.process_time`` (CPU of this process) in one process.
Reported per policy and queue depth: wall and CPU seconds, the 1-minute load average when the
run ended (the machine is shared: wall time above CPU time is time spent waiting for a core),
cycles run and skipped, and the average JCT (a check that the run is the real one, and how much
the queue depth changes it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rota.simulator import philly  # noqa: E402
from rota.simulator.replay import POLICIES, ReplayConfig, replay  # noqa: E402
from rota.simulator.replay_metrics import summarise  # noqa: E402

TRACE = ROOT.parent / "shared/traces/philly-pollux/philly.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--window", default=None)
    ap.add_argument("--policy", default=",".join(POLICIES))
    ap.add_argument("--depth", default="16", help="queue depths, comma-separated")
    ap.add_argument("--walltime-noise", type=float, default=2.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    jobs = philly.load(a.trace)
    if a.window:
        jobs = philly.within(jobs, *philly.parse_window(a.window))
    out = []
    for depth in (int(d) for d in a.depth.split(",")):
        for name in a.policy.split(","):
            t0, c0 = time.perf_counter(), time.process_time()
            result = replay(jobs, name, ReplayConfig(a.gpus, depth, a.walltime_noise))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            s = summarise(result)
            out.append({"policy": name, "depth": depth, "gpus": a.gpus, "jobs": len(jobs),
                        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                        "load_1m": round(os.getloadavg()[0], 2), "cycles": result.cycles,
                        "skipped": result.skipped, "jct_avg_h": round(s.get("jct_avg_h", 0), 3),
                        "python": platform.python_version(), "cpus": os.cpu_count()})
            if not a.json:
                r = out[-1]
                print(f"{name:10s} depth {depth:4d}: {r['wall_s']:7.1f} s wall, {r['cpu_s']:7.1f} s "
                      f"CPU, load {r['load_1m']:.1f}, {r['cycles']:,} cycles "
                      f"({r['skipped']:,} skipped), avg JCT {r['jct_avg_h']:.3f} h", flush=True)
    if a.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
