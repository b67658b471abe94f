"""The control loop's side effects on jobs: reconcile them with their backend, launch, bill.

``Reconciler`` keeps what this process knows beyond the store: the handle of every job it
launched or adopted (a job seen for the first time, e.g. after a restart, is adopted through
``backend.adopt``; later passes ask ``backend.poll`` about all of them at once), which jobs
were already sent their checkpoint signal or asked to stop (each is done once), and up to when
each running job was billed. Not knowing is never taken for a lost job: a poll that fails
(the backend cannot answer, or one job's record cannot be read) is asked again of each half
of its jobs, down to the jobs it fails for, at most ``MAX_POLLS`` polls a pass; a job whose
poll still fails is left as it is for the pass (not judged, not launched), with an error in
the pass's report, and every other job is judged and the pass goes on to schedule.

Every decision about a job is ``rota.control.verdict.judge``'s; this module only carries it out.
The state moves of a pass are written together (``Store.transition_many``: one transaction,
each move checked against the state table on its own); a move that a concurrent change made
illegal is skipped and looked at again next pass.

Placement: a backend that chose where a job runs (Slurm picks devices, or nodes) reports it
in the job's status; it is recorded as the job's placement (``Store.record_placement``), so
that the scheduler counts what is really taken and ``rota show`` says where the job runs.

Launch (``rota.control.launcher``, all bound jobs of a pass at once): attempt ``n`` of a job is
its ``attempts`` column; ``backend.launch(..., attempt=n)`` never starts an attempt twice, so a
job found SCHEDULED after a restart (bound, maybe launched, handle never saved) is launched
through the same steps and adopted if it had started. Launches run while later passes go on:
a job in flight (``in_flight``) keeps its SCHEDULED state, and with it its devices in every
snapshot, and is neither judged nor launched again until ``land`` has recorded what became
of it. The handles that landed since the last pass are recorded together; a launch that
cannot be recorded is stopped, so nothing runs unrecorded. A backend whose launches may
wait in its own queue (``Capabilities.queued``: Slurm) has its handles recorded without a
move (``_starting``): the job stays SCHEDULED, shown *starting* with its backend's reason,
until a poll says it runs, and is billed from then; a restart adopts it by its stored
handle, never launching it again. A stored handle of an earlier attempt (a job requeued and
bound again) is not the job's: it is ignored. A job being
preempted or cancelled without a handle of its current attempt is looked for with
``backend.recover`` first, so that nothing it started runs on.

Restart budget: ``attempts`` counts every requeue, ``failures`` those that spend the budget;
requeues after a preemption do not, every other one (a failed run, a failed
launch) does.

Usage is billed per pass: GPU-seconds (devices x their share x seconds) of every job holding
devices since it was last billed, stored per project together with each job's
``billed_until`` (``Store.bill``, one transaction) every ``FLUSH_S`` seconds, not every pass
(the write touches every running job), and when the loop stops. A job seen for the first time
after a restart is billed from its stored ``billed_until`` (else its ``started_at``), so the
time the control plane was down is billed, and so is what a crash kept from being stored of a
job still running; one that ended meanwhile is billed up to when it ended, as its backend
reports it. A crash loses at most ``FLUSH_S`` seconds of usage of the jobs that ended within
them (fair share's figures, which decay over hours; the exact accounting of ``rota usage``
comes from the attempts and loses nothing).
"""

from __future__ import annotations

import logging
import math
import signal as signals
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from rota.backends.base import (
    Backend, BackendError, Handle, ReplicaState, ReplicaStatus, RunAs, Status,
)
from rota.control.idle import IdleWatch
from rota.control.launcher import Launcher, unreadable
from rota.control.runspec import RunSpec, SpecCache
from rota.control.verdict import KEEP, JobView, Verdict, judge
from rota.core import MILLI, End, IllegalTransition, InvalidSpec, JobState
from rota.store import Conflict, JobRecord, Move, NotFound, Store

log = logging.getLogger("rota.control")
FLUSH_S = 10.0  # seconds between two writes of the usage billed
KILL_MARGIN_S = 2.0  # after a stop's grace, SIGKILL whatever still runs this much later
MAX_POLLS = 32  # polls a pass makes to find the jobs a failing poll fails for


@dataclass(slots=True)
class PassReport:
    """What one pass did: state moves as (job, from, to, reason), launches, errors."""

    moves: list[tuple[str, str, str, str]] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # jobs requeued for a node or GPU fault, or taken off their node by a preemption (a
    # drain's eviction): the cycle must see their nodes as they are now (cordoned, failed)
    faults: list[str] = field(default_factory=list)
    displaced: list[str] = field(default_factory=list)  # requeued: foreign work took their GPUs

    def moved(self, job: str, old: JobState, new: JobState, reason: str) -> None:
        self.moves.append((job, str(old), str(new), reason))


class Reconciler:
    """``account`` names the OS account a job runs as (``rota.control.accounts``); without
    one, jobs run as the control plane's own account. With ``api_url``, each attempt gets
    ``ROTA_URL`` and a token of its own (``Store.issue_job_token``), and with ``api_ca_file``
    (an HTTPS API's certificate, readable by every account) ``ROTA_CA_FILE`` to verify it."""

    def __init__(self, store: Store, backend: Backend, data_dir: Path, since: float,
                 account: Callable[[JobRecord], RunAs | None] = lambda rec: None,
                 api_url: str | None = None, api_ca_file: str | None = None,
                 on_ready: Callable[[], None] = lambda: None) -> None:
        self.store, self.backend, self.data_dir = store, backend, data_dir
        self.specs = SpecCache()  # each job's launch spec, read once
        self.launcher = Launcher(store, backend, data_dir, account, api_url, api_ca_file,
                                 on_ready, self.specs)
        self.idle = IdleWatch(store, backend)
        self._moves: list[tuple[JobRecord, Verdict, float | None, Handle | None]] = []
        self.reclaiming: dict[str, str] = {}  # job -> why it is being reclaimed as idle
        self.since = since  # when this process took over
        self.handles: dict[str, Handle] = {}
        self.signalled: dict[str, set[str]] = {}  # job -> why it got the checkpoint signal
        self.kill_at: dict[str, float] = {}
        self.unseen: frozenset[str] = frozenset()  # jobs whose last poll failed
        self._backend_walltime: bool | None = None  # Capabilities.walltime, once asked
        self._queued: bool | None = None  # Capabilities.queued, once asked
        self.billed_until: dict[str, float] = {}
        # job -> (its record, its status) judged to be left running with nothing due later
        self._steady: dict[str, tuple[JobRecord, Status]] = {}
        self.usage: dict[str, float] = {}  # project -> GPU-seconds not yet stored
        self._flushed: dict[str, float] = {}  # job -> billed_until last stored
        self._flush_at = -math.inf  # when usage was last stored

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

    def _observe(self, recs: list[JobRecord], report: PassReport
                 ) -> dict[str, tuple[Handle, Status]]:
        """Each launched job's handle and status: handles seen for the first time (after a
        restart) are adopted, the others polled together (``_poll``: those whose poll failed
        are left out, in ``unseen``)."""
        out: dict[str, tuple[Handle, Status]] = {}
        known: list[tuple[str, Handle]] = []
        for rec in recs:
            handle = self.handles.get(rec.id)
            stored = rec.backend_handle or {}
            if handle is not None and handle.launch_id == _launch_id(stored):
                known.append((rec.id, handle))
                continue
            try:
                handle = Handle.from_dict(stored)
                out[rec.id] = handle, self.backend.adopt(handle)
            except (InvalidSpec, BackendError) as exc:
                lost = ReplicaStatus(0, ReplicaState.LOST, reason=f"cannot adopt its handle: {exc}")
                out[rec.id] = _placeholder(rec), Status((lost,))
                continue
            self.handles[rec.id] = handle
            if rec.state is not JobState.SCHEDULED:  # a starting job is billed once it runs
                self.billed_until.setdefault(rec.id, _billed_from(rec, self.since))
        polled = self._poll(known, report)
        for job_id, handle in known:
            if job_id in polled:
                out[job_id] = handle, polled[job_id]
        return out

    def _poll(self, known: list[tuple[str, Handle]], report: PassReport) -> dict[str, Status]:
        """``backend.poll`` of every handle in one call; where it fails, of each half again,
        down to the jobs it fails for (module docstring), which become ``unseen``."""
        statuses: dict[str, Status] = {}
        unseen: set[str] = set()
        groups, polls = [known] if known else [], 0
        while groups:
            group = groups.pop()
            polls += 1
            try:
                found = self.backend.poll([h for _, h in group])
            except Exception as exc:
                if len(group) > 1 and polls + 2 <= MAX_POLLS:
                    half = len(group) // 2
                    groups += [group[half:], group[:half]]
                    continue
                if any(job_id not in self.unseen for job_id, _ in group):  # once, not each pass
                    log.warning("%s: cannot be observed: %s",
                                ", ".join(f"job {job_id}" for job_id, _ in group), exc)
                report.errors.extend(f"job {job_id}: poll failed: {exc!r}" for job_id, _ in group)
                unseen.update(job_id for job_id, _ in group)
                continue
            statuses.update((job_id, status)
                            for (job_id, _), status in zip(group, found, strict=True))
        self.unseen = frozenset(unseen)
        return statuses

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

    def _move(self, rec: JobRecord, verdict: Verdict, report: PassReport,
              now: float | None = None, handle: Handle | None = None) -> None:
        """Queue a move for ``flush`` (``handle``: a launch to record with it)."""
        assert verdict.move is not None
        self._moves.append((rec, verdict, now, handle))

    def flush(self, report: PassReport) -> None:
        """Write the queued moves in one transaction and carry out what follows each."""
        queued, self._moves = self._moves, []
        if not queued:
            return
        moves = []
        for rec, verdict, now, handle in queued:
            eligible_at = None
            if verdict.retry_in_s:
                eligible_at = (now if now is not None else self.store.clock()) + verdict.retry_in_s
            moves.append(Move(rec.id, verdict.move, verdict.exit_code, verdict.reason,  # type: ignore[arg-type]
                              handle.to_dict() if handle is not None else None, verdict.end,
                              verdict.hold, eligible_at, verdict.max_rss_kib))
        for (rec, verdict, _now, handle), after in zip(queued, self.store.transition_many(moves)):
            if isinstance(after, Exception):
                log.info("job %s: skipped %s -> %s: %s", rec.id, rec.state, verdict.move, after)
                if handle is not None:
                    self.backend.cancel(handle, 0.0)  # it cannot be recorded: it must not run
                    self.forget(rec.id)
                continue
            report.moved(rec.id, rec.state, after.state, verdict.reason or "")
            if verdict.end is not None and (verdict.end.fault or verdict.end is End.PREEMPTED):
                report.faults.append(rec.id)
            if verdict.end is End.DISPLACED:
                report.displaced.append(rec.id)
            log.info("job %s: %s -> %s%s", rec.id, rec.state, after.state,
                     f" ({verdict.reason})" if verdict.reason else "")
            if after.state is not JobState.RUNNING:
                self.forget(rec.id)

    def forget(self, job_id: str) -> None:
        for table in (self.handles, self.kill_at, self.billed_until, self.signalled,
                      self.reclaiming, self._steady):
            table.pop(job_id, None)
        self.specs.forget(job_id)
        self.idle.forget(job_id)

    def _failures(self, rec: JobRecord) -> int:
        """Earlier attempts that spent the restart budget: every requeue but preemptions."""
        return rec.failures

    # -- launch ------------------------------------------------------------------------------

    def launch(self, recs: list[JobRecord]) -> None:
        """Start launching SCHEDULED jobs (``rota.control.launcher``) and return at once;
        ``land`` records what became of them."""
        self.launcher.submit(recs)

    @property
    def in_flight(self) -> frozenset[str]:
        """The jobs whose launch is under way, not recorded yet: left alone until it is."""
        return self.launcher.in_flight

    def land(self, now: float, report: PassReport, wait: bool = False) -> None:
        """Record the launches that ended (with ``wait``: every one under way, once it
        ended): handles with their moves to RUNNING in one transaction, failures with theirs.
        A launch that failed unforeseen leaves its job SCHEDULED, to be launched again."""
        if wait:
            self.launcher.settle()
        launched = []
        for outcome in self.launcher.landed():
            if outcome.handle is not None:
                launched.append((outcome.rec, outcome.handle))
            elif outcome.verdict is not None:
                self._move(outcome.rec, outcome.verdict, report, now)
            else:
                report.errors.append(f"launch of job {outcome.rec.id}: {outcome.error}")
        self.flush(report)
        if launched:
            self._launched(launched, now, report)

    def _launched(self, launched: list[tuple[JobRecord, Handle]], now: float,
                  report: PassReport) -> None:
        if self._queued is None:  # Capabilities.queued, asked once: it does not change
            self._queued = self.backend.capabilities.queued
        if self._queued:
            self._starting(launched, report)
            return
        for rec, handle in launched:
            self._move(rec, Verdict(JobState.RUNNING, reason=""), report, now, handle)
            self.handles[rec.id] = handle
            self.billed_until[rec.id] = _billed_from(rec, now)
        self.flush(report)
        for rec, handle in launched:
            if self.handles.get(rec.id) is handle:
                report.launched.append(rec.id)
                log.info("job %s: launched (%d replica%s)", rec.id, len(handle.replicas),
                         "" if len(handle.replicas) == 1 else "s")

    def _starting(self, launched: list[tuple[JobRecord, Handle]], report: PassReport) -> None:
        """Launches a backend may hold before they run (``Capabilities.queued``): each handle
        is recorded without a move, the job stays SCHEDULED (starting) until a poll says it
        runs (``verdict`` rule 3), and is billed from then. A handle that cannot be recorded
        is stopped, as in ``flush``."""
        for rec, handle in launched:
            try:
                self.store.record_handle(rec.id, handle.to_dict(), launched=self.backend.name)
            except (IllegalTransition, Conflict, NotFound) as exc:
                log.info("job %s: launch %s not recorded: %s", rec.id, handle.launch_id, exc)
                self.backend.cancel(handle, 0.0)  # it cannot be recorded: it must not run
                continue
            self.handles[rec.id] = handle
            report.launched.append(rec.id)
            log.info("job %s: launched (%d replica%s), starting", rec.id, len(handle.replicas),
                     "" if len(handle.replicas) == 1 else "s")

    # -- usage -------------------------------------------------------------------------------

    def _bill(self, rec: JobRecord, now: float) -> None:
        since = self.billed_until.get(rec.id)
        placement = rec.job.placement
        if since is None or placement is None or now <= since:
            return
        gpus = sum(d.milli for r in placement.replicas for d in r.devices) / MILLI
        self.billed_until[rec.id] = now
        if gpus:
            self.usage[rec.job.project] = self.usage.get(rec.job.project, 0.0) + gpus * (now - since)

    def flush_usage(self, now: float, force: bool = False) -> None:
        """Store the usage billed since the last flush and each job's ``billed_until``, if
        ``FLUSH_S`` seconds passed since the last (``force``: at once)."""
        if not force and now - self._flush_at < FLUSH_S:
            return
        self._flush_at = now
        pending, self.usage = self.usage, {}
        billed = {j: t for j, t in self.billed_until.items() if t > self._flushed.get(j, 0.0)}
        if not pending and not billed:
            return
        self.store.bill(pending, billed, now)
        self._flushed = dict(self.billed_until)


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


def _billed_from(rec: JobRecord, fallback: float) -> float:
    """Where billing of a job resumes: its ``billed_until`` when that is of this attempt
    (not before it was bound), else when it was bound."""
    started = rec.job.started_at if rec.job.started_at is not None else fallback
    if rec.billed_until is not None and rec.billed_until > started:
        return rec.billed_until
    return started


def _launch_id(stored: dict[str, Any]) -> object:
    """The launch a stored handle names (a handle saved before version 2: its directory)."""
    return stored.get("launch_id", stored.get("attempt_dir"))


def _placeholder(rec: JobRecord) -> Handle:
    """A handle that names nothing, for a job whose stored handle cannot be read."""
    return Handle("none", rec.id, "", ())
