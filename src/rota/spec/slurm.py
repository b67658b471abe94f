"""The ``slurm`` sections of a queue (in a queues or cluster file) and of a job file: where the
queue's jobs run in the batch system's accounting, and what a job may choose there
(``rota.core.batchopts`` holds the rules; a backend that submits to no batch system ignores
them)::

    queues:
      - name: research
        slurm:
          partition: gpu            # every job of the queue, unless it chooses another
          qos: normal
          allow:                    # what a job may choose in its own slurm: section
            partition: [gpu, debug]
            qos: [normal, long]
            reservation: [maint]
            constraint: true        # a node feature expression of the job's own

    # a job file
    slurm: {partition: debug, qos: long, reservation: maint, constraint: "a100&ib"}
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from rota.core import InvalidSpec
from rota.core.batchopts import QueueBatch, check_value
from rota.spec.errors import reason_error
from rota.spec.types import Strict


def _checked(key: str, value: Any) -> Any:
    try:
        return check_value(key, value, key)
    except InvalidSpec as exc:
        raise reason_error(exc.reason) from None


class SlurmAllowSpec(Strict):
    partition: list[str] = Field(default_factory=list, max_length=1000)
    qos: list[str] = Field(default_factory=list, max_length=1000)
    reservation: list[str] = Field(default_factory=list, max_length=1000)
    constraint: bool = False

    @field_validator("partition", "qos", "reservation")
    @classmethod
    def _names(cls, value: list[str], info: Any) -> list[str]:
        for k, name in enumerate(value):
            try:
                check_value(info.field_name, name, str(k))
            except InvalidSpec as exc:
                raise reason_error(exc.reason, str(k)) from None
        return value


class SlurmQueueSpec(Strict):
    partition: str | None = None
    qos: str | None = None
    allow: SlurmAllowSpec = SlurmAllowSpec()

    @field_validator("partition", "qos")
    @classmethod
    def _name(cls, value: str | None, info: Any) -> str | None:
        return None if value is None else _checked(info.field_name, value)

    def batch(self) -> QueueBatch:
        return QueueBatch(self.partition, self.qos, tuple(self.allow.partition),
                          tuple(self.allow.qos), tuple(self.allow.reservation),
                          self.allow.constraint)


class SlurmJobSpec(Strict):
    partition: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None

    @field_validator("partition", "qos", "reservation", "constraint")
    @classmethod
    def _value(cls, value: str | None, info: Any) -> str | None:
        return None if value is None else _checked(info.field_name, value)

    def options(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v is not None}
