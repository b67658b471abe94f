"""The store's side of a scheduling cycle: the snapshot it reads, the decisions it persists, and
the usage history fair share needs.

``apply`` writes all of one cycle's decisions in the caller's single transaction:

- ``Bind``: PENDING -> SCHEDULED with placement, flavour and ``started_at = now``;
- ``Preempt``: SCHEDULED/RUNNING -> PREEMPTING with ``preempt_deadline = now + grace``
  (a job already PREEMPTING is left as it is);
- ``Reject``: PENDING -> FAILED with the reasons;
- ``Wait``: the latest reasons and estimated start of a PENDING job, for ``rota show``.

A decision about a job that moved on since the snapshot (a pending job cancelled meanwhile, a
victim that already finished) fails ``check_transition`` and is dropped, reported in
``ApplyResult.stale``; the others still apply. Dropping is always safe: a dropped bind only
leaves capacity free, and a preemptor is never bound in the cycle that evicts for it.

Cost per cycle: a snapshot reads the ``(id, version)`` of every live job and builds a core
``Job`` only for rows whose version ``JobCache`` has not seen (a new job, a job that moved);
the cache keeps only the jobs of the latest snapshot. It reads every node row, with its JSON
as stored, and parses them only when one of them differs from the last snapshot's
(``NodeCache``), with what each node's dataset cache holds (``dataset_caches``: a node's
``cache``). The snapshot carries the datasets the pending jobs name. ``apply`` rewrites a
waiting job's reasons only when they changed.

Usage is GPU-seconds per project, decayed with a half-life: stored as (amount, as_of), and
``amount * 0.5 ** ((now - as_of) / half_life)`` at a later ``now``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from sqlalchemy import JSON, Connection, Text, bindparam, cast, func, insert, select, update

from rota.core import ANY_FLAVOR, Flavor, IllegalTransition, Job, JobState, Node, Project
from rota.core import Decisions, Queue, Reason, ReasonCode, Snapshot, Usage
from rota.core.datasets import Dataset, cache_key
from rota.store import accounting, convert
from rota.store import jobs as job_rows
from rota.store import moves
from rota.store.errors import NotFound
from rota.store.records import ApplyResult
from rota.store.schema import (
    attempts, dataset_caches, datasets, flavors, jobs, nodes, projects, queues, usage,
)

LIVE_STATES = tuple(str(s) for s in JobState if s is JobState.PENDING or s.holds_resources)
HOLDING_STATES = tuple(str(s) for s in JobState if s.holds_resources)


# what a core job is made of: every column but the store's own notes
_JOB_COLUMNS = [c for c in jobs.c
                if c.name not in ("wait_reasons", "backend_handle", "nominated")]
_CHUNK = 500  # ids per ``IN`` list


class JobCache:
    """Core jobs by id with the row ``version`` they were built from. Every write to a job row
    bumps its version (``rota.store.moves``), so an equal version is an equal job."""

    def __init__(self) -> None:
        self._jobs: dict[int, tuple[int, Job]] = {}
        self._lock = threading.Lock()

    def live(self, conn: Connection) -> tuple[Job, ...]:
        """The live jobs of this transaction, in id order; reads in full only the rows whose
        version is not cached, and forgets the jobs that are no longer live."""
        versions, known = self._read(conn, LIVE_STATES)
        fresh = {key: known[key] for key, _ in versions}
        with self._lock:
            self._jobs = fresh
        return tuple(job for _, job in fresh.values())

    def holding(self, conn: Connection) -> tuple[Job, ...]:
        """The jobs of this transaction that hold resources, in id order, read as ``live``
        reads them (in full only where the version is not cached) without the pending ones:
        what holds each GPU, for ``rota nodes``, with thousands of jobs waiting. The cache
        keeps the live jobs it has, and gains those read."""
        versions, known = self._read(conn, HOLDING_STATES)
        with self._lock:
            self._jobs.update((key, known[key]) for key, _ in versions)
        return tuple(known[key][1] for key, _ in versions)

    def _read(self, conn: Connection, states: tuple[str, ...]
              ) -> tuple[list[Any], dict[int, tuple[int, Job]]]:
        """The (id, version) of the jobs in ``states``, in id order, and the cached jobs with
        those whose version is not cached read in full."""
        versions = conn.execute(select(jobs.c.id, jobs.c.version)
                                .where(jobs.c.state.in_(states)).order_by(jobs.c.id)).all()
        with self._lock:
            known = dict(self._jobs)
        stale = [key for key, version in versions
                 if key not in known or known[key][0] != version]
        for start in range(0, len(stale), _CHUNK):
            for r in conn.execute(select(*_JOB_COLUMNS)
                                  .where(jobs.c.id.in_(stale[start:start + _CHUNK]))):
                known[r.id] = (r.version, convert.job_from_row(r))
        return versions, known


# every column of a node row, its JSON ones as the text stored: compared before being parsed
_NODE_TEXT = [cast(c, Text).label(c.name) if isinstance(c.type, JSON) else c for c in nodes.c]


class NodeCache:
    """The core nodes of the last snapshot and the rows they were built from, as stored (JSON
    as text): a snapshot whose node rows are all equal to those gets the same tuple of nodes,
    so that nothing is parsed again and a scheduler's base kept between cycles sees the very
    same nodes (``rota.scheduler.base.Base.stands_on``)."""

    def __init__(self) -> None:
        self._rows: list[Any] | None = None
        self._nodes: tuple[Node, ...] = ()
        self._lock = threading.Lock()

    def nodes(self, conn: Connection) -> tuple[Node, ...]:
        rows = [tuple(r) for r in conn.execute(select(*_NODE_TEXT).order_by(nodes.c.name))]
        held = [tuple(r) for r in conn.execute(
            select(dataset_caches.c.node, dataset_caches.c.dataset, dataset_caches.c.version,
                   dataset_caches.c.bytes).order_by(*dataset_caches.primary_key.columns))]
        rows.append(tuple(held))
        with self._lock:
            if rows == self._rows:
                return self._nodes
        caches: dict[str, dict[str, int]] = {}
        for node, name, version, size in held:
            caches.setdefault(node, {})[cache_key(name, version)] = size
        built = tuple(_cached(convert.node_from_row(_parsed(r)), caches) for r in rows[:-1])
        with self._lock:
            self._rows, self._nodes = rows, built
        return built


def _cached(node: Node, caches: dict[str, dict[str, int]]) -> Node:
    held = caches.get(node.name)
    return replace(node, cache=held) if held else node


def _parsed(row: tuple) -> SimpleNamespace:
    """A node row read by ``_NODE_TEXT``, its JSON columns parsed as the JSON type would."""
    return SimpleNamespace(**{c.name: json.loads(v) if isinstance(c.type, JSON) and v is not None
                              else v for c, v in zip(nodes.c, row)})


def snapshot(conn: Connection, cache: JobCache | None = None,
             node_cache: NodeCache | None = None) -> Snapshot:
    """Everything ``run_cycle`` reads, as of this transaction."""
    live = (cache or JobCache()).live(conn)
    return Snapshot(
        nodes=(node_cache or NodeCache()).nodes(conn), queues=_queues(conn), jobs=live,
        projects={r.name: Project(r.name, r.weight)
                  for r in conn.execute(select(projects).order_by(projects.c.name))},
        flavors=_flavors(conn),
        usage=stored_usage(conn),
        nominated=frozenset(str(r.id) for r in conn.execute(
            select(jobs.c.id).where(jobs.c.state == str(JobState.PENDING), jobs.c.nominated))),
        datasets=_named(conn, live),
    )


def _named(conn: Connection, live: tuple[Job, ...]) -> dict[str, Dataset]:
    """The datasets the pending jobs name, by name (read only when some job names one)."""
    names = {n for j in live if j.datasets and j.state is JobState.PENDING for n in j.datasets}
    if not names:
        return {}
    return {r.name: Dataset(r.name, r.project, r.source, r.version, r.size_bytes)
            for r in conn.execute(select(datasets).where(datasets.c.name.in_(sorted(names))))}


def queue_overview(conn: Connection, cache: JobCache | None = None
                   ) -> tuple[Snapshot, dict[str, int]]:
    """What the queues' view reads, as of this transaction: the queues and flavours with only
    the jobs that hold resources (no nodes, projects or usage), and each queue's pending jobs
    counted in the database instead of read (thousands may wait)."""
    pending = {queue: n for queue, n in conn.execute(
        select(jobs.c.queue, func.count()).where(jobs.c.state == str(JobState.PENDING))
        .group_by(jobs.c.queue))}
    return Snapshot(nodes=(), queues=_queues(conn), jobs=(cache or JobCache()).holding(conn),
                    projects={}, flavors=_flavors(conn)), pending


def _queues(conn: Connection) -> dict[str, Queue]:
    return {r.name: convert.queue_from_row(r)
            for r in conn.execute(select(queues).order_by(queues.c.name))}


def _flavors(conn: Connection) -> dict[str, Flavor]:
    """The stored flavours, and the implicit one every queue without flavours uses."""
    found: dict[str, Flavor] = {ANY_FLAVOR: Flavor(ANY_FLAVOR)}
    found.update({r.name: convert.flavor_from_row(r)
                  for r in conn.execute(select(flavors).order_by(flavors.c.name))})
    return found


def stored_usage(conn: Connection) -> dict[str, Usage]:
    return {r.project: Usage(r.gpu_seconds, r.as_of)
            for r in conn.execute(select(usage).order_by(usage.c.project))}


def apply(conn: Connection, decisions: Decisions, now: float) -> ApplyResult:
    ids = {d.job for group in (decisions.binds, decisions.preemptions, decisions.rejects,
                               decisions.waits) for d in group}
    stale: dict[str, str] = {}
    keys = {}
    for job_id in ids:
        try:
            keys[job_id] = job_rows.job_key(job_id)
        except NotFound as exc:
            stale[job_id] = exc.message
    # lock every row this cycle touches, in key order, so concurrent writers cannot deadlock
    rows = {r.id: r for r in conn.execute(
        select(jobs.c.id, jobs.c.state, jobs.c.wait_reasons, jobs.c.estimated_start,
               jobs.c.nominated)
        .where(jobs.c.id.in_(sorted(keys.values()))).order_by(jobs.c.id).with_for_update())}
    stale.update({j: f"no job {j!r}" for j, k in keys.items() if k not in rows})
    done: dict[str, list[str]] = {"bound": [], "preempted": [], "rejected": [], "waiting": []}

    def attempt(job_id: str, outcome: str, new: JobState, message: str,
                data: dict[str, Any], **values: Any) -> None:
        if job_id in stale:
            return
        row = job_rows.get(conn, job_id)
        try:
            moves.move(conn, row, new, now, message, data, **values)
        except IllegalTransition as exc:
            stale[job_id] = exc.message
            return
        done[outcome].append(job_id)

    models = accounting.device_models(  # what each bind holds, per GPU model, in one read
        conn, (r.node for b in decisions.binds if b.placement is not None
               for r in b.placement.replicas))
    binds = decisions.binds
    if _bound(conn, decisions, keys, rows, stale, now, models):  # all at once
        done["bound"].extend(b.job for b in binds)
        binds = []
    for b in binds:
        attempt(b.job, "bound", JobState.SCHEDULED, _bound_to(b),
                {"flavor": b.flavor, "borrowing": b.borrowing, "backfilled": b.backfilled},
                placement=convert.placement_json(b.placement), flavor=b.flavor, started_at=now,
                reason="", nominated=False, models=models)
    for p in decisions.preemptions:
        key = keys.get(p.job)
        if key in rows and rows[key].state == str(JobState.PREEMPTING):
            continue
        attempt(p.job, "preempted", JobState.PREEMPTING, f"preempted ({p.reason}) for job {p.by}",
                {"by": p.by, "reason": p.reason, "grace_s": p.grace_s},
                preempt_deadline=now + p.grace_s, reason=f"preempted ({p.reason}) for job {p.by}")
    for r in decisions.rejects:
        summary = _summary(r.reasons)
        attempt(r.job, "rejected", JobState.FAILED, f"rejected: {summary}",
                {"reasons": convert.reasons_json(r.reasons)},
                reason=f"rejected: {summary}", wait_reasons=convert.reasons_json(r.reasons))
    _write_waits(conn, decisions, keys, rows, stale, done["waiting"])
    return ApplyResult(**{k: tuple(v) for k, v in done.items()}, stale=stale)


def _bound_to(b: Any) -> str:
    nodes_ = ", ".join(dict.fromkeys(r.node for r in b.placement.replicas))
    return f"bound to {nodes_} (flavour {b.flavor})"


def _bound(conn: Connection, decisions: Decisions, keys: dict[str, int], rows: dict[int, Any],
           stale: dict[str, str], now: float, models: Any) -> bool:
    """The cycle's binds written in five statements whatever their number, with the rows,
    events and attempt history that ``moves.move`` writes one by one; False, having written
    nothing, unless there are at least ``BULK_MIN`` binds, of distinct pending jobs."""
    binds = decisions.binds
    if len(binds) < moves.BULK_MIN or any(b.job in stale for b in binds):
        return False
    bound = [keys[b.job] for b in binds]
    if len(set(bound)) != len(bound) or any(rows[k].state != str(JobState.PENDING)
                                            for k in bound):
        return False
    full = {r.id: r for r in conn.execute(select(jobs.c.id, jobs.c.version, jobs.c.attempts)
                                          .where(jobs.c.id.in_(bound)))}
    placements = [convert.placement_json(b.placement) for b in binds]
    return moves.write_many(
        conn, update(jobs).values(updated_at=now, started_at=now, state=str(JobState.SCHEDULED),
                                  placement=bindparam("b_placement"),
                                  flavor=bindparam("b_flavor"), reason="", wait_reasons=None,
                                  estimated_start=None, nominated=False),
        [{"b_id": k, "b_version": full[k].version, "b_placement": p, "b_flavor": b.flavor}
         for k, b, p in zip(bound, binds, placements)],
        [{"job": k, "time": now, "kind": "state", "message": _bound_to(b),
          "data": {"from": str(JobState.PENDING), "to": str(JobState.SCHEDULED),
                   "attempt": full[k].attempts, "flavor": b.flavor,
                   "borrowing": b.borrowing, "backfilled": b.backfilled}}
         for k, b in zip(bound, binds)],
        insert(attempts),
        [{"job": k, "attempt": full[k].attempts, "bound_at": now, "placement": p,
          "reason": "", "gpus": accounting.gpus_by_model(conn, p, models)}
         for k, p in zip(bound, placements)])


_WRITE_WAIT = (update(jobs).where(jobs.c.id == bindparam("key"))
               .values(wait_reasons=bindparam("reasons"), estimated_start=bindparam("start"),
                       nominated=bindparam("nominated")))


def _write_waits(conn: Connection, decisions: Decisions, keys: dict[str, int],
                 rows: dict[int, Any], stale: dict[str, str], waiting: list[str]) -> None:
    """The waits of jobs still pending, in one statement; a wait equal to the stored one is
    not written again. The rows are locked (``apply``), so their states are current, and no
    other decision of the cycle is about a waiting job."""
    params = []
    for w in decisions.waits:
        if w.job in stale:
            continue
        row = rows[keys[w.job]]
        if row.state != str(JobState.PENDING):
            stale[w.job] = "no longer pending"
            continue
        waiting.append(w.job)
        reasons = convert.reasons_json(w.reasons)
        nominated = bool(w.reasons) and w.reasons[0].code is ReasonCode.PREEMPTING
        if row.wait_reasons != reasons or row.estimated_start != w.estimated_start \
                or row.nominated != nominated:
            params.append({"key": row.id, "reasons": reasons, "start": w.estimated_start,
                           "nominated": nominated})
    if params:
        conn.execute(_WRITE_WAIT, params)


def _summary(reasons: tuple[Reason, ...]) -> str:
    return "; ".join(f"{r.code}" + (f" ({r.detail})" if r.detail else "") for r in reasons)


def decayed(amount: float, as_of: float, now: float, half_life_s: float) -> float:
    if now <= as_of:
        return amount
    return amount * 0.5 ** ((now - as_of) / half_life_s)


def add_usage(conn: Connection, project: str, gpu_seconds: float, now: float,
              half_life_s: float) -> Usage:
    """Add ``gpu_seconds`` to the project's usage, decayed to ``max(now, the stored as_of)``
    (a clock that stepped back never un-decays what is stored); returns the new usage."""
    row = conn.execute(select(usage).where(usage.c.project == project).with_for_update()).first()
    if row is None:
        if conn.execute(select(projects.c.name).where(projects.c.name == project)).first() is None:
            raise NotFound("project", project)
        conn.execute(usage.insert().values(project=project, gpu_seconds=gpu_seconds, as_of=now))
        return Usage(gpu_seconds, now)
    as_of = max(now, row.as_of)
    total = decayed(row.gpu_seconds, row.as_of, as_of, half_life_s) + gpu_seconds
    conn.execute(update(usage).where(usage.c.project == project)
                 .values(gpu_seconds=total, as_of=as_of))
    return Usage(total, as_of)
