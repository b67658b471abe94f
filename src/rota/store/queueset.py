"""Applying a queues file (``rota queue apply``) in one transaction, and what it leaves open.

Vocabulary:

- An *open unlimited* queue has no quota and admits every project (``queues.projects`` null):
  any member may run any amount of work there, whatever the other queues' quotas say. A
  first ``rota up`` makes one, ``default``, so that a new machine runs jobs at once.
- A queues file *defines quotas* when one of its queues has a quota.
- A queue *retires* from openness: it is deleted when no live job (pending or holding
  resources) holds it, its finished jobs keeping its name; otherwise it is *closed*
  (``projects`` ``[]``): it admits no new job, and its live jobs stay, keep their place and
  run as before, until ``rota queue delete`` removes it once they have finished.

Rules:

- The file's flavours and queues are created or replaced; a queue it does not list stays as it
  is, except that a file that defines quotas retires every open unlimited queue it does not
  list. A file that lists one (no ``quota``, no ``projects``) keeps it open on purpose; a file
  that defines no quota retires nothing.
- A queue that a model service submits its replicas to is never retired: its replicas would be
  refused. The whole file is refused instead (``queue_in_use``), naming the services; nothing
  is written.
- Queue rows are locked before the jobs of a retiring queue are counted, so a submit to it
  either commits first (and is counted) or then finds the queue deleted or closed.
- After writing, each project's *default queue* (where a job that names none goes,
  ``rota.core.queues.chosen_queue``) is read in the same transaction, with the queues it may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, delete, select, update

from rota.core import Flavor, Queue
from rota.core.queues import chosen_queue, usable_queues
from rota.store import admin, convert
from rota.store.errors import InUse
from rota.store.schema import idle_policies, jobs, projects, queues, services

DELETED, CLOSED, KEPT = "deleted", "closed", "kept"
# why: the file lists the queue (so it stays open), defines no quota (nothing is retired), or
# defines quotas and leaves it out (deleted, or closed while it holds live jobs)
LISTED, NO_QUOTAS, NOT_LISTED = "listed", "no_quotas", "not_listed"


@dataclass(frozen=True, slots=True)
class OpenQueue:
    """What an apply did with a queue that was, or is now, open unlimited: ``action``
    (deleted, closed, kept), ``why`` (listed, no_quotas, not_listed) and its live jobs per
    state (those of a closed queue, which stay)."""

    name: str
    action: str
    why: str
    jobs: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class DefaultQueue:
    """Where a job of ``project`` that names no queue goes (None: it must name one of
    ``usable``, or, with ``usable`` empty, no queue admits the project)."""

    project: str
    queue: str | None
    usable: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueSetApplied:
    flavors: tuple[str, ...]
    queues: tuple[str, ...]
    open_unlimited: tuple[OpenQueue, ...]
    defaults: tuple[DefaultQueue, ...]


def apply(conn: Connection, flavors: Iterable[Flavor],
          listed: Mapping[str, tuple[Queue, admin.Binding]],
          idle: Mapping[str, dict[str, Any] | None],
          slurm: Mapping[str, Mapping[str, Any] | None] | None = None) -> QueueSetApplied:
    """Write ``flavors``, the ``listed`` queues with their bindings and batch options
    (``slurm``: queue -> stored ``rota.core.batchopts.QueueBatch``, None: none) and the
    ``idle`` defaults (scope -> policy, None: removed), retiring open unlimited queues as the
    module says."""
    flavors = list(flavors)
    defines_quotas = any(not queue.unlimited for queue, _ in listed.values())
    unlisted = [name for name in _open_unlimited(conn) if name not in listed]
    retiring = unlisted if defines_quotas else []
    _refuse_served(conn, retiring)
    for flavor in flavors:
        admin.put_flavor(conn, flavor)
    for queue, binding in listed.values():
        admin.put_queue(conn, queue, binding, (slurm or {}).get(queue.name))
    for scope, policy in idle.items():
        admin.put_idle(conn, scope, policy)
    report = [_retire(conn, name) for name in retiring]
    report += [OpenQueue(name, KEPT, NO_QUOTAS, {}) for name in unlisted if not defines_quotas]
    report += [OpenQueue(name, KEPT, LISTED, {}) for name, (queue, binding) in listed.items()
               if queue.unlimited and binding is None]
    return QueueSetApplied(tuple(sorted(f.name for f in flavors)), tuple(sorted(listed)),
                           tuple(sorted(report, key=lambda o: o.name)), default_queues(conn))


def default_queues(conn: Connection) -> tuple[DefaultQueue, ...]:
    """Every project's default queue and the queues it may use, by project name."""
    bound = dict(sorted(admin.bindings(conn).items()))
    out = []
    for project in conn.execute(select(projects.c.name).order_by(projects.c.name)).scalars():
        usable = usable_queues(bound, project)
        out.append(DefaultQueue(project, chosen_queue(usable), tuple(usable)))
    return tuple(out)


def _open_unlimited(conn: Connection) -> list[str]:
    # locked: a submit to one waits (FOR SHARE) until this commits; JSON null is not SQL NULL
    rows = conn.execute(select(queues).order_by(queues.c.name).with_for_update())
    return [row.name for row in rows
            if row.projects is None and convert.queue_from_row(row).unlimited]


def _refuse_served(conn: Connection, names: list[str]) -> None:
    if not names:
        return
    rows = conn.execute(select(services.c.name, services.c.queue)
                        .where(services.c.queue.in_(names)).order_by(services.c.name)).all()
    if not rows:
        return
    served = sorted({queue for _, queue in rows})
    one, alone = len(served) == 1, len(rows) == 1
    raise InUse("queue_in_use", f"{'queue' if one else 'queues'} {', '.join(served)} "
                f"{'has' if one else 'have'} no quota and {'admits' if one else 'admit'} every "
                "project, so this file, which defines quotas and leaves "
                f"{'it' if one else 'them'} out, would delete or close {'it' if one else 'them'};"
                f" but {'service' if alone else 'services'} "
                f"{', '.join(f'{name} (queue {queue})' for name, queue in rows)} "
                f"{'starts its' if alone else 'start their'} replicas there: list "
                f"{'the queue' if one else 'the queues'} in the file (with a quota or projects:), or "
                "move the services to another queue (rota services delete NAME, then rota serve "
                "FILE --queue Q), and apply again; nothing was applied",
                {"services": len(rows)})


def _retire(conn: Connection, name: str) -> OpenQueue:
    live = admin.live_counts(conn, jobs.c.queue, name)
    if live:
        conn.execute(update(queues).where(queues.c.name == name).values(projects=[]))
        return OpenQueue(name, CLOSED, NOT_LISTED, live)
    conn.execute(delete(queues).where(queues.c.name == name))
    conn.execute(delete(idle_policies).where(idle_policies.c.scope == name))
    return OpenQueue(name, DELETED, NOT_LISTED, {})
