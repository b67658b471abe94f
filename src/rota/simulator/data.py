"""One run of the datasets experiment: a workload under a regime, on a virtual clock, each
placement decided by ``run_cycle`` (docs/datasets.md).

Each node has a dataset cache of ``cache_tb``: a job bound to a node whose cache lacks its
dataset copies it whole from the source at the node's bandwidth before its first batch, and
the copy stays (the node's ``cache`` shows it from the moment the copy starts; a job placed
there meanwhile waits for the copy to finish). Room is made by ``choose_evictions``, rota's
eviction (never what a running job reads; first what no job names, least recently used
first), the same in every regime. A copy that cannot get room (running jobs pin the rest) is
read from the source without being kept. A job runs for the time its copy takes (the slowest
replica's, for a gang) plus its compute time.

Cycles run at every arrival and end, and when a job that waits for a warm node reaches its
bound (the ``free`` of its ``data-locality`` reason). The policy is rota's FIFO that skips a
blocked head (``besteffort``) with binpack, no preemption, no backfill; the regimes differ
only in the policy's ``data`` (``REGIME_DATA``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace

from rota.core import (
    GpuDevice, GpuRequest, Job, JobId, JobState, Node, Queue, ReasonCode, ReplicaRequest,
    Snapshot,
)
from rota.core.datasets import CacheEntry, Dataset, cache_key, choose_evictions
from rota.scheduler import build_policy, run_cycle
from rota.simulator.data_workload import GB, DataJob, Experiment, Workload

REGIME_DATA = {"oblivious": "none", "fluid-soft": {"mode": "soft", "delay": False},
               "fluid-required": {"mode": "required"}, "rota": {"mode": "ttfb", "delay": True}}
NODE_GPUS_MAX = 8
_EPS = 1e-6


@dataclass(slots=True)
class Copy:
    """A dataset's copy in one node's cache: its bytes, when it is whole, when last used."""

    bytes: int
    ready: float
    last_used: float


@dataclass(slots=True)
class Outcome:
    """One job's measures: bound at ``start``, first batch at ``first``, ended at ``end``;
    whether every node it ran on had its data cached whole (a hit), bytes it copied."""

    submit: float
    start: float = 0.0
    first: float = 0.0
    end: float = 0.0
    hit: bool = False
    copied: int = 0


@dataclass
class Result:
    regime: str
    seed: int
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    cycles: int = 0
    evicted: int = 0


def simulate(exp: Experiment, load: Workload, regime: str, seed: int) -> Result:
    return Run(exp, load, regime, seed).run()


class Run:
    def __init__(self, exp: Experiment, load: Workload, regime: str, seed: int) -> None:
        c = exp["cluster"]
        self.capacity = int(c["cache_tb"] * 1000 * GB)
        self.bandwidth = c["bandwidth_gbps"] * GB / 8  # bytes/s
        per = int(c["gpus_per_node"])
        self.nodes = tuple(Node(f"n{k:02d}", 1000 * 1000, 4096 * 1024, tuple(
            GpuDevice(i, "GPU", 80 * 1024) for i in range(per)), data_bandwidth=self.bandwidth)
            for k in range(int(c["nodes"])))
        self.caches: dict[str, dict[str, Copy]] = {n.name: {} for n in self.nodes}
        self.catalogue = {name: Dataset(name, "p", f"/shared/{name}", "1", size)
                          for name, size in load.sizes.items()}
        self.policy = build_policy({"preset": "besteffort", "data": REGIME_DATA[regime]})
        self.per_node = per
        self.load, self.result = load, Result(regime, seed)
        self.pending: dict[str, Job] = {}
        self.running: dict[str, Job] = {}
        self.reads: dict[str, str] = {}  # job -> cache key it reads
        self.events: list[tuple[float, int, str, str]] = []
        self._seq = 0

    def run(self) -> Result:
        for dj in self.load.jobs:
            self._push(dj.submit, "arrive", dj.id)
        by_id = {dj.id: dj for dj in self.load.jobs}
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] <= now + _EPS:
                _, _, kind, job_id = heapq.heappop(self.events)
                if kind == "arrive":
                    self.pending[job_id] = self._job(by_id[job_id])
                    self.result.outcomes[job_id] = Outcome(by_id[job_id].submit)
                elif kind == "end":
                    self.running.pop(job_id, None)
            if self.pending:
                self._cycle(now, by_id)
        return self.result

    def _push(self, at: float, kind: str, job_id: str) -> None:
        self._seq += 1
        heapq.heappush(self.events, (at, self._seq, kind, job_id))

    def _job(self, dj: DataJob) -> Job:
        replicas = max(1, dj.gpus // self.per_node) if dj.gpus > self.per_node else 1
        per = dj.gpus // replicas
        self.reads[dj.id] = cache_key(dj.dataset, "1")
        return Job(JobId(dj.id), "p", "q", ReplicaRequest(1000, 1024, GpuRequest(per)),
                   replicas=replicas, submit_time=dj.submit, datasets=(dj.dataset,))

    def _snapshot(self, now: float) -> Snapshot:
        nodes = tuple(replace(n, cache={k: c.bytes for k, c in self.caches[n.name].items()})
                      for n in self.nodes)
        return Snapshot(nodes, {"q": Queue("q")},
                        (*self.running.values(), *self.pending.values()),
                        datasets=self.catalogue)

    def _cycle(self, now: float, by_id: dict[str, DataJob]) -> None:
        decisions = run_cycle(self._snapshot(now), self.policy, now)
        self.result.cycles += 1
        for bind in decisions.binds:
            job = self.pending.pop(bind.job)
            self.running[bind.job] = replace(job, state=JobState.RUNNING, placement=bind.placement,
                                                 flavor=bind.flavor, started_at=now)
            first = self._start(bind.job, bind.placement.nodes, now)
            end = self.result.outcomes[bind.job].end = first + by_id[bind.job].compute_s
            self._push(end, "end", bind.job)
        for wait in decisions.waits:
            for r in wait.reasons:
                if r.code is ReasonCode.DATA_LOCALITY and r.free is not None:
                    self._push(now + r.free + 1e-3, "wake", wait.job)

    def _start(self, job_id: str, nodes: tuple[str, ...], now: float) -> float:
        """Copy the job's dataset where its nodes lack it; when its first batch is read."""
        key = self.reads[job_id]
        size = self.catalogue[key.split("@")[0]].size_bytes or 0
        out = self.result.outcomes[job_id]
        out.start, first, hit = now, now, True
        for name in nodes:
            cache = self.caches[name]
            have = cache.get(key)
            if have is not None:
                have.last_used = now
                first = max(first, have.ready)
                hit = hit and have.ready <= now
                continue
            hit = False
            ready = now + size / self.bandwidth
            out.copied += size
            first = max(first, ready)
            if self._make_room(name, key, size):
                cache[key] = Copy(size, ready, now)
        out.first, out.hit = first, hit
        return first

    def _make_room(self, node: str, key: str, size: int) -> bool:
        cache = self.caches[node]
        in_use = frozenset(self.reads[j] for j, job in self.running.items()
                           if node in job.placement.nodes)
        wanted = frozenset(self.reads[j] for j in (*self.running, *self.pending))
        entries = [CacheEntry(k, c.bytes, c.last_used) for k, c in cache.items()]
        choice = choose_evictions(entries, self.capacity, size, in_use - {key}, wanted)
        if choice.blocked:
            return False
        for k in choice.drop:
            del cache[k]
            self.result.evicted += 1
        return True

