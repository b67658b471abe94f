"""The serving runtime: services' replicas started on demand and stopped when idle, and the
choice of a ready replica for each request the gateway (``rota.api.gateway``) passes on.

It lives in the control plane's process, between two threads:
- the **gateway** (the API's event loop) asks ``acquire(service)`` for a ready replica with the
  fewest requests in flight, and gives it back with ``release``; with none ready, the request
  waits (at most ``queue`` of them, each at most ``timeout_s``), and the runtime is woken at once
  to start one;
- the runtime's own thread (``tick``, every ``tick_s``; every ``IDLE_TICK_S`` while there is no
  service, since creating one through the API kicks it) reads the services and their replica jobs
  from the store, asks the backend where each running replica listens (``Backend.endpoint``),
  probes its readiness path, keeps the replicas that load out of preemption
  (``rota.control.replicas``), samples each service's concurrency (in flight + waiting),
  decides the replicas it should have (``rota.core.serving.desired_replicas``), and submits or
  cancels replica jobs through the store like any job, waking the control loop: a replica is
  scheduled, preempts or waits on quota as any pending job does, and ``rota show`` explains it.

A window of ``idle`` not yet seen whole (the runtime just started, after a restart of the
control plane) never scales a service down: the replicas that kept running go on serving.

Replicas that fail are replaced after a back-off (1 s, doubling up to a minute, reset by a replica
that became ready), so that a broken command does not spin. A replica is stopped only when no
request is in flight on it and it is not loading; it is taken out of the choice first
(draining). Replicas of a service that no longer exists are cancelled.

Nothing here is durable except through the store: after a restart, replicas are found again by
their label (``rota.store.services.SERVICE_LABEL``) and probed again before they serve.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable

from rota.backends.base import Backend, Handle
from rota.control.replicas import (RATE_WINDOW_S, REPROBE_S, Replica, ServiceState,
                                   fewest_in_flight, http_probe, is_loading, scale_in_victims,
                                   wanted_preemptible)
from rota.core import InvalidSpec, JobState, RotaError
from rota.core.serving import desired_replicas
from rota.store import JobRecord, NotFound, Store
from rota.store.services import ServiceRecord, service_of

log = logging.getLogger("rota.serving")
MAX_BACKOFF_S = 60.0
IDLE_TICK_S = 2.0       # the period while no service exists (a created one kicks at once)
OWNER = "rota (service scaling)"


class Unavailable(RotaError):
    """No replica could take a request in time; ``retry_after`` is a hint in seconds."""

    code = "service_unavailable"

    def __init__(self, message: str, retry_after: int = 5,
                 pending: JobRecord | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.pending = pending  # the replica job that waits to be scheduled, if one does


class Serving:
    """Started by ``rota up`` (``rota.server.compose``) beside the control loop."""

    def __init__(self, store: Store, backend: Backend, wake_loop: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic, tick_s: float = 0.1,
                 probe: Callable[[str, str], bool] = http_probe) -> None:
        self.store, self.backend, self.wake_loop = store, backend, wake_loop
        self.clock, self.tick_s, self.probe = clock, tick_s, probe
        self._lock = threading.Lock()
        self._services: dict[str, ServiceState] = {}
        self._models: dict[str, str] = {}  # model -> service
        self._kick = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._probes = ThreadPoolExecutor(8, thread_name_prefix="rota-probe")
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the thread ---------------------------------------------------------------------------

    def start(self) -> None:
        self.tick()
        self._thread = threading.Thread(target=self._run, name="rota-serving", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(10)
        self._probes.shutdown(wait=False, cancel_futures=True)

    def kick(self) -> None:
        """Tick as soon as possible (a request waits, a service was created or deleted)."""
        self._kick.set()

    def created(self, record: ServiceRecord) -> None:
        """A service was just stored: its models are routed from now on, not from the next
        tick."""
        with self._lock:
            if record.name not in self._services:
                self._services[record.name] = ServiceState(record, known_since=self.clock())
                self._models.update((m, record.name) for m in record.settings.models)
        self.kick()

    def deleted(self, name: str) -> None:
        """A service was just removed: its models answer 404 from now on."""
        with self._lock:
            svc = self._services.pop(name, None)
            self._models = {m: s for m, s in self._models.items() if s != name}
            if svc is not None:
                self._wake_waiters(svc)
        self.kick()

    def _run(self) -> None:
        while not self._halt.is_set():
            with self._lock:
                idle = not self._services
            self._kick.wait(IDLE_TICK_S if idle else self.tick_s)
            self._kick.clear()
            if self._halt.is_set():
                return
            try:
                self.tick()
            except Exception:  # the next tick retries; requests wait meanwhile
                log.exception("serving tick failed")

    def tick(self) -> None:
        """One round (see the module docstring)."""
        now = self.clock()
        records = {s.name: s for s in self.store.services.list()}
        replica_jobs = self.store.services.replicas()
        with self._lock:
            ended = self._sync(records, replica_jobs, now, now)
            states = list(self._services.values())
        for svc, replica in ended:  # read outside the lock, which the gateway's requests take
            self._ended(svc, replica, now)
        self._probe_all(states, now)
        self._protect_all(states)
        changed = False
        for svc in states:
            changed |= self._scale(svc, now)
        orphans = [r for r in replica_jobs if service_of(r) not in records
                   and not r.job.state.terminal]
        for rec in orphans:
            changed |= self._cancel(rec.id)
        if changed:
            self.wake_loop()

    def _sync(self, records: dict[str, ServiceRecord], jobs: list[JobRecord],
              now: float, read_at: float) -> list[tuple[ServiceState, Replica]]:
        """The runtime's view made equal to the store's as read at ``read_at``; the replicas
        whose jobs ended since."""
        ended: list[tuple[ServiceState, Replica]] = []
        for name, svc in list(self._services.items()):
            if name not in records and svc.known_since < read_at:  # not one made since
                del self._services[name]
                self._wake_waiters(svc)
        for name, record in records.items():
            svc = self._services.get(name)
            if svc is None:
                svc = self._services[name] = ServiceState(record, known_since=now)
            svc.record = record
        self._models = {m: name for name, svc in self._services.items()
                        for m in svc.record.settings.models}
        by_service: dict[str, list[JobRecord]] = {}
        for rec in jobs:
            by_service.setdefault(service_of(rec) or "", []).append(rec)
        for svc in self._services.values():
            seen = {r.id: r for r in by_service.get(svc.name, [])}
            for job_id in list(svc.replicas):
                if job_id not in seen:
                    ended.append((svc, svc.replicas.pop(job_id)))
            for job_id, rec in seen.items():
                replica = svc.replicas.get(job_id)
                if replica is None:
                    replica = svc.replicas[job_id] = Replica(job_id, rec)
                replica.record = rec
                if rec.state is JobState.RUNNING and svc.cold_since is not None \
                        and svc.cold_running_at is None:
                    svc.cold_running_at = now
                if rec.state is not JobState.RUNNING:
                    replica.ready, replica.endpoint = False, None
                elif replica.endpoint is None and rec.backend_handle:
                    replica.endpoint = self._endpoint(rec)
        return ended

    def _endpoint(self, rec: JobRecord) -> str | None:
        try:
            return self.backend.endpoint(Handle.from_dict(rec.backend_handle))
        except (InvalidSpec, RotaError, KeyError, AttributeError):
            return None

    def _ended(self, svc: ServiceState, replica: Replica, now: float) -> None:
        """A replica job ended: a failure backs the next one off."""
        try:
            rec = self.store.get_job(replica.job_id)
        except NotFound:
            return
        if rec.state is not JobState.FAILED:
            return
        with self._lock:
            svc.last_failure = f"replica job {rec.id} failed: {rec.reason or 'no reason given'}"
            svc.failures += 1
            svc.backoff_until = now + min(MAX_BACKOFF_S, 2.0 ** (svc.failures - 1))
            log.warning("replica job %s of service %s failed; the next one in %.0f s",
                        replica.job_id, svc.name, svc.backoff_until - now)

    def _probe_all(self, states: list[ServiceState], now: float) -> None:
        todo = [(svc, r) for svc in states for r in list(svc.replicas.values())
                if r.endpoint is not None and not r.draining
                and (not r.ready or now - r.probed_at >= REPROBE_S)]
        if not todo:
            return
        answers = list(self._probes.map(
            lambda pair: self.probe(pair[1].endpoint, pair[0].record.settings.readiness), todo))
        with self._lock:
            for (svc, replica), ok in zip(todo, answers):
                replica.probed_at = now
                became = ok and not replica.ready
                replica.ready = ok
                if became:
                    svc.failures, svc.backoff_until = 0, 0.0
                    self._cold_start_over(svc, now)
                    log.info("replica job %s of service %s is ready at %s", replica.job_id,
                             svc.name, replica.endpoint)
                    self._wake_waiters(svc)

    def _protect_all(self, states: list[ServiceState]) -> None:
        """Mark the replicas that load, and keep each replica job's ``preemptible`` as
        ``rota.control.replicas.wanted_preemptible`` says."""
        wall = self.store.clock()
        todo: list[tuple[Replica, bool, str]] = []
        with self._lock:
            for svc in states:
                load_s = svc.record.settings.load_s
                for r in svc.replicas.values():
                    r.loading = is_loading(r, load_s, wall)
                    want = wanted_preemptible(svc, r)
                    if want is not None and want != r.record.job.preemptible:
                        todo.append((r, want, _protection_note(r, want, load_s)))
        for r, want, why in todo:
            try:
                self.store.services.protect(r.job_id, want, why)
            except (NotFound, RotaError) as exc:  # ended meanwhile; the next tick sees it
                log.info("replica job %s: preemptible not changed: %s", r.job_id, exc)

    @staticmethod
    def _cold_start_over(svc: ServiceState, now: float) -> None:
        """A replica became ready while requests waited with none: how long rota took to
        have it running (submit, schedule, launch) and the server to become ready."""
        began, running = svc.cold_since, svc.cold_running_at
        svc.cold_since = svc.cold_running_at = None
        if began is None:
            return
        running = running if running is not None else now
        svc.last_cold_start = {"to_running_s": round(running - began, 3),
                               "to_ready_s": round(now - running, 3),
                               "total_s": round(now - began, 3)}

    def _scale(self, svc: ServiceState, now: float) -> bool:
        settings = svc.record.settings
        with self._lock:
            concurrency = svc.in_flight + len(svc.waiting)
            if svc.arrivals:
                concurrency = max(concurrency, 1)
            svc.arrivals = 0
            svc.samples.append((now, concurrency))
            while svc.samples and svc.samples[0][0] < now - settings.idle_s:
                svc.samples.popleft()
            while svc.arrived_at and svc.arrived_at[0] < now - RATE_WINDOW_S:
                svc.arrived_at.popleft()
            desired = desired_replicas(settings, (c for _, c in svc.samples))
            live = [r for r in svc.replicas.values() if not r.draining]
            if now - svc.known_since < settings.idle_s:  # a window not seen whole yet (a
                desired = max(desired, len(live))  # restart): no scaling down on it
            svc.desired = desired
            cold = not any(r.ready for r in live) and bool(svc.waiting)
            if len(live) < desired and now < svc.backoff_until:
                return False
            doomed = scale_in_victims(live, len(live) - desired)
            for r in doomed:
                r.draining = True
        changed = False
        for _ in range(desired - len(live)):
            changed |= self._submit(svc, cold and not live)
        for r in doomed:
            changed |= self._cancel(r.job_id)
        return changed

    def _submit(self, svc: ServiceState, cold: bool) -> bool:
        template = svc.record.template  # not preemptible until it is ready (replicas.py)
        try:
            rec = self.store.submit_record(replace(template, preemptible=False))
        except RotaError as exc:
            log.warning("service %s: a replica job was refused: %s", svc.name, exc)
            svc.backoff_until = self.clock() + MAX_BACKOFF_S
            return False
        with self._lock:
            svc.replicas.setdefault(rec.id, Replica(rec.id, rec))
            if cold:
                svc.cold_starts += 1
        log.info("service %s: replica job %s submitted", svc.name, rec.id)
        return True

    def _cancel(self, job_id: str) -> bool:
        try:
            self.store.request_cancel(job_id, by=OWNER)
        except (NotFound, RotaError) as exc:
            log.info("replica job %s not cancelled: %s", job_id, exc)
            return False
        return True

    # -- the gateway's side ------------------------------------------------------------------

    def service_of_model(self, model: str) -> ServiceRecord | None:
        with self._lock:
            name = self._models.get(model)
            svc = self._services.get(name or "")
            return None if svc is None else svc.record

    def services(self) -> list[ServiceRecord]:
        with self._lock:
            return [s.record for s in self._services.values()]

    def views(self) -> dict[str, dict[str, Any]]:
        now = self.clock()
        with self._lock:
            return {name: s.view(now) for name, s in self._services.items()}

    async def acquire(self, name: str) -> Replica:
        """A ready replica of service ``name``, counted in flight until ``release``; waits for
        one to become ready; ``Unavailable`` when the wait queue is full or the wait is over."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        began = self.clock()
        with self._lock:
            svc = self._services.get(name)
            if svc is None:
                raise Unavailable(f"service {name} is gone", 30)
            svc.arrivals += 1
            svc.requests += 1
            svc.arrived_at.append(began)
            timeout = svc.record.settings.timeout_s
        while True:
            with self._lock:
                if self._services.get(name) is not svc:
                    raise Unavailable(f"service {name} was deleted", 30)
                replica = fewest_in_flight(svc)
                if replica is not None:
                    replica.in_flight += 1
                    svc.in_flight += 1
                    return replica
                if len(svc.waiting) >= svc.record.settings.queue:
                    raise Unavailable(f"service {name} has {len(svc.waiting)} requests waiting "
                                      "for a replica already, its most; try again later")
                waiter = loop.create_future()
                svc.waiting.append(waiter)
                if svc.cold_since is None and not any(r.ready for r in svc.replicas.values()):
                    svc.cold_since = self.clock()
            self.kick()
            left = began + timeout - self.clock()
            try:
                if left <= 0:
                    raise TimeoutError
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                raise self._why_waiting(svc, timeout) from None
            finally:
                with self._lock:
                    if waiter in svc.waiting:
                        svc.waiting.remove(waiter)

    def release(self, name: str, replica: Replica) -> None:
        with self._lock:
            replica.in_flight -= 1
            svc = self._services.get(name)
            if svc is not None:
                svc.in_flight -= 1

    def _why_waiting(self, svc: ServiceState, timeout: float) -> Unavailable:
        with self._lock:
            live = [r.record for r in svc.replicas.values() if not r.draining]
        waiting = [r for r in live if r.state is JobState.PENDING]
        head = f"no replica of service {svc.name} became ready within {timeout:g} s"
        if waiting:
            return Unavailable(f"{head}: replica job {waiting[0].id} is pending; see rota show "
                               f"{waiting[0].id}", pending=waiting[0])
        if live:
            return Unavailable(f"{head}: replica job {live[0].id} is {live[0].state} and not "
                               "ready yet")
        with self._lock:
            failed = svc.last_failure
        if failed:
            return Unavailable(f"{head}: {failed}; see rota show {failed.split()[2]}")
        return Unavailable(f"{head}: no replica could be started (see rota services)")

    def _wake_waiters(self, svc: ServiceState) -> None:
        """Let every waiting request look for a replica again (called with the lock held)."""
        loop = self._loop
        if loop is None:
            return
        for waiter in list(svc.waiting):
            loop.call_soon_threadsafe(_settle, waiter)


def _settle(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _protection_note(replica: Replica, preemptible: bool, load_s: float) -> str:
    if not preemptible:
        return (f"replica not ready yet: not preemptible until it is (at most {load_s:g} s "
                "after it starts running)")
    if replica.ready:
        return "replica ready: preemptible again"
    return f"replica not ready {load_s:g} s after it started running: preemptible again"
