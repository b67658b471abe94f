"""What the serving runtime (``rota.control.serving``) knows of each service and replica
beyond the store, and the rules it reads them by.

Vocabulary (``rota.core.serving`` has the service's own):
- a replica is **ready** once its readiness path answered 2xx; it is then probed again every
  ``REPROBE_S``;
- a replica is **loading** while its job runs and it is not ready yet, for at most the
  service's ``load_s`` after the job started running (a server that never answers is not
  protected for ever);
- a replica is **draining** once chosen to stop: it gets no new request, and is cancelled.

Protection of a replica that loads: the runtime keeps each live replica job's
``preemptible`` (``Store.services.protect``) equal to ``wanted_preemptible``: False from its
submission until it is ready (or its load time is over), then what the service's template
says. The scheduler reads that field as it reads any job's, so a loading replica is never a
preemption victim; and the runtime never picks a loading replica to scale in
(``scale_in_victims``).
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rota.core import JobState
from rota.store import JobRecord
from rota.store.services import ServiceRecord

PROBE_TIMEOUT_S = 2.0
REPROBE_S = 10.0        # a ready replica is probed again this often
RATE_WINDOW_S = 10.0    # requests per second are counted over this long


@dataclass(slots=True)
class Replica:
    job_id: str
    record: JobRecord
    endpoint: str | None = None
    ready: bool = False
    probed_at: float = 0.0
    in_flight: int = 0
    draining: bool = False
    loading: bool = False  # running, not ready yet, within its service's ``load_s``


@dataclass(slots=True)
class ServiceState:
    record: ServiceRecord
    replicas: dict[str, Replica] = field(default_factory=dict)
    in_flight: int = 0
    waiting: list[asyncio.Future] = field(default_factory=list)
    arrivals: int = 0                      # since the last sample
    samples: deque = field(default_factory=deque)  # (time, concurrency)
    arrived_at: deque = field(default_factory=deque)  # request times within RATE_WINDOW_S
    requests: int = 0
    cold_starts: int = 0
    failures: int = 0                      # replicas in a row that failed
    backoff_until: float = 0.0
    desired: int = 0
    cold_since: float | None = None        # a request waits with no replica ready
    cold_running_at: float | None = None   # ... and since then a replica runs
    last_cold_start: dict[str, float] | None = None
    known_since: float = 0.0               # when this runtime first knew of the service
    last_failure: str = ""                 # how the last replica that failed ended

    @property
    def name(self) -> str:
        return self.record.name

    def view(self, now: float) -> dict[str, Any]:
        live = [r for r in self.replicas.values() if not r.draining]
        s = self.record.settings
        return {
            "name": self.name, "project": self.record.project, "queue": self.record.queue,
            "user": self.record.user, "models": list(s.models),
            "replicas": {"min": s.min_replicas, "max": s.max_replicas, "desired": self.desired,
                         "live": len(live), "ready": sum(r.ready for r in live)},
            "target": s.target, "idle_s": s.idle_s, "headroom": s.headroom,
            "load_s": s.load_s, "in_flight": self.in_flight,
            "queued": len(self.waiting), "requests": self.requests,
            "requests_per_s": round(sum(1 for t in self.arrived_at if t > now - RATE_WINDOW_S)
                                    / RATE_WINDOW_S, 3),
            "cold_starts": self.cold_starts, "last_cold_start": self.last_cold_start,
            "jobs": [{"id": r.job_id, "state": str(r.record.state), "ready": r.ready,
                      "loading": r.loading, "endpoint": r.endpoint, "in_flight": r.in_flight,
                      "draining": r.draining}
                     for r in self.replicas.values()],
        }


def http_probe(endpoint: str, path: str) -> bool:
    """Whether ``GET http://endpoint/path`` answers 2xx within ``PROBE_TIMEOUT_S``."""
    try:
        with urllib.request.urlopen(f"http://{endpoint}{path}", timeout=PROBE_TIMEOUT_S) as r:
            return 200 <= r.status < 300
    except (OSError, ValueError):
        return False


def is_loading(replica: Replica, load_s: float, wall_now: float) -> bool:
    """Running, not ready, and started running less than ``load_s`` ago (store time)."""
    rec = replica.record
    return (rec.state is JobState.RUNNING and not replica.ready
            and (rec.job.started_at is None or wall_now - rec.job.started_at < load_s))


def wanted_preemptible(svc: ServiceState, replica: Replica) -> bool | None:
    """What the replica job's ``preemptible`` should be now (module docstring), or None when
    it is not to be changed (a job being stopped or ended)."""
    rec = replica.record
    if rec.cancel_requested or rec.state not in (JobState.PENDING, JobState.SCHEDULED,
                                                 JobState.RUNNING):
        return None
    mine = svc.record.template.preemptible
    if rec.state is not JobState.RUNNING:
        return False  # it loads once it runs
    return mine and not replica.loading


def fewest_in_flight(svc: ServiceState) -> Replica | None:
    ready = [r for r in svc.replicas.values() if r.ready and not r.draining]
    return min(ready, key=lambda r: r.in_flight, default=None)


def scale_in_victims(live: list[Replica], count: int) -> list[Replica]:
    """The ``count`` replicas to stop first: not yet running, then those whose load time is
    over without becoming ready, then the idle ready ones; a replica with requests in flight,
    or loading, is never stopped."""
    if count <= 0:
        return []
    order = sorted((r for r in live if r.in_flight == 0 and not r.loading),
                   key=lambda r: (r.record.state is JobState.RUNNING, r.ready,
                                  -int(r.job_id) if r.job_id.isdigit() else 0))
    return order[:count]
