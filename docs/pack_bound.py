"""How low can unallocated GPU at 100 % arrived go on a pod list, whatever the placement?

    python docs/pack_bound.py [--list default] [--seeds 42-51]

For each seed, the pods that arrive up to 100 % (the same tuned, shuffled list ``rota sim
pack`` replays) are reduced to their GPU shares, and two numbers are printed, in % of the
cluster's GPUs:

- ``lp``: a lower bound for any policy, online or offline. The configuration LP: the cluster's
  devices are filled with *configurations* (multisets of shares summing to at most 1000 milli;
  a whole-GPU pod of ``k`` devices counts as ``k`` shares of 1000) and any pod may be left out,
  costing its GPU. Minimising what is left out bounds the unallocated GPU from below. It drops
  every other constraint (CPU, memory, models, a multi-GPU pod's devices on one node, arrival
  order, and the rule that a pod that fits is placed), so it is far from reachable. Needs scipy.
- ``bfd``: an offline packer that knows every pod in advance and places all of them: the
  fractional shares sorted largest first, each on the fullest device it fits (best fit
  decreasing). What its devices keep free is what a placement that places every pod leaves,
  if it packs shares that well.

The gap between the two is the 810-milli pods: each placed one leaves a 190-milli hole that
only the few pods of 190 milli or less can fill, and the LP leaves about a fifth of them out
instead, which no placement can do (it places every pod that fits).
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import Counter
from pathlib import Path

from rota.core import MILLI
from rota.simulator import pack
from rota.simulator.alibaba import TracePod, load_nodes, load_pods

TRACE = Path(__file__).resolve().parent.parent.parent / "shared/traces/alibaba-gpu-v2023/csv"


def arrived(pods: list[TracePod], capacity: int, seed: int) -> list[TracePod]:
    """The GPU pods of the tuned list that arrive up to 100 % of ``capacity``."""
    out, total = [], 0
    for p in pack.tune(pods, capacity, 1.3, random.Random(seed)):
        if total + p.gpu_total > capacity:
            break
        total += p.gpu_total
        if p.num_gpu:
            out.append(p)
    return out


def best_fit_decreasing(pods: list[TracePod], capacity: int) -> float:
    """Free milli-GPU on the devices the fractional pods open, packed best fit decreasing."""
    free: Counter[int] = Counter()  # free milli -> devices with that much free
    for share in sorted((p.gpu_milli for p in pods if p.gpu_milli < MILLI), reverse=True):
        fits = [f for f in free if f >= share]
        room = min(fits) if fits else MILLI
        if fits:
            free[room] -= 1
            if not free[room]:
                del free[room]
        free[room - share] += 1
    return 100 * sum(f * n for f, n in free.items()) / capacity


def lp_bound(pods: list[TracePod], devices: int) -> float:
    """The configuration LP's least GPU left out, in % of the cluster."""
    import numpy as np
    from scipy.optimize import linprog

    need = Counter()
    for p in pods:
        if p.gpu_milli < MILLI:
            need[p.gpu_milli] += 1
        else:
            need[MILLI] += p.num_gpu
    sizes = sorted(need, reverse=True)
    configs: list[tuple[int, ...]] = []

    def maximal(i: int, room: int, taken: list[int]) -> None:
        if i == len(sizes):
            if all(s > room for s in sizes):
                configs.append(tuple(taken))
            return
        k = 0
        while k * sizes[i] <= room and k <= need[sizes[i]]:
            maximal(i + 1, room - k * sizes[i], taken + [k])
            k += 1

    maximal(0, MILLI, [])
    a = np.array(configs, dtype=float).T
    m, k = a.shape[1], len(sizes)
    # variables: devices per configuration (m), pods left out per size (k)
    cost = np.concatenate([np.zeros(m), np.array(sizes, dtype=float)])
    a_ub = np.vstack([np.hstack([-a, -np.eye(k)]),
                      np.concatenate([np.ones(m), np.zeros(k)])[None, :]])
    b_ub = np.concatenate([-np.array([need[s] for s in sizes], dtype=float), [devices]])
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if not result.success:
        raise RuntimeError(result.message)
    return 100 * result.fun / (devices * MILLI)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", default="default")
    ap.add_argument("--seeds", default="42-51")
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    nodes = [n for n in load_nodes(TRACE / "openb_node_list_gpu_node.csv") if n.gpus]
    pods = load_pods(TRACE / f"openb_pod_list_{args.list}.csv")
    devices = sum(n.gpus for n in nodes)
    rows = []
    print("| seed | lp | bfd |\n|---|---|---|")
    for seed in seeds:
        got = arrived(pods, devices * MILLI, seed)
        rows.append((lp_bound(got, devices), best_fit_decreasing(got, devices * MILLI)))
        print(f"| {seed} | {rows[-1][0]:.2f} | {rows[-1][1]:.2f} |", flush=True)
    print(f"| mean | {statistics.fmean(r[0] for r in rows):.2f} | "
          f"{statistics.fmean(r[1] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
