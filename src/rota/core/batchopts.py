"""Where a job runs inside a batch system's own accounting: its partition, QOS, reservation
and node constraint, chosen by its queue and, where the queue allows it, by the job.

A backend that submits to a batch system (Slurm: ``--partition``, ``--qos``,
``--reservation``, ``--constraint``) acts on them; the others ignore them. A job with a
partition is placed only on that partition's nodes: it carries the selector
``partition_label(name): "true"``, the label such a backend gives each node of the partition.

- A queue's ``QueueBatch``: ``partition`` and ``qos`` for every job of the queue, and what a
  job may choose instead (``allow``): the partitions, QOS and reservations it lists, and a
  constraint of the job's own when ``allow_constraint`` is set. The queue's own partition and
  QOS are always allowed.
- A job's options (``KEYS``, each a string): what it asks for; ``resolve`` checks them
  against its queue when the job is submitted and returns what the job runs with, the queue's
  partition and QOS filling what the job leaves out. A queue may change later: jobs accepted
  before keep what they were submitted with.

Rules, each refusal an ``InvalidSpec`` naming its field: a partition, QOS or reservation is a
name (letters, digits, ``_``, ``.``, ``-``; a letter or digit first; at most 64 characters); a
constraint is a feature expression (letters, digits and ``_ . & | , * [ ] ( ) : -``, not
starting with ``-``; at most 256 characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from rota.core.errors import InvalidSpec

KEYS = ("partition", "qos", "reservation", "constraint")
NAMES = ("partition", "qos", "reservation")  # the keys that are names, listed by ``allow``
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_CONSTRAINT = re.compile(r"^[A-Za-z0-9_.&|,*\[\]():][A-Za-z0-9_.&|,*\[\]():-]{0,255}$")


def partition_label(partition: str) -> str:
    """The label of the nodes of ``partition`` (``slurm.partition.<name>``, value ``true``)."""
    return f"slurm.partition.{partition}"


def check_name(value: object, field: str) -> str:
    """``value`` as a name in the batch system (a partition, QOS, reservation, account)."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidSpec(field, "expected a name of letters, digits, _, . and - (at most 64), "
                          f"got {value!r}")
    return value


def check_value(key: str, value: object, field: str) -> str:
    """``value`` as option ``key`` (``KEYS``), or ``InvalidSpec`` on ``field``."""
    if key not in KEYS:
        raise InvalidSpec(field, f"unknown key; known: {', '.join(KEYS)}")
    if key != "constraint":
        return check_name(value, field)
    if not isinstance(value, str) or not _CONSTRAINT.match(value):
        raise InvalidSpec(field, "expected a node feature expression such as a100&ib, got "
                          f"{value!r}")
    return value


def read_options(value: object, where: str) -> dict[str, str]:
    """A job's options from a stored or submitted mapping (None: none)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidSpec(where, f"must be a mapping of {', '.join(KEYS)}, got {value!r}")
    return {str(k): check_value(str(k), v, f"{where}.{k}") for k, v in value.items()
            if v is not None}


@dataclass(frozen=True, slots=True)
class QueueBatch:
    """A queue's batch options: its partition and QOS, and what its jobs may choose."""

    partition: str | None = None
    qos: str | None = None
    allow_partition: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ()
    allow_reservation: tuple[str, ...] = ()
    allow_constraint: bool = False

    def __post_init__(self) -> None:
        for key in ("partition", "qos"):
            if getattr(self, key) is not None:
                check_value(key, getattr(self, key), key)
        for key in NAMES:
            for k, name in enumerate(getattr(self, f"allow_{key}")):
                check_value(key, name, f"allow.{key}[{k}]")

    def allowed(self, key: str) -> tuple[str, ...]:
        """The names of ``key`` a job may choose: the listed ones and the queue's own."""
        own = getattr(self, key, None) if key in ("partition", "qos") else None
        return tuple(dict.fromkeys([*([own] if own else []), *getattr(self, f"allow_{key}")]))

    def stored(self) -> dict[str, Any]:
        return {"partition": self.partition, "qos": self.qos,
                "allow": {"partition": list(self.allow_partition), "qos": list(self.allow_qos),
                          "reservation": list(self.allow_reservation),
                          "constraint": self.allow_constraint}}

    @classmethod
    def read(cls, stored: Mapping[str, Any] | None) -> QueueBatch | None:
        if stored is None:
            return None
        allow = stored.get("allow") or {}
        return cls(stored.get("partition"), stored.get("qos"),
                   tuple(allow.get("partition", ())), tuple(allow.get("qos", ())),
                   tuple(allow.get("reservation", ())), bool(allow.get("constraint", False)))


def resolve(queue_name: str, queue: QueueBatch | None, asked: Mapping[str, str],
            where: str = "slurm") -> dict[str, str]:
    """What a job of ``queue_name`` that asks for ``asked`` runs with: each option it asks
    for checked against the queue (refused with ``InvalidSpec`` on ``where.<key>``), then the
    queue's partition and QOS for those it leaves out."""
    queue = queue or QueueBatch()
    for key, value in asked.items():
        field = f"{where}.{key}"
        check_value(key, value, field)
        if key == "constraint":
            if not queue.allow_constraint:
                raise InvalidSpec(field, f"queue {queue_name} does not let its jobs choose a "
                                  "node constraint (its slurm.allow.constraint is not set)")
            continue
        allowed = queue.allowed(key)
        if value not in allowed:
            choices = (f"lets its jobs choose only {', '.join(allowed)}" if allowed
                       else f"lets its jobs choose none (its slurm.allow.{key} is empty)")
            raise InvalidSpec(field, f"{value!r} is not allowed: queue {queue_name} {choices}")
    out = {k: v for k, v in (("partition", queue.partition), ("qos", queue.qos)) if v}
    out.update(asked)
    return {k: out[k] for k in KEYS if k in out}
