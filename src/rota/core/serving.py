"""Services: what a model-serving job declares, and how many replicas it should have now.

Vocabulary:
- A **service** serves one or more **models** (the names clients put in a request's ``model``)
  from a command that listens on ``ROTA_PORT`` and answers ``readiness`` (an HTTP path) with
  2xx once it can serve. Its **replicas** are ordinary jobs of kind service, one replica each,
  in the service's queue, under its quota and priority: rota starts one when requests come and
  stops it when they stop.
- **Concurrency** is the number of requests in flight to the service plus those held waiting
  for a replica. ``target`` is the concurrency one replica should carry.
- **Idle**: a service scales down only once the peak concurrency of the last ``idle_s`` seconds
  no longer needs the replicas it has; to ``min`` (zero: none) when no request came for that
  long.
- **Headroom**: up to ``headroom`` replicas more than the peak needs, kept only while traffic
  rises (the need of some sample of the window is above the need of the sample before it), so
  that the next step of a rising load finds a replica loaded; never above ``max``. A service
  is thus charged what its load needs plus at most ``headroom``, never its maximum.
- **Loading**: a replica that runs but has not answered its readiness path yet. It is kept out
  of preemption and of scaling down for at most ``load_s`` seconds after it started running;
  past that it is treated as any other replica that is not ready.

``desired_replicas`` is pure: the serving runtime (``rota.control.serving``) samples the
concurrency, keeps the window of samples, and acts on the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from rota.core.errors import InvalidSpec

MAX_REPLICAS = 64
MAX_MODELS = 16


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """What a service file's ``service`` section declares (``rota.spec.service``)."""

    models: tuple[str, ...]
    port: int | None = None          # None: the backend picks a free port (ROTA_PORT)
    readiness: str = "/health"
    min_replicas: int = 0
    max_replicas: int = 1
    target: int = 4                  # concurrent requests per replica
    idle_s: float = 300.0            # scale down after this long below the need
    queue: int = 100                 # requests held at most while no replica is ready
    timeout_s: float = 300.0         # how long a held request waits for a replica
    headroom: int = 0                # extra replicas kept while traffic rises
    load_s: float = 900.0            # a loading replica is protected this long at most

    def __post_init__(self) -> None:
        if not self.models:
            raise InvalidSpec("service.models", "must name at least one model")
        if not 0 <= self.min_replicas <= self.max_replicas <= MAX_REPLICAS:
            raise InvalidSpec("service.replicas", "needs 0 <= min <= max <= "
                              f"{MAX_REPLICAS}, got min {self.min_replicas}, "
                              f"max {self.max_replicas}")
        if self.max_replicas < 1:
            raise InvalidSpec("service.replicas.max", "must be at least 1")
        if self.target < 1:
            raise InvalidSpec("service.target", "must be at least 1")
        if not 0 <= self.headroom <= self.max_replicas:
            raise InvalidSpec("service.headroom", f"must be between 0 and replicas.max "
                              f"({self.max_replicas}), got {self.headroom}")
        if self.load_s <= 0:
            raise InvalidSpec("service.load", f"must be positive, got {self.load_s:g} s")

    def to_json(self) -> dict[str, object]:
        return {"models": list(self.models), "port": self.port, "readiness": self.readiness,
                "replicas": {"min": self.min_replicas, "max": self.max_replicas},
                "target": self.target, "idle_s": self.idle_s, "queue": self.queue,
                "timeout_s": self.timeout_s, "headroom": self.headroom, "load_s": self.load_s}

    @classmethod
    def from_json(cls, data: dict) -> ServiceSettings:
        replicas = data.get("replicas") or {}
        return cls(models=tuple(data["models"]), port=data.get("port"),
                   readiness=data.get("readiness", "/health"),
                   min_replicas=int(replicas.get("min", 0)),
                   max_replicas=int(replicas.get("max", 1)), target=int(data.get("target", 4)),
                   idle_s=float(data.get("idle_s", 300.0)), queue=int(data.get("queue", 100)),
                   timeout_s=float(data.get("timeout_s", 300.0)),
                   headroom=int(data.get("headroom", 0)),
                   load_s=float(data.get("load_s", 900.0)))


def desired_replicas(settings: ServiceSettings, window: Iterable[int]) -> int:
    """Replicas the service should have, from the concurrency samples of its last ``idle_s``
    seconds, oldest first (the newest included; a sample counts a request that came and went
    between two samples as 1): enough for the peak at ``target`` per replica, plus
    ``headroom`` while traffic rises (module docstring), within ``min`` and ``max``.

    Example: target 4, samples (0, 9, 3): the peak 9 needs ceil(9 / 4) = 3 replicas; the
    need rose (0 -> 3 replicas), so with headroom 1 the service wants 3 + 1 = 4."""
    needs = [math.ceil(c / settings.target) for c in window]
    need = max(needs, default=0)
    if settings.headroom and any(b > a for a, b in zip(needs, needs[1:])):
        need += settings.headroom
    return max(settings.min_replicas, min(settings.max_replicas, need))
