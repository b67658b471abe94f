"""``Inventory``: the ``Store``'s flavours, queues, idle reclamation defaults and nodes.

Each method is one transaction (``rota.store.transactions``) around the SQL in
``rota.store.admin`` (and ``rota.store.queueset`` for a whole queues file at once).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rota.core import Flavor, Node, Queue
from rota.store import admin, queueset
from rota.store.transactions import Transactions


class Inventory(Transactions):
    """What the cluster offers: configuration an operator writes, and nodes backends report."""

    def put_flavor(self, flavor: Flavor) -> None:
        with self._write() as conn:
            admin.put_flavor(conn, flavor)

    def list_flavors(self) -> list[Flavor]:
        with self._read() as conn:
            return admin.list_flavors(conn)

    def put_queue(self, queue: Queue, projects: tuple[str, ...] | None = None) -> None:
        """Create or replace ``queue``, admitting the jobs of ``projects`` (None: every one)."""
        with self._write() as conn:
            admin.put_queue(conn, queue, projects)

    def apply_queue_set(self, flavors: Iterable[Flavor],
                        listed: Mapping[str, tuple[Queue, tuple[str, ...] | None]],
                        idle: Mapping[str, dict[str, Any] | None],
                        slurm: Mapping[str, Mapping[str, Any] | None] | None = None,
                        ) -> queueset.QueueSetApplied:
        """A queues file's flavours, queues (name -> queue and binding, with its batch options
        in ``slurm``) and idle defaults in one transaction; open unlimited queues it leaves
        out retire (``rota.store.queueset``)."""
        with self._write() as conn:
            return queueset.apply(conn, flavors, listed, idle, slurm)

    def bindings(self) -> dict[str, tuple[str, ...] | None]:
        """The projects each queue admits (None: every project); see ``rota.store.admin``."""
        with self._read() as conn:
            return admin.bindings(conn)

    def put_idle(self, scope: str, policy: dict[str, Any] | None) -> None:
        """Idle reclamation defaults of queue ``scope``, or of every queue (``*``)."""
        with self._write() as conn:
            admin.put_idle(conn, scope, policy)

    def queue_batches(self) -> dict[str, dict[str, Any]]:
        """Each queue with a ``slurm`` section -> its batch options, as stored."""
        with self._read() as conn:
            return admin.queue_batches(conn)

    def idle_defaults(self) -> dict[str, dict[str, Any]]:
        """scope (a queue, or ``*``) -> its idle reclamation defaults, as stored."""
        with self._read() as conn:
            return admin.idle_defaults(conn)

    def delete_queue(self, name: str) -> None:
        """Refused with ``InUse`` while the queue holds live jobs (``rota.store.admin``)."""
        with self._write() as conn:
            admin.delete_queue(conn, name)

    def delete_project(self, name: str) -> list[str]:
        """Refused with ``InUse`` while the project has jobs; returns the queues it was
        removed from."""
        with self._auth_write() as conn:
            return admin.delete_project(conn, name)

    def get_queue(self, name: str) -> Queue:
        with self._read() as conn:
            return admin.get_queue(conn, name)

    def list_queues(self) -> list[Queue]:
        with self._read() as conn:
            return admin.list_queues(conn)

    def upsert_nodes(self, inventory: Iterable[Node], backend: str) -> None:
        with self._write() as conn:
            admin.upsert_nodes(conn, inventory, backend, self.clock())

    def set_schedulable(self, node: str, schedulable: bool) -> None:
        with self._write() as conn:
            admin.set_schedulable(conn, node, schedulable)

    def list_nodes(self) -> list[tuple[Node, str, float]]:
        with self._read() as conn:
            return admin.list_nodes(conn)

    def node_records(self) -> list[admin.NodeRecord]:
        with self._read() as conn:
            return admin.node_records(conn)

    def set_node(self, node: str, schedulable: bool, drain: bool = False, reason: str = "",
                 evict_by: str | None = None) -> tuple[list[str], list[str]]:
        """Cordon, drain or resume a node (``rota.store.admin.set_node``); with ``evict_by``
        the jobs holding resources there are evicted in the same transaction. Returns
        (evicted, kept) job ids."""
        with self._write() as conn:
            admin.set_node(conn, node, schedulable, drain, reason)
            if evict_by is None:
                return [], []
            return admin.evict(conn, node, evict_by, self.clock())
