"""Packing benchmark: wall time of one packing run of the FGD experiment.

    python bench/pack.py                                  # default list, fgd, seed 42, 3 repeats
    python bench/pack.py --policy bestfit --pods ../shared/traces/alibaba-gpu-v2023/csv/openb_pod_list_cpu250.csv
    python bench/pack.py --json

The trace is loaded once (not timed); each repeat times ``rota.simulator.pack.run`` (tuning,
every placement, the metrics after every arrival, the bins) with ``time.perf_counter``, in one
process. Reported: the median and the best of the repeats, the pods replayed and placed per
second, and the unallocated GPU % at 100 % arrived (a check that the run is the real one).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rota.simulator.alibaba import load_nodes, load_pods  # noqa: E402
from rota.simulator.pack import POLICIES, run  # noqa: E402

TRACE = ROOT.parent / "shared/traces/alibaba-gpu-v2023/csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default=str(TRACE / "openb_node_list_gpu_node.csv"))
    ap.add_argument("--pods", default=str(TRACE / "openb_pod_list_default.csv"))
    ap.add_argument("--policy", default="fgd", choices=POLICIES)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    nodes, pods = load_nodes(a.nodes), load_pods(a.pods)
    times, result = [], None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        result = run(nodes, pods, a.policy, a.seed)
        times.append(time.perf_counter() - t0)
    assert result is not None
    out = {
        "policy": a.policy, "pods_file": Path(a.pods).name, "seed": a.seed,
        "pods": result.pods, "failed": result.failed,
        "median_s": round(statistics.median(times), 3), "best_s": round(min(times), 3),
        "pods_per_s": round(result.pods / statistics.median(times)),
        "unallocated_pct_at_100": round(result.at(100).unallocated, 3),
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['policy']} on {out['pods_file']} (seed {a.seed}): {out['pods']} pods, "
          f"{out['failed']} failed; median {out['median_s']} s, best {out['best_s']} s over "
          f"{a.repeat} runs ({out['pods_per_s']} pods/s); unallocated at 100 %: "
          f"{out['unallocated_pct_at_100']} %")


if __name__ == "__main__":
    main()
