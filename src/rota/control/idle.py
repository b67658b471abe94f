"""Idle reclamation, carried out: watching running jobs and telling the reconciler which to stop.

Each pass, ``IdleWatch.review`` takes the running jobs whose effective policy has a check (the
operator's defaults, global ``*`` and per queue, made stricter by the job's own ``idle``:
``rota.scheduler.idle.effective``), asks the backend what they are doing (``activity``, one
call for all of them) and judges each (``rota.scheduler.idle.judge``):

- GPU utilisation is sampled once per pass; ``low_since`` is when it went, and stayed, below
  the job's threshold (a sample at or above it, or none, resets it);
- the last activity is the latest of the job's output and of any API call about it by a person
  (``touch``, which the API calls; the job's own token does not count); while a session is
  open inside the job (``rota exec``, ``shell`` or ``forward``: ``opened``, until ``closed``),
  it is now: a live session is interaction, however quiet;
- an interactive job inside its notice is warned once for each time it would be reclaimed
  (a new idle period, after it was used again, gets its own warning): an event in its history
  and a line in its output, which does not count as the job's own output;
- a job to reclaim is handed to the reconciler (``reclaim``), which stops it and ends it
  ``cancelled`` with the end ``reclaimed-idle``; its GPUs are free at once.

What is seen lives in this process: after a restart, GPU idleness and warnings start afresh
(a job is never reclaimed sooner for it). What accounting needs of it is stored: each pass,
every attempt whose GPU utilisation is below its threshold has its *idle span* (from its first
low sample to this one) written or extended (``Store.note_idle``), and ``rota usage`` shows
those GPU-hours apart. Only attempts under a policy with ``gpu_util_below`` are sampled; the
time after an idle span's last low sample, up to the sample that ended it, is not counted.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from rota.backends.base import Backend, Handle
from rota.core import JobKind
from rota.scheduler.idle import Check, IdlePolicy, Reclaim, Seen, Warn, effective, judge
from rota.store import JobRecord, Store

log = logging.getLogger("rota.control")


def describe(check: Check) -> str:
    """A check in words, for reasons and warnings."""
    period = _duration(check.period_s)
    if check.kind == "gpu-idle":
        return f"GPU utilisation below {check.threshold:g} % for {period}"
    if check.kind == "inactive":
        return f"no output and no API call for {period}"
    return f"its maximum lifetime of {period} reached"


def _duration(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


class IdleWatch:
    def __init__(self, store: Store, backend: Backend,
                 clock_touch: Callable[[], float] | None = None) -> None:
        self.store, self.backend = store, backend
        self._clock = clock_touch or store.clock
        self.low_since: dict[str, float] = {}
        self.warned: dict[str, float] = {}  # job -> the reclaim time it was warned of
        self._touched: dict[str, float] = {}
        self._sessions: dict[str, int] = {}  # job -> its sessions open now
        self._lock = threading.Lock()

    def touch(self, job_id: str) -> None:
        """Someone asked the API about the job: it counts as activity."""
        with self._lock:
            self._touched[job_id] = self._clock()

    def opened(self, job_id: str) -> None:
        """A session inside the job was opened: it counts as activity until ``closed``."""
        with self._lock:
            self._sessions[job_id] = self._sessions.get(job_id, 0) + 1
            self._touched[job_id] = self._clock()

    def closed(self, job_id: str) -> None:
        """One session of ``opened`` ended; its end is the job's last activity."""
        with self._lock:
            left = self._sessions.get(job_id, 0) - 1
            if left > 0:
                self._sessions[job_id] = left
            else:
                self._sessions.pop(job_id, None)
            self._touched[job_id] = self._clock()

    def forget(self, job_id: str) -> None:
        self.low_since.pop(job_id, None)
        self.warned.pop(job_id, None)
        with self._lock:
            self._touched.pop(job_id, None)

    def review(self, running: list[tuple[JobRecord, Handle]], now: float) -> dict[str, str]:
        """The jobs to reclaim now: job id -> why."""
        defaults = self.store.idle_defaults() if running else {}
        by_queue: dict[str, IdlePolicy] = {}  # the policy of jobs that set none of their own
        watched = [(rec, handle, policy) for rec, handle in running
                   if not (policy := _policy(rec, defaults, by_queue)).empty]
        if not watched:
            return {}
        seen = self.backend.activity([handle for _, handle, _ in watched])
        out = {}
        spans: dict[tuple[str, int, float], float] = {}
        for (rec, handle, policy), activity in zip(watched, seen, strict=True):
            decision = judge(policy, self._seen(rec, policy, activity, now), now,
                             rec.job.kind is JobKind.INTERACTIVE)
            since = self.low_since.get(rec.id)
            if since is not None and now > since:
                spans[(rec.id, rec.attempts, since)] = now
            if isinstance(decision, Reclaim):
                out[rec.id] = describe(decision.check)
            elif isinstance(decision, Warn) and self.warned.get(rec.id) != decision.at:
                self._warn(rec, handle, decision, now)
        self.store.note_idle(spans)
        return out

    def _seen(self, rec: JobRecord, policy: IdlePolicy, activity: Any, now: float) -> Seen:
        util = activity.gpu_util
        if policy.gpu_util_below is not None and util is not None and util < policy.gpu_util_below:
            self.low_since.setdefault(rec.id, now)
        else:
            self.low_since.pop(rec.id, None)
        with self._lock:
            touched = now if self._sessions.get(rec.id) else self._touched.get(rec.id)
        last = max((t for t in (activity.last_output_at, touched) if t is not None),
                   default=None)
        started = rec.job.started_at if rec.job.started_at is not None else now
        return Seen(started, self.low_since.get(rec.id), last)

    def _warn(self, rec: JobRecord, handle: Handle, warn: Warn, now: float) -> None:
        self.warned[rec.id] = warn.at
        message = (f"this job will be reclaimed in {_duration(round(warn.at - now))} "
                   f"({describe(warn.check)}); use it, or save your work")
        self.backend.notify(handle, message)
        self.store.note(rec.id, "idle-warning", message)
        log.info("job %s: %s", rec.id, message)


def _policy(rec: JobRecord, defaults: Mapping[str, Any],
            by_queue: dict[str, IdlePolicy]) -> IdlePolicy:
    """The job's effective idle policy; that of a job without its own ``idle`` is its queue's,
    kept in ``by_queue`` (thousands of running jobs share a few queues)."""
    run_idle = rec.run.get("idle") if isinstance(rec.run, Mapping) else None
    queue = rec.job.queue
    if run_idle is None and queue in by_queue:
        return by_queue[queue]
    policy = effective(IdlePolicy.of(defaults.get("*")), IdlePolicy.of(defaults.get(queue)),
                       IdlePolicy.of(run_idle))
    if run_idle is None:
        by_queue[queue] = policy
    return policy
