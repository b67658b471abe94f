"""The ``service`` section of a job file of kind service (``rota.core.serving``)::

    service:
      models: [tiny]            # the names clients ask for in a request's "model"
      port: 8000                # optional: the port the command listens on; left out, rota
                                # picks one free on the replica's host and passes ROTA_PORT
      readiness: /health        # answers 2xx once the replica can serve
      replicas: {min: 0, max: 2}
      target: 4                 # concurrent requests per replica before another is added
      idle: 5m                  # below the need this long: scale down (to min)
      queue: 100                # requests held at most while no replica is ready
      timeout: 5m               # how long a held request waits, then 503 with Retry-After
      headroom: 1               # extra replicas kept while traffic rises (default 0)
      load: 15m                 # a replica not ready yet is protected this long at most
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from rota.core import InvalidSpec
from rota.core.serving import MAX_MODELS, MAX_REPLICAS, ServiceSettings
from rota.spec.errors import reason_error
from rota.spec.types import Duration, PositiveDuration, Strict

_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$")
_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]{0,1023}$")


class ReplicaRange(Strict):
    min: int = Field(0, ge=0, le=MAX_REPLICAS)
    max: int = Field(1, ge=1, le=MAX_REPLICAS)

    @model_validator(mode="after")
    def _ordered(self) -> ReplicaRange:
        if self.min > self.max:
            raise reason_error(f"is {self.min}, more than max ({self.max})", "min")
        return self


class ServiceSpec(Strict):
    models: list[str] = Field(min_length=1, max_length=MAX_MODELS)
    port: int | None = Field(None, ge=1, le=65535)
    readiness: str = "/health"
    replicas: ReplicaRange = ReplicaRange()
    target: int = Field(4, ge=1, le=10_000)
    idle: PositiveDuration = 300.0
    queue: int = Field(100, ge=0, le=100_000)
    timeout: Duration = Field(300.0, ge=0, le=3600)
    headroom: int = Field(0, ge=0, le=MAX_REPLICAS)
    load: PositiveDuration = 900.0

    @model_validator(mode="after")
    def _headroom(self) -> ServiceSpec:
        if self.headroom > self.replicas.max:
            raise reason_error(f"is {self.headroom}, more than replicas.max "
                               f"({self.replicas.max})", "headroom")
        return self

    @field_validator("models")
    @classmethod
    def _models(cls, models: list[str]) -> list[str]:
        for k, name in enumerate(models):
            if not _MODEL.match(name):
                raise reason_error(f"{name!r} is not a model name (letters, digits and "
                                   "._:/@-, at most 128)", str(k))
        if len(set(models)) != len(models):
            raise reason_error("names a model twice")
        return models

    @field_validator("readiness")
    @classmethod
    def _readiness(cls, path: str) -> str:
        if not _PATH.match(path):
            raise reason_error(f"must be an absolute URL path such as /health, got {path!r}")
        return path

    def settings(self) -> ServiceSettings:
        try:
            return ServiceSettings(tuple(self.models), self.port, self.readiness,
                                   self.replicas.min, self.replicas.max, self.target, self.idle,
                                   self.queue, self.timeout, self.headroom, self.load)
        except InvalidSpec as exc:  # pragma: no cover - the fields above are checked first
            raise reason_error(exc.reason, exc.field.removeprefix("service.")) from None
