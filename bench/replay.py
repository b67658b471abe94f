"""Replay benchmark: wall time of replaying the Philly trace (or a window of it) per policy.

    python bench/replay.py --gpus 64 --window 2017-10-26..2017-10-27
    python bench/replay.py --gpus 512 --policy fifo,sjf            # the whole trace
    python bench/replay.py --gpus 64 --window 2017-10-26..2017-10-27 --depth 16,256 --policy fair
    python bench/replay.py --gpus 64 --quotas examples/philly-quotas.yaml --policy fifo,fair \
        --out /tmp/q64.json --plot /tmp/q64.png

The trace is loaded once (not timed); each run times ``rota.simulator.replay.replay`` with
``time.perf_counter`` (wall) and ``time.process_time`` (CPU of this process) in one process.
Reported per policy and queue depth: wall and CPU seconds, the 1-minute load average when the
run ended (the machine is shared: wall time above CPU time is time spent waiting for a core),
cycles run and skipped, and the average JCT (a check that the run is the real one, and how much
the queue depth changes it). ``--out FILE`` also writes every run's full figures
(``replay_metrics.summarise``, with the timings) as JSON, and ``--plot FILE`` the JCT CDF and
utilisation plot of the runs of the first depth, so that one run gives both the timing and the
figures of docs/replay.md.
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
from rota.simulator.replay_report import plot  # noqa: E402
from rota.spec import read_yaml  # noqa: E402

TRACE = ROOT.parent / "shared/traces/philly-pollux/philly.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--window", default=None)
    ap.add_argument("--policy", default=",".join(POLICIES))
    ap.add_argument("--depth", default="16", help="queue depths, comma-separated")
    ap.add_argument("--walltime-noise", type=float, default=2.0)
    ap.add_argument("--quotas", default=None, help="per-VC queues with quotas (YAML)")
    ap.add_argument("--checkpoint-every", type=float, default=None, metavar="SECONDS",
                    help="jobs checkpoint every SECONDS of run time; a victim loses the run "
                         "time since its last checkpoint (default: none lost)")
    ap.add_argument("--checkpoint-blind", action="store_true",
                    help="victim choice does not see checkpoint times (counts from the start)")
    ap.add_argument("--no-skip-repeats", action="store_true",
                    help="run every cycle, also those that would repeat the last, quiet one "
                         "(to check that skipping them changes no figure)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None, help="write every run's full figures here (JSON)")
    ap.add_argument("--plot", default=None, help="JCT CDF and utilisation plot (PNG)")
    a = ap.parse_args()
    jobs = philly.load(a.trace)
    if a.window:
        jobs = philly.within(jobs, *philly.parse_window(a.window))
    queues = None
    if a.quotas:
        queues = philly.parse_quotas(read_yaml(Path(a.quotas)), sorted({j.vc for j in jobs}))
    out, figures, plotted = [], [], []
    depths = [int(d) for d in a.depth.split(",")]
    for depth in depths:
        for name in a.policy.split(","):
            t0, c0 = time.perf_counter(), time.process_time()
            result = replay(jobs, name, ReplayConfig(
                a.gpus, depth, a.walltime_noise, quotas=queues,
                checkpoint_every_s=a.checkpoint_every, checkpoint_aware=not a.checkpoint_blind,
                skip_repeats=not a.no_skip_repeats))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            s = summarise(result)
            if a.plot and depth == depths[0]:
                plotted.append(result)
            out.append({"policy": name, "depth": depth, "gpus": a.gpus, "jobs": len(jobs),
                        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                        "load_1m": round(os.getloadavg()[0], 2), "cycles": result.cycles,
                        "skipped": result.skipped, "jct_avg_h": round(s.get("jct_avg_h", 0), 3),
                        "lost_gpu_h": round(s["lost_gpu_h"], 2),
                        "python": platform.python_version(), "cpus": os.cpu_count()})
            figures.append({**s, "depth": depth, "window": a.window, "quotas": a.quotas,
                            "checkpoint_every_s": a.checkpoint_every,
                            "checkpoint_aware": not a.checkpoint_blind,
                            "wall_s": out[-1]["wall_s"], "cpu_s": out[-1]["cpu_s"],
                            "load_1m": out[-1]["load_1m"]})
            if a.out:
                Path(a.out).write_text(json.dumps(figures, indent=1))
            if not a.json:
                r = out[-1]
                print(f"{name:10s} depth {depth:4d}: {r['wall_s']:7.1f} s wall, {r['cpu_s']:7.1f} s "
                      f"CPU, load {r['load_1m']:.1f}, {r['cycles']:,} cycles "
                      f"({r['skipped']:,} skipped), avg JCT {r['jct_avg_h']:.3f} h, "
                      f"{r['lost_gpu_h']:.2f} GPU-h lost", flush=True)
    if a.plot and plotted:
        where = a.window or "Sep-Oct 2017"
        plot(plotted, a.plot, title=f"Philly {where}, {a.gpus} GPUs"
             + (", per-VC quotas" if a.quotas else ""))
    if a.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
