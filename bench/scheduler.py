"""Scheduler benchmark: placements per second and cycle time of ``run_cycle``.

    python bench/scheduler.py                       # the standard suite (see SUITE)
    python bench/scheduler.py --nodes 1000 --pending 10000 --policy fairshare --cycles 5
    python bench/scheduler.py --json > out.json

For each scenario (policy x nodes x pending jobs) it builds a workload from the seed
(``workload.build_snapshot``; the build is timed separately), then runs ``--cycles`` cycles.
Between cycles the decisions are applied with ``apply_decisions`` (victims requeued at once) and
the clock moves on a minute, so the cluster fills; only ``run_cycle`` is timed, with
``time.perf_counter``. The whole series is repeated ``--repeat`` times on the same snapshot and
every figure is the median over the repeats.

Figures per scenario (each the median over the repeats):
- ``first cycle``: time and binds of the first cycle, the one on the emptiest cluster; later
  cycles bind little because the queues' quota is used up by then;
- ``placements/s``: binds of the first cycle divided by its time (``all cycles``: binds of the
  whole series divided by its total ``run_cycle`` time);
- ``p50`` / ``p99``: cycle times over every cycle of every repeat (nearest rank).

Every time is wall-clock (``time.perf_counter``); the CPU time of the process
(``time.process_time``) is recorded next to it, since other work on a shared machine stretches
wall-clock times but hardly CPU times.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rota.scheduler import PRESETS, apply_decisions, build_policy, run_cycle
from workload import NOW, Sizes, build_snapshot

# (policy preset, nodes, pending): FIFO + binpack and DRF + preemption + backfill at two sizes,
# and a full fair-share cycle with preemption and backfill over 10,000 pending jobs.
SUITE = (
    ("besteffort", 1000, 50_000), ("besteffort", 10_000, 50_000),
    ("fair", 1000, 50_000), ("fair", 10_000, 50_000),
    ("fairshare", 1000, 10_000),
)
CYCLE_STEP_S = 60.0


@dataclass
class CycleFigure:
    seconds: float
    cpu_seconds: float
    binds: int
    preemptions: int
    reservations: int
    waits: int
    rejects: int


@dataclass
class Result:
    policy: str
    nodes: int
    pending: int
    build_s: float
    running_jobs: int
    repeats: list[list[CycleFigure]] = field(default_factory=list)

    def median(self, figure) -> float:
        return statistics.median(figure(r) for r in self.repeats)

    def percentile(self, q: float, attr: str = "seconds") -> float:
        times = sorted(getattr(c, attr) for r in self.repeats for c in r)
        return times[max(0, math.ceil(q * len(times)) - 1)]

    def summary(self) -> dict:
        return {
            "policy": self.policy, "nodes": self.nodes, "pending": self.pending,
            "build_s": round(self.build_s, 3), "running_jobs": self.running_jobs,
            "first_cycle_s": round(self.median(lambda r: r[0].seconds), 4),
            "first_cycle_cpu_s": round(self.median(lambda r: r[0].cpu_seconds), 4),
            "first_cycle_binds": int(self.median(lambda r: r[0].binds)),
            "placements_per_s": round(self.median(lambda r: r[0].binds / r[0].seconds)),
            "placements_per_cpu_s": round(self.median(lambda r: r[0].binds / r[0].cpu_seconds)),
            "all_cycles_placements_per_s": round(self.median(
                lambda r: sum(c.binds for c in r) / sum(c.seconds for c in r))),
            "p50_s": round(self.percentile(0.5), 4), "p99_s": round(self.percentile(0.99), 4),
            "p50_cpu_s": round(self.percentile(0.5, "cpu_seconds"), 4),
            "p99_cpu_s": round(self.percentile(0.99, "cpu_seconds"), 4),
            "preemptions": self.median(lambda r: sum(c.preemptions for c in r)),
            "reservations": self.median(lambda r: sum(c.reservations for c in r)),
            "repeats": [[asdict(c) for c in r] for r in self.repeats],
        }


def run_scenario(policy_name: str, nodes: int, pending: int, cycles: int, repeat: int,
                 seed: int, progress: Progress, freeze: bool = False) -> Result:
    label = f"{policy_name} {nodes} nodes {pending} pending"
    task = progress.add_task(f"build {label}", total=1 + cycles * repeat)
    start = time.perf_counter()
    snapshot = build_snapshot(Sizes(nodes, pending), seed)
    build_s = time.perf_counter() - start
    progress.update(task, advance=1, description=f"run   {label}")
    policy = build_policy({"preset": policy_name, "seed": seed})
    result = Result(policy_name, nodes, pending, build_s, len(snapshot.active))
    for _ in range(repeat):
        current, now, figures = snapshot, NOW, []
        for _ in range(cycles):
            if freeze:  # what a caller may do: keep the snapshot out of the collector's scans
                gc.collect()
                gc.freeze()
            start, cpu = time.perf_counter(), time.process_time()
            decisions = run_cycle(current, policy, now)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            figures.append(CycleFigure(seconds, cpu, len(decisions.binds), len(decisions.preemptions),
                                       len(decisions.reservations), len(decisions.waits),
                                       len(decisions.rejects)))
            current = apply_decisions(current, decisions, now)
            now += CYCLE_STEP_S
            progress.update(task, advance=1)
        result.repeats.append(figures)
        gc.unfreeze()
    return result


def machine() -> dict:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gib = None
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "ram_gib": mem_gib,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "load_average_1m": round(os.getloadavg()[0], 2)}


def table(results: list[Result]) -> Table:
    t = Table(title="run_cycle, median over repeats (wall-clock; CPU time in brackets)")
    for col in ("policy", "nodes", "pending", "build s", "1st cycle s", "1st binds",
                "placements/s", "all cycles /s", "p50 s", "p99 s", "preempt", "reserve"):
        t.add_column(col, justify="right")
    for r in results:
        s = r.summary()
        t.add_row(r.policy, str(r.nodes), str(r.pending), f"{s['build_s']:.2f}",
                  f"{s['first_cycle_s']:.3f} ({s['first_cycle_cpu_s']:.3f})",
                  str(s["first_cycle_binds"]),
                  f"{s['placements_per_s']:,} ({s['placements_per_cpu_s']:,})",
                  f"{s['all_cycles_placements_per_s']:,}",
                  f"{s['p50_s']:.3f} ({s['p50_cpu_s']:.3f})",
                  f"{s['p99_s']:.3f} ({s['p99_cpu_s']:.3f})",
                  f"{s['preemptions']:g}", f"{s['reservations']:g}")
    return t


def scenarios(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    if args.nodes is None and args.pending is None and args.policy is None:
        return list(SUITE)
    return [(p, n, k) for p in (args.policy or ["besteffort", "fair"])
            for n in (args.nodes or [1000, 10_000]) for k in (args.pending or [50_000])]


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", help="cluster sizes (default 1000 10000)")
    ap.add_argument("--pending", type=int, nargs="+", help="pending jobs (default 50000)")
    ap.add_argument("--policy", nargs="+", help="policy presets (default besteffort fair)")
    ap.add_argument("--cycles", type=int, default=3, help="cycles per series (default 3)")
    ap.add_argument("--repeat", type=int, default=3, help="series per scenario (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print JSON on stdout")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() the snapshot before each cycle (see README)")
    args = ap.parse_args(argv)
    for name in ("cycles", "repeat"):
        if getattr(args, name) < 1:
            ap.error(f"--{name}: must be at least 1")
    for name in args.policy or []:
        if name not in PRESETS:
            ap.error(f"--policy: no preset named {name!r}; known: {', '.join(PRESETS)}")
    for size in (args.nodes or []) + (args.pending or []):
        if size < 1:
            ap.error(f"--nodes/--pending: must be positive, got {size}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    console = Console(stderr=True)
    before = machine()  # the load average when the run starts; the end's is printed too
    results = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        for policy_name, nodes, pending in scenarios(args):
            results.append(run_scenario(policy_name, nodes, pending, args.cycles, args.repeat,
                                        args.seed, progress, args.gc_freeze))
    if args.json:
        json.dump({"machine": machine(), "load_average_at_start": before["load_average_1m"],
                   "seed": args.seed, "cycles": args.cycles,
                   "repeat": args.repeat, "gc_freeze": args.gc_freeze, "results": [r.summary() for r in results]},
                  sys.stdout, indent=2)
        print()
    else:
        Console(width=160).print(table(results))
        Console().print({**machine(), "load_average_at_start": before["load_average_1m"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
