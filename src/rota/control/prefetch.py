"""Prefetch: filling a node's dataset cache before a pending job that reads datasets starts,
so that its launch finds the copies there and starts at once.

Which jobs (``Prefetcher.consider``, after each pass's cycle): the pending jobs that name
datasets and hold a backfill reservation (``Reserve``: copied into the caches of the nodes
reserved for them), then those with an estimated start (the cycle's, or the start forecast's:
``rota.control.forecasts``), earliest first, where the backend caches datasets on one node
only (the local backend's machine: the job can start nowhere else), at most ``per_round`` of
them at a time, among the first ``look_ahead`` in that order (what each names is read from the
store once per job, so a pass with many waiting jobs costs no more than that). Each copy is
checked against its project's quota on cached bytes for the node it goes to, as a launch's is
(``Datasets.for_launch``). A job is prefetched once while it waits (again only if its
datasets change); a round runs on a thread of its own, one round at a time, so that no pass
waits for a copy.

A copy is made as a launch makes it (``DatasetPrefetching.prefetch``): at the cache's
bandwidth bound, crash-safe, evicting what a launch would evict but never what running jobs
read. A launch that needs a copy a prefetch is making waits for it; one that finds it complete
starts at once. A prefetch that fails (the cache full of what running jobs read, the source
unreadable, the dataset over its project's quota) is logged and left: the launch copies, or
fails, as without prefetch.

Only a backend that implements ``DatasetPrefetching`` is prefetched for (the local backend).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Sequence

from rota.backends.base import Backend, DatasetCaching, DatasetPrefetching
from rota.core import InvalidSpec, JobState
from rota.core.datasets import check_names
from rota.core.decisions import Reserve, Wait
from rota.store import Store

log = logging.getLogger("rota.control")


@dataclass(frozen=True, slots=True)
class Planned:
    """One job's datasets to copy, into the caches of ``nodes``."""

    job: str
    names: tuple[str, ...]
    nodes: tuple[str, ...]


class Prefetcher:
    def __init__(self, store: Store, backend: Backend, per_round: int = 2,
                 look_ahead: int = 32) -> None:
        self.store, self.per_round, self.look_ahead = store, per_round, look_ahead
        self.backend = backend if isinstance(backend, DatasetPrefetching) else None
        self.done: dict[str, tuple[str, ...]] = {}  # job -> the datasets prefetched for it
        self._names: dict[str, tuple[str, ...]] = {}  # job -> the datasets it names
        self._round: threading.Thread | None = None
        self._only: str | None = None  # the backend's one node ("": not one), once asked

    def consider(self, reservations: Sequence[Reserve], waits: Sequence[Wait]) -> None:
        """Start a round for the jobs that should be prefetched for now (module docstring),
        unless one runs."""
        if self.backend is None or (self._round is not None and self._round.is_alive()):
            return
        waiting = {w.job for w in waits} | {r.job for r in reservations}
        self.done = {j: names for j, names in self.done.items() if j in waiting}
        self._names = {j: names for j, names in self._names.items() if j in waiting}
        try:
            plan = self._plan(reservations, waits)
        except Exception:  # a prefetch is an optimisation: it must never cost a pass
            log.exception("choosing the datasets to prefetch failed")
            return
        if not plan:
            return
        for p in plan:
            self.done[p.job] = p.names
        self._round = threading.Thread(target=self._fill, args=(plan,), name="rota-prefetch",
                                       daemon=True)
        self._round.start()

    def wait(self, timeout: float | None = None) -> None:
        """Until the round under way (if any) has ended, or ``timeout`` seconds."""
        if self._round is not None:
            self._round.join(timeout)

    def _plan(self, reservations: Sequence[Reserve], waits: Sequence[Wait]) -> list[Planned]:
        order: dict[str, tuple[str, ...]] = {}  # job -> nodes, in the order of preference
        for r in sorted(reservations, key=lambda r: (r.start_at, r.job)):
            order.setdefault(r.job, tuple(sorted({p.node for p in r.placement.replicas})))
        timed = [w for w in waits if w.estimated_start is not None]
        only = self._only_node() if timed else None
        timed = timed if only is not None else []
        for w in sorted(timed, key=lambda w: (w.estimated_start, w.job)):
            order.setdefault(w.job, (only,))
        ahead = list(order)[:self.look_ahead]  # later starts have time for their copies
        names = self._names_of(ahead)
        plan = []
        for job in ahead:
            if names.get(job) and self.done.get(job) != names[job]:
                plan.append(Planned(job, names[job], order[job]))
            if len(plan) >= self.per_round:
                break
        return plan

    def _names_of(self, jobs: list[str]) -> dict[str, tuple[str, ...]]:
        """The datasets each of ``jobs`` names (none for a job that no longer waits), read
        from the store once per job: a job's ``run`` never changes."""
        unknown = [j for j in jobs if j not in self._names]
        for rec in self.store.get_jobs(unknown) if unknown else ():
            try:
                found = check_names(rec.run.get("datasets"), "run.datasets")
            except InvalidSpec:  # its launch says why
                found = ()
            self._names[rec.id] = found if rec.state is JobState.PENDING else ()
        return {j: self._names.get(j, ()) for j in jobs}

    def _only_node(self) -> str | None:
        """The one node whose cache the backend fills, if it has only one (asked once)."""
        if self._only is None:
            nodes = (list(self.backend.dataset_caches())
                     if isinstance(self.backend, DatasetCaching) else [])
            self._only = nodes[0] if len(nodes) == 1 else ""
        return self._only or None

    def _fill(self, plan: list[Planned]) -> None:
        assert self.backend is not None
        for p in plan:
            try:
                found, wanted = self.store.datasets.for_launch(p.names, p.nodes)
                for node in p.nodes:
                    self.backend.prefetch(node, found, wanted)
                log.info("job %s: datasets %s prefetched", p.job, ", ".join(p.names))
            except Exception as exc:  # the launch copies, or fails saying why
                log.warning("job %s: prefetching datasets %s failed: %s", p.job,
                            ", ".join(p.names), exc)
