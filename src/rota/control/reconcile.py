"""The control loop's side effects on jobs: reconcile them with their backend, launch, bill.

``Reconciler`` is put together from parts on one base (``tracking``: what this process knows of
each active job beyond the store, the state moves of a pass written together, usage billed):
``observe`` adopts and polls the launched jobs, ``landing`` hands bound jobs to the launcher
and records what became of them. This module judges each job and carries out the verdict.

Every decision about a job is ``rota.control.verdict.judge``'s; this module only carries it out
(checkpoint signals, stops with their grace, then SIGKILL ``KILL_MARGIN_S`` after it, moves).
A job being preempted or cancelled without a handle of its current attempt is looked for with
``backend.recover`` first, so that nothing it started runs on. A stored handle of an earlier
attempt (a job requeued and bound again) is not the job's: it is ignored (``current_handle``).

Placement: a backend that chose where a job runs (Slurm picks devices, or nodes) reports it
in the job's status; it is recorded as the job's placement (``Store.record_placement``), so
that the scheduler counts what is really taken and ``rota show`` says where the job runs.

Restart budget: ``attempts`` counts every requeue, ``failures`` those that spend the budget;
requeues after a preemption do not, every other one (a failed run, a failed
launch) does.
"""

from __future__ import annotations

import logging
import signal as signals
from dataclasses import replace
from typing import Any

from rota.backends.base import Handle, ReplicaState, ReplicaStatus, Status
from rota.control.landing import Landing
from rota.control.launcher import unreadable
from rota.control.observe import Observing
from rota.control.runspec import RunSpec
from rota.control.tracking import PassReport
from rota.control.verdict import KEEP, JobView, Verdict, judge
from rota.core import End, IllegalTransition, InvalidSpec, JobState
from rota.store import Conflict, JobRecord, NotFound

log = logging.getLogger("rota.control")
KILL_MARGIN_S = 2.0  # after a stop's grace, SIGKILL whatever still runs this much later

__all__ = ["PassReport", "Reconciler", "current_handle"]  # what the loop imports from here


class Reconciler(Observing, Landing):
    """Each pass, the active jobs reconciled with their backend (module docstring); its
    arguments are ``tracking.Tracking``'s."""

    # -- reconcile ---------------------------------------------------------------------------

    def reconcile(self, recs: list[JobRecord], now: float, report: PassReport) -> None:
        """Every active job but those in flight: launched ones observed together (one
        ``poll``), then each judged and its verdict carried out; one job's fault does not stop
        the others. Jobs never launched are handed to the launcher (``land`` records them)."""
        flying = self.in_flight
        self._stop_dropped({r.id for r in recs} | flying)
        recs = [r for r in recs if r.id not in flying]
        observed = self._observe([r for r in recs if current_handle(r) is not None], report)
        recs = [r for r in recs if r.id not in self.unseen]
        running = [(rec, observed[rec.id][0]) for rec in recs if rec.state is JobState.RUNNING
                   and rec.id in observed and observed[rec.id][1].state is ReplicaState.RUNNING]
        try:
            self.reclaiming.update(self.idle.review(running, now))
        except Exception as exc:  # a failed look at activity must not stop the pass
            report.errors.append(f"idle review: {exc!r}")
            log.exception("idle review failed")
        unlaunched: list[JobRecord] = []
        for rec in recs:
            try:
                if rec.id in observed:
                    self._judge(rec, *observed[rec.id], now, report)
                elif self._unlaunched(rec, now, report):
                    unlaunched.append(rec)
            except Exception as exc:
                report.errors.append(f"job {rec.id}: {exc!r}")
                log.exception("job %s: reconcile failed", rec.id)
        self.flush(report)
        if unlaunched:
            self.launch(unlaunched)

    def _stop_dropped(self, active: set[str]) -> None:
        """Jobs with a handle that left the active states without this loop (an operator's
        ``cancel --force``, for a job its backend cannot be asked about): one best-effort stop
        of what they launched, then they are forgotten."""
        for job_id in [j for j in self.handles if j not in active]:
            handle = self.handles[job_id]
            self.forget(job_id)
            try:
                self.backend.cancel(handle, 0.0)
            except Exception as exc:
                log.warning("job %s: ended outside the control loop; stopping its launch %s "
                            "failed: %s", job_id, handle.launch_id, exc)
            else:
                log.info("job %s: ended outside the control loop; its launch %s was stopped",
                         job_id, handle.launch_id)

    def _judge(self, rec: JobRecord, handle: Handle, status: Status, now: float,
               report: PassReport) -> None:
        steady = self._steady.get(rec.id)
        if (steady is not None and steady[0] is rec and steady[1] == status
                and rec.id not in self.reclaiming):
            self._bill(rec, now)  # judged to be left running, and nothing changed since
            return
        self._steady.pop(rec.id, None)
        if status.placement is not None and status.placement != rec.job.placement:
            self._placed(rec, status)
        try:
            spec = self.specs.spec(rec)
        except InvalidSpec as exc:  # a stored spec this release cannot read: never guessed
            self._unreadable(rec, handle, exc, now, report)
            return
        verdict = judge(self._view(rec, status, spec), now)
        sent = self.signalled.setdefault(rec.id, set())
        if verdict.checkpoint and verdict.checkpoint not in sent:
            sent.add(verdict.checkpoint)
            self.backend.signal(handle, spec.checkpoint_signal)
        if verdict.stop_grace_s is not None:
            self._stop(rec.id, handle, verdict.stop_grace_s, now)
        if verdict.waiting is not None and verdict.waiting != rec.reason:
            self.store.record_waiting(rec.id, verdict.waiting)
        ended = status.finished_at
        self._bill(rec, now if ended is None else min(now, ended))
        if verdict.move is JobState.RUNNING and rec.state is JobState.SCHEDULED:
            self.billed_until.setdefault(rec.id, now)  # it runs, and is billed, from now
        if verdict.move is not None:
            if status.state is ReplicaState.LOST:
                self.backend.cancel(handle, 0.0)  # no orphan of a lost replica outlives it
            if not verdict.move.holds_resources:  # the attempt ends: its peak memory
                verdict = replace(verdict, max_rss_kib=status.max_rss_kib)
            self._move(rec, verdict, report, now)
        elif _steady(rec, status, verdict):
            self._steady[rec.id] = (rec, status)

    def _placed(self, rec: JobRecord, status: Status) -> None:
        """Record where the backend put the job, when that is not where it was placed."""
        assert status.placement is not None
        try:
            self.store.record_placement(rec.id, status.placement)
        except (IllegalTransition, Conflict, NotFound) as exc:
            log.info("job %s: placement not recorded: %s", rec.id, exc)
            return
        log.info("job %s: runs on %s", rec.id, ", ".join(status.placement.nodes))

    def _unlaunched(self, rec: JobRecord, now: float, report: PassReport) -> bool:
        """A job that holds resources without a handle of its current attempt: never launched
        (a crash between the bind and the launch, or a preemption that came first), or
        launched by a control plane that died before saving the handle. True: launch it
        (a SCHEDULED job: the launch adopts the attempt if it had started)."""
        if rec.state is JobState.SCHEDULED and not rec.cancel_requested:
            return True
        found = self._recover(rec)
        if found is not None:
            log.info("job %s: attempt %d found running without a saved handle; adopted",
                     rec.id, rec.attempts)
            self.store.record_handle(rec.id, found.to_dict())
            return False  # the next pass judges it with its handle
        if rec.cancel_requested:
            self._move(rec, Verdict(JobState.CANCELLED, reason="cancelled on request",
                                    end=End.CANCELLED), report)
        elif rec.state is JobState.PREEMPTING:
            self._move(rec, Verdict(JobState.PENDING, reason="requeued: preempted before it "
                                                             "was launched", end=End.PREEMPTED),
                       report)
        else:  # RUNNING without a handle: nothing can be observed, so it is lost
            lost = Status((ReplicaStatus(0, ReplicaState.LOST, reason="no backend handle"),))
            try:
                verdict = judge(self._view(rec, lost, self.specs.spec(rec)), now)
            except InvalidSpec as exc:
                verdict = unreadable(exc)
            self._move(rec, verdict, report)
        return False

    def _recover(self, rec: JobRecord) -> Handle | None:
        if rec.job.placement is None:
            return None
        return self.backend.recover(rec.job, rec.job.placement, rec.attempts)

    def _unreadable(self, rec: JobRecord, handle: Handle, exc: InvalidSpec, now: float,
                    report: PassReport) -> None:
        """Fail a launched job whose stored spec cannot be read (its signal, grace and restart
        budget are unknown): what it started is stopped, the reason names the field."""
        self.backend.cancel(handle, 0.0)
        self._bill(rec, now)
        self._move(rec, unreadable(exc), report, now)

    def _view(self, rec: JobRecord, status: Status, spec: RunSpec) -> JobView:
        ended_badly = not status.succeeded and not any(
            r.state is ReplicaState.RUNNING for r in status.replicas)
        failures = self._failures(rec) if ended_badly else 0
        grace = spec.grace_s if spec.grace_s is not None else rec.job.grace_s
        return JobView(rec.state, status, rec.cancel_requested, rec.preempt_deadline,
                       rec.reason, failures, spec.max_retries, grace, rec.lost_streak,
                       spec.backoff_s, rec.id, rec.job.started_at, rec.job.walltime_s,
                       self.reclaiming.get(rec.id), rec.last_checkpoint_at,
                       rec.job.walltime_s is not None and self._walltime_by_backend())

    def _walltime_by_backend(self) -> bool:
        """Whether the backend enforces walltimes itself (``Capabilities.walltime``), asked
        once: it does not change while the backend runs."""
        if self._backend_walltime is None:
            self._backend_walltime = self.backend.capabilities.walltime
        return self._backend_walltime

    def _stop(self, job_id: str, handle: Handle, grace_s: float, now: float) -> None:
        if job_id not in self.kill_at:
            self.kill_at[job_id] = now + grace_s + KILL_MARGIN_S
            self.backend.cancel(handle, grace_s)
            if grace_s > 0:
                return
        if grace_s == 0 or now >= self.kill_at[job_id]:
            self.backend.signal(handle, signals.SIGKILL)

    def _failures(self, rec: JobRecord) -> int:
        """Earlier attempts that spent the restart budget: every requeue but preemptions."""
        return rec.failures


def _steady(rec: JobRecord, status: Status, verdict: Verdict) -> bool:
    """Whether ``verdict`` for ``rec`` with ``status`` holds for as long as neither
    changes: a RUNNING job left as it is, that runs where it was placed, with no cancel
    asked and no walltime (``judge``'s only rules that depend on the time are its
    walltime's, a preemption's deadline and an idle reclaim, checked apart)."""
    return (verdict == KEEP and rec.state is JobState.RUNNING and not rec.cancel_requested
            and rec.job.walltime_s is None and status.state is ReplicaState.RUNNING
            and status.waiting is None and not status.displaced
            and status.placement in (None, rec.job.placement))


def current_handle(rec: JobRecord) -> dict[str, Any] | None:
    """The stored handle when it is of the job's current attempt. A handle without an attempt
    number (saved before they existed) counts as current for a job that was running."""
    stored = rec.backend_handle
    if stored is None:
        return None
    attempt = stored.get("attempt")
    if attempt is None:
        return stored if rec.state is not JobState.SCHEDULED else None
    return stored if attempt == rec.attempts else None
