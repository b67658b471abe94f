"""The control plane's Prometheus metrics (``GET /metrics``; docs/metrics.md lists them all).

Three sources, none of which costs a pass anything but keeping a reference:

- **What the last pass saw** (``Metrics.passed``, called by the control loop at the end of each
  pass with its snapshot and the reason each pending job waits): jobs per queue and state,
  pending jobs per queue and reason, quota nominal, used and borrowed per queue and flavour (the
  scheduler's own book), GPUs allocated per queue and project and per device, fractions
  counted by their share. Computed when scraped, so a pass pays only for the reference.
- **The jobs' history** in the store: each scrape (not each pass, which would re-read the
  window below every time) reads the state changes recorded since the last one, counts
  preemptions, requeues (by how the attempt ended) and outcomes per queue, and observes each
  job's wait from submission to its first start. Counting
  starts with the control plane (counters restart at 0, as Prometheus expects); changes that
  another writer committed out of id order (PostgreSQL) are still counted, within a window of
  ``WINDOW`` events.
- **The machine's GPUs** through NVML, where the backend is local and NVML is present
  (``readings``): utilisation and memory in use per device. Elsewhere the cluster's own exporter
  (NVIDIA DCGM's) reports them.

And each project's monthly budget: what it used this month, its limits, and whether it is past
one (the store's exact figure, read when scraped).

Also timed: each pass, its scheduling cycle, and the store's snapshot read and apply write; the
lease (held, seconds to expiry) tells a second control plane's watcher which one acts. Labels
are bounded: queues, projects, flavours, nodes, device indices, states, reason codes and ends,
never job ids.
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from rota.core import JobState, Snapshot
from rota.core.accounting import BudgetState, BudgetStatus
from rota.scheduler.quota import QuotaBook
from rota.store import StateMove, Store

WINDOW = 1000          # events re-read in case one committed after a later one
MAX_MOVES_READ = 10_000
MIB = 1024 * 1024
MILLI = 1000
PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
WAIT_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
HOLDING = frozenset({"scheduled", "running", "preempting"})
TERMINAL = frozenset(str(s) for s in JobState if s.terminal)


@dataclass(frozen=True, slots=True)
class Reading:
    """One device's own figures (NVML): utilisation 0..100 and memory in use."""

    node: str
    index: int
    util_percent: int | None
    memory_used_mib: int | None


@dataclass(frozen=True, slots=True)
class LastPass:
    at: float
    snapshot: Snapshot
    reasons: Mapping[str, str]  # pending job -> the code of its first wait reason


class Metrics:
    """``readings`` gives the machine's GPU figures (None: not known here); ``lease`` the
    current lease expiry (None: not held)."""

    def __init__(self, store: Store, readings: Callable[[], list[Reading]] | None = None,
                 lease: Callable[[], float | None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.readings, self.lease, self.clock = store, readings, lease, clock
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        r.register(_Now(self))  # first: it reads the history that the counters below show
        self._last: LastPass | None = None
        self._lock = threading.Lock()
        self._seen: set[int] = set()
        self._floor = store.last_event()  # counting starts now
        self.pass_seconds = Histogram("rota_control_pass_seconds", "Duration of a control pass",
                                      buckets=PASS_BUCKETS, registry=r)
        self.cycle_seconds = Histogram("rota_scheduling_cycle_seconds",
                                       "Duration of the scheduling cycle of a pass",
                                       buckets=PASS_BUCKETS, registry=r)
        self.store_seconds = Histogram("rota_store_operation_seconds",
                                       "Duration of the store's snapshot read and apply write",
                                       ["operation"], buckets=PASS_BUCKETS, registry=r)
        self.pass_errors = Counter("rota_control_pass_errors",
                                   "Control passes that met an error", registry=r)
        self.start_wait = Histogram("rota_job_start_wait_seconds",
                                    "From a job's submission to its first start",
                                    ["queue"], buckets=WAIT_BUCKETS, registry=r)
        self.preemptions = Counter("rota_preemptions", "Jobs chosen as preemption victims",
                                   ["queue"], registry=r)
        self.requeues = Counter("rota_job_requeues",
                                "Attempts that ended with the job queued again, by how they ended",
                                ["queue", "end"], registry=r)
        self.outcomes = Counter("rota_jobs_ended", "Jobs that reached a final state",
                                ["queue", "state"], registry=r)

    # -- fed by the control loop -------------------------------------------------------------

    def passed(self, snapshot: Snapshot, reasons: Mapping[str, str], seconds: float,
               errors: int) -> None:
        """The end of a pass: what it saw, and how long it took."""
        self._last = LastPass(self.clock(), snapshot, reasons)
        self.pass_seconds.observe(seconds)
        if errors:
            self.pass_errors.inc()

    # -- the jobs' history -------------------------------------------------------------------

    def read_moves(self) -> None:
        """Count the state changes recorded since the last read."""
        with self._lock:
            while True:
                moves = self.store.state_moves(self._floor, MAX_MOVES_READ)
                for m in moves:
                    if m.id not in self._seen:
                        self._seen.add(m.id)
                        self._count(m)
                if moves:
                    top = max(self._seen)
                    self._floor = max(self._floor, top - WINDOW)
                    self._seen = {i for i in self._seen if i > self._floor}
                if len(moves) < MAX_MOVES_READ:
                    return

    def _count(self, m: StateMove) -> None:
        if m.new == "preempting":
            self.preemptions.labels(m.queue).inc()
        elif m.new == "pending" and m.old in HOLDING:
            self.requeues.labels(m.queue, m.end or "unknown").inc()
        elif m.new in TERMINAL:
            self.outcomes.labels(m.queue, m.new).inc()
        if m.new == "running" and m.old == "scheduled" and m.attempt == 0:
            self.start_wait.labels(m.queue).observe(max(0.0, m.time - m.submit_time))

    # -- exposition --------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)


class _Now:
    """The gauges, computed from the last pass and the readings when scraped."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # computed at each scrape; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        m.read_moves()
        now = m.clock()
        expiry = m.lease() if m.lease is not None else None
        held = GaugeMetricFamily("rota_lease_held",
                                 "1 while this control plane holds the database's lease")
        held.add_metric([], 0.0 if expiry is None and m.lease is not None else 1.0)
        yield held
        if expiry is not None:
            left = GaugeMetricFamily("rota_lease_expiry_seconds",
                                     "Seconds until this control plane's lease expires")
            left.add_metric([], max(0.0, expiry - now))
            yield left
        last = m._last
        if last is not None:
            age = GaugeMetricFamily("rota_last_pass_age_seconds",
                                    "Seconds since the last control pass ended")
            age.add_metric([], max(0.0, now - last.at))
            yield age
            yield from _jobs(last)
            yield from _quotas(last.snapshot)
            yield from _allocation(last.snapshot)
        if m.readings is not None:
            yield from _readings(m.readings())
        yield from _budgets(m.store.budget_status(now))


def _jobs(last: LastPass) -> Iterable[Metric]:
    snapshot = last.snapshot
    jobs = GaugeMetricFamily("rota_jobs", "Jobs pending or holding resources, per queue and state",
                             labels=["queue", "state"])
    for (queue, state), n in sorted(Tally((j.queue, str(j.state)) for j in snapshot.jobs).items()):
        jobs.add_metric([queue, state], n)
    yield jobs
    pending = GaugeMetricFamily("rota_pending_jobs",
                                "Pending jobs per queue and the first reason they wait",
                                labels=["queue", "reason"])
    waits = Tally((j.queue, last.reasons.get(j.id, "none")) for j in snapshot.pending)
    for (queue, reason), n in sorted(waits.items()):
        pending.add_metric([queue, reason], n)
    yield pending


_QUOTA_UNITS = (("gpu", "gpus", 1 / MILLI), ("cpu", "cpu_cores", 1 / MILLI),
                ("memory", "memory_bytes", MIB))


def _quotas(snapshot: Snapshot) -> Iterable[Metric]:
    book = QuotaBook(snapshot.queues, snapshot.flavors, snapshot.active)
    for resource, unit, scale in _QUOTA_UNITS:
        families = {kind: GaugeMetricFamily(
            f"rota_queue_{kind}_{unit}", f"{text} per queue and flavour ({resource})",
            labels=["queue", "flavor"]) for kind, text in (
                ("nominal", "Nominal quota"), ("used", "Quota in use"),
                ("borrowed", "Quota in use beyond the nominal, borrowed from the cohort"))}
        for q in snapshot.queues.values():
            for flavor, quota in q.quotas.items():
                nominal = quota.nominal.get(resource)
                used = book.usage.get((q.name, flavor, resource), 0)
                if nominal is not None:
                    families["nominal"].add_metric([q.name, flavor], nominal * scale)
                    families["borrowed"].add_metric([q.name, flavor],
                                                    max(0, used - nominal) * scale)
                families["used"].add_metric([q.name, flavor], used * scale)
        yield from families.values()


def _allocation(snapshot: Snapshot) -> Iterable[Metric]:
    per_queue = GaugeMetricFamily("rota_allocated_gpus",
                                  "GPUs held by jobs per queue and project (fractions by share)",
                                  labels=["queue", "project"])
    shares: dict[tuple[str, int], float] = {}
    memory: dict[tuple[str, int], int] = {}
    by_queue: dict[tuple[str, str], float] = {}
    for job in snapshot.active:
        if job.placement is None:
            continue
        for rep in job.placement.replicas:
            for d in rep.devices:
                key = (rep.node, d.index)
                shares[key] = shares.get(key, 0.0) + d.milli / MILLI
                memory[key] = memory.get(key, 0) + (d.memory_mib or 0)
                held = (job.queue, job.project)
                by_queue[held] = by_queue.get(held, 0.0) + d.milli / MILLI
    for (queue, project), n in sorted(by_queue.items()):
        per_queue.add_metric([queue, project], n)
    yield per_queue
    ratio = GaugeMetricFamily("rota_gpu_allocated_ratio",
                              "Share of a GPU held by rota's jobs (0 to 1)",
                              labels=["node", "gpu", "model"])
    held_memory = GaugeMetricFamily("rota_gpu_memory_allocated_bytes",
                                    "GPU memory granted to rota's jobs on a device",
                                    labels=["node", "gpu"])
    total = GaugeMetricFamily("rota_gpu_memory_bytes", "A device's memory",
                              labels=["node", "gpu", "model"])
    healthy = GaugeMetricFamily("rota_gpu_healthy", "1 when the device is healthy",
                                labels=["node", "gpu"])
    for node in snapshot.nodes:
        for d in node.devices:
            labels = [node.name, str(d.index)]
            ratio.add_metric([*labels, d.model], shares.get((node.name, d.index), 0.0))
            held_memory.add_metric(labels, memory.get((node.name, d.index), 0) * MIB)
            total.add_metric([*labels, d.model], d.memory_mib * MIB)
            healthy.add_metric(labels, 1.0 if d.healthy else 0.0)
    yield from (ratio, held_memory, total, healthy)


def _budgets(budgets: Mapping[str, BudgetStatus]) -> Iterable[Metric]:
    """Projects with a monthly budget: what they used this month (UTC), their limits, and
    whether they are past one (1: past the soft limit, warned; 2: past the hard limit, their new
    jobs wait)."""
    used = GaugeMetricFamily("rota_project_month_gpu_hours",
                             "GPU-hours a project with a budget used this calendar month (UTC)",
                             labels=["project"])
    limit = GaugeMetricFamily("rota_project_budget_gpu_hours",
                              "A project's monthly budget in GPU-hours", labels=["project", "limit"])
    over = GaugeMetricFamily("rota_project_over_budget",
                             "0 within budget, 1 past the soft limit, 2 past the hard limit",
                             labels=["project"])
    for name, status in sorted(budgets.items()):
        used.add_metric([name], status.used_gpu_hours)
        for kind, value in (("soft", status.budget.soft), ("hard", status.budget.hard)):
            if value is not None:
                limit.add_metric([name, kind], value)
        over.add_metric([name], _OVER[status.state])
    yield from (used, limit, over)


_OVER = {BudgetState.OK: 0, BudgetState.SOFT: 1, BudgetState.HARD: 2}


def _readings(readings: list[Reading]) -> Iterable[Metric]:
    util = GaugeMetricFamily("rota_gpu_utilization_ratio",
                             "A device's utilisation as NVML reports it (0 to 1)",
                             labels=["node", "gpu"])
    used = GaugeMetricFamily("rota_gpu_memory_used_bytes",
                             "Device memory in use by every process, as NVML reports it",
                             labels=["node", "gpu"])
    for r in readings:
        if r.util_percent is not None:
            util.add_metric([r.node, str(r.index)], r.util_percent / 100)
        if r.memory_used_mib is not None:
            used.add_metric([r.node, str(r.index)], r.memory_used_mib * MIB)
    yield from (util, used)
