"""Invariants of a cluster state, recomputed from scratch from job placements.

Shared by the property tests: they hold after any cycle's decisions are applied, whatever the
policy. Each check returns nothing and raises AssertionError with the offending place.
"""

from __future__ import annotations

from collections import defaultdict

from rota.core import Job
from rota.scheduler import Snapshot


def holding(snapshot: Snapshot) -> list[Job]:
    return [j for j in snapshot.jobs if j.state.holds_resources]


def check_capacity(snapshot: Snapshot, jobs: list[Job] | None = None) -> None:
    """No node above its cpu or memory; no device above 1000 milli or its memory; a device
    held whole is held by one job only."""
    nodes = {n.name: n for n in snapshot.nodes}
    cpu: dict[str, int] = defaultdict(int)
    mem: dict[str, int] = defaultdict(int)
    milli: dict[tuple[str, int], int] = defaultdict(int)
    gmem: dict[tuple[str, int], int] = defaultdict(int)
    holders: dict[tuple[str, int], list[str]] = defaultdict(list)
    for job in holding(snapshot) if jobs is None else jobs:
        for rep in job.placement.replicas:
            cpu[rep.node] += job.request.cpu_milli
            mem[rep.node] += job.request.memory_mib
            indices = [d.index for d in rep.devices]
            assert len(set(indices)) == len(indices), f"{job.id} books a device twice: {indices}"
            for d in rep.devices:
                milli[(rep.node, d.index)] += d.milli
                gmem[(rep.node, d.index)] += d.memory_mib
                holders[(rep.node, d.index)].append(job.id)
    for name, used in cpu.items():
        assert used <= nodes[name].cpu_milli, f"node {name} cpu {used} > {nodes[name].cpu_milli}"
        assert mem[name] <= nodes[name].memory_mib, f"node {name} memory {mem[name]}"
    for (name, index), used in milli.items():
        device = next(d for d in nodes[name].devices if d.index == index)
        assert used <= 1000, f"{name}/{index}: {used} milli by {holders[(name, index)]}"
        assert gmem[(name, index)] <= device.memory_mib, f"{name}/{index}: memory over"


def check_binds_shape(snapshot: Snapshot, decisions) -> None:
    """Every bind places exactly ``replicas`` replicas, each with the GPUs one replica asks
    for, on schedulable nodes and healthy devices of a model the job accepts."""
    jobs = {j.id: j for j in snapshot.jobs}
    nodes = {n.name: n for n in snapshot.nodes}
    for b in decisions.binds:
        job = jobs[b.job]
        g = job.request.gpu
        assert len(b.placement.replicas) == job.replicas, f"{b.job}: gang not all-or-nothing"
        for rep in b.placement.replicas:
            n = nodes[rep.node]
            assert n.schedulable, f"{b.job} placed on cordoned {n.name}"
            assert len(rep.devices) == g.count, f"{b.job}: {len(rep.devices)} devices, wants {g.count}"
            for d in rep.devices:
                device = next(x for x in n.devices if x.index == d.index)
                assert device.healthy, f"{b.job} placed on unhealthy {n.name}/{d.index}"
                assert d.milli == g.share
                if g.memory_mib is not None:
                    assert d.memory_mib == (g.memory_mib if g.fractional else device.memory_mib)


def check_quota(snapshot: Snapshot) -> None:
    """Kueue's limits, from usage recomputed from scratch: without a cohort, usage <= nominal;
    with a borrowing limit, usage <= nominal + limit; in a cohort, what members use above their
    guaranteed part (nominal - lending limit) fits in what they lend together."""
    usage: dict[tuple[str, str, str], int] = defaultdict(int)
    for job in holding(snapshot):
        for r, v in job.total().items():
            usage[(job.queue, job.flavor, r)] += v
    pool: dict[tuple[str, str, str], int] = defaultdict(int)
    pool_used: dict[tuple[str, str, str], int] = defaultdict(int)
    for q in snapshot.queues.values():
        for f, quota in q.quotas.items():
            for r, nominal in quota.nominal.items():
                used = usage[(q.name, f, r)]
                where = f"queue {q.name} flavour {f} {r}"
                if q.cohort is None:
                    assert used <= nominal, f"{where}: {used} > nominal {nominal}"
                    continue
                if r in quota.borrowing_limit:
                    cap = nominal + quota.borrowing_limit[r]
                    assert used <= cap, f"{where}: {used} > nominal + borrowing limit {cap}"
                guaranteed = nominal - quota.lending_limit.get(r, nominal)
                pool[(q.cohort, f, r)] += nominal - guaranteed
                pool_used[(q.cohort, f, r)] += max(0, used - guaranteed)
    for key, used in pool_used.items():
        assert used <= pool[key], f"cohort {key}: {used} borrowed > {pool[key]} lent"
