"""Keeping the store's nodes as their backend reports them.

A backend's ``inventory()`` is the truth about its nodes: capacity, devices, labels, what work
outside rota holds there (``Node.foreign``) and why nothing may start there now
(``Node.problem``). ``InventorySync.sync`` asks for it at most every ``period_s`` and writes
only the nodes that changed since the last report, so that a pass over 10,000 unchanged nodes
writes nothing. A node of this backend that is in the store but no longer in the report gets
the problem ``no longer reported by <backend>`` (nothing new is placed there; its running jobs
are the backend's to report on). The operator's cordon, drain and reason are never touched.

A backend that caches datasets on its nodes (``DatasetCaching``: node name to the copies its
cache holds, ``rota.backends.datacache``) has them written with the same report, each node's
only when they changed (``rota.store.datasets``: what ``rota dataset show`` lists).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from rota.backends.base import Backend, DatasetCaching
from rota.core import Node
from rota.core.shortforms import counted
from rota.store import Store
from rota.store.datasets import Cached

log = logging.getLogger("rota.control")


class InventorySync:
    def __init__(self, store: Store, backend: Backend, period_s: float = 10.0) -> None:
        self.store, self.backend, self.period_s = store, backend, period_s
        self._last: dict[str, Node] | None = None  # as last written; None: read the store first
        self._next = float("-inf")
        self._caches: dict[str, list[Cached]] = {}  # per node, as last written

    def sync(self, now: float, force: bool = False) -> list[str]:
        """Write what changed if a report is due (or ``force``: a fault was just seen, so the
        cycle must not place work where it happened); the names of the nodes written."""
        if now < self._next and not force:
            return []
        self._next = now + self.period_s
        if self._last is None:
            self._last = {r.node.name: r.node for r in self.store.node_records()
                          if r.backend == self.backend.name}
        reported = {n.name: n for n in self.backend.inventory()}
        gone = f"no longer reported by {self.backend.name}"
        for name, node in self._last.items():
            if name not in reported:
                reported[name] = node if node.problem == gone else replace(node, problem=gone)
        changed = [n for name, n in reported.items() if self._last.get(name) != n]
        if changed:
            self.store.upsert_nodes(changed, backend=self.backend.name)
            log.info("inventory of %s: %s changed", self.backend.name,
                     counted(len(changed), "node"))
        self._last = reported
        self._sync_caches()
        return [n.name for n in changed]

    def _sync_caches(self) -> None:
        if not isinstance(self.backend, DatasetCaching):
            return
        for node, held in self.backend.dataset_caches().items():
            entries = [Cached(node, h.dataset, h.version, h.bytes, h.last_used) for h in held]
            if self._caches.get(node) != entries:
                self.store.datasets.record_node(node, entries)
                self._caches[node] = entries
