"""Forecast benchmark: the cost of ``rota.scheduler.forecast`` (a start estimate for every
pending job), which the control loop runs once a minute.

    python bench/forecast.py                                   # 1,000 nodes, 10,000 pending
    python bench/forecast.py --nodes 1000 --pending 10000 --policy fairshare --max-jobs 500

It builds the benchmark workload (``workload.build_snapshot``: half the nodes running jobs,
most with walltimes), then times ``forecast`` with ``time.perf_counter`` (and the process's
CPU time, ``time.process_time``) ``--repeat`` times, and reports the median with how many
jobs got a start and why the others got none.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from rota.scheduler import build_policy  # noqa: E402
from rota.scheduler.forecast import Horizon, forecast  # noqa: E402
from workload import NOW, Sizes, build_snapshot  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--policy", default="fairshare")
    ap.add_argument("--max-jobs", type=int, default=Horizon().max_jobs)
    ap.add_argument("--steps", type=int, default=Horizon().steps)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    snapshot = build_snapshot(Sizes(args.nodes, args.pending), args.seed)
    policy = build_policy(args.policy)
    horizon = Horizon(max_jobs=args.max_jobs, steps=args.steps)
    walls, cpus, out = [], [], {}
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = forecast(snapshot, policy, NOW, horizon)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    why = Counter(e.why or "start" for e in out.values())
    print(f"forecast: {args.nodes} nodes, {args.pending} pending, policy {args.policy}, "
          f"max_jobs {args.max_jobs}, steps {args.steps}: median {statistics.median(walls):.2f} s "
          f"wall ({statistics.median(cpus):.2f} s CPU) over {args.repeat}; "
          + ", ".join(f"{k} {n}" for k, n in why.most_common()))


if __name__ == "__main__":
    main()
