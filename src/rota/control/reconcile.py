"""The control loop's side effects on jobs: reconcile them with their backend, launch, bill.

``Reconciler`` keeps what this process knows beyond the store: the handle of every job it
launched or adopted (a job seen for the first time, e.g. after a restart, is adopted through
``backend.adopt``; later passes ask ``backend.poll`` about all of them at once), which jobs
were already sent their checkpoint signal or asked to stop (each is done once), and up to when
each running job was billed. A poll that fails (the backend cannot answer) fails the pass
before anything is judged: not knowing is never taken for a lost job.

Every decision about a job is ``rota.control.verdict.judge``'s; this module only carries it out.
A state move goes through ``Store.transition`` (one transaction, checked against the state
table); a move that a concurrent change made illegal is skipped and looked at again next pass.

Launch: the working directory is prepared here (``rota.control.runspec``), except for a
backend that runs container images (``Capabilities.containers``): there the ``workdir`` is a
path in the image, and an upload, which cannot reach it, is refused. Attempt ``n`` of a job
is its ``attempts`` column; ``backend.launch(..., attempt=n)`` never starts an attempt twice,
so a job found SCHEDULED after a restart (bound, maybe launched, handle never saved) is
launched through the same call and adopted if it had started. A stored handle of an earlier
attempt (a job requeued and bound again) is not the job's: it is ignored. A job being
preempted or cancelled without a handle of its current attempt is looked for with
``backend.recover`` first, so that nothing it started runs on.

Restart budget: ``attempts`` counts every requeue, ``failures`` those that spend the budget;
requeues after a preemption do not, every other one (a failed run, a failed
launch) does.

Usage is billed per pass: GPU-seconds (devices x their share x seconds) of every job holding
devices since it was last billed, stored per project together with each job's
``billed_until`` (``Store.bill``, one transaction). A job seen for the first time after a
restart is billed from its ``billed_until`` (else its ``started_at``), so the time the control
plane was down is billed; one that ended meanwhile is billed up to when it ended, as its
backend reports it. A crash loses at most the usage of the pass it interrupted.
"""

from __future__ import annotations

import logging
import signal as signals
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rota.backends.base import (
    Backend, BackendError, Handle, LaunchSpec, ReplicaState, ReplicaStatus, RunAs, Status,
)
from rota.control.runspec import RunSpec, parse_run, prepare_workdir
from rota.control.verdict import JobView, Verdict, judge
from rota.core import MILLI, IllegalTransition, InvalidSpec, JobState, RotaError
from rota.store import Conflict, JobRecord, NotFound, Store

log = logging.getLogger("rota.control")
LAUNCH_FAILED = "launch failed"
MAX_LAUNCH_FAILURES = 3
KILL_MARGIN_S = 2.0  # after a stop's grace, SIGKILL whatever still runs this much later


@dataclass(slots=True)
class PassReport:
    """What one pass did: state moves as (job, from, to, reason), launches, errors."""

    moves: list[tuple[str, str, str, str]] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def moved(self, job: str, old: JobState, new: JobState, reason: str) -> None:
        self.moves.append((job, str(old), str(new), reason))


class Reconciler:
    """``account`` names the OS account a job runs as (``rota.control.accounts``); without
    one, jobs run as the control plane's own account."""

    def __init__(self, store: Store, backend: Backend, data_dir: Path, since: float,
                 account: Callable[[JobRecord], RunAs | None] = lambda rec: None) -> None:
        self.store, self.backend, self.data_dir = store, backend, data_dir
        self.account = account
        self.since = since  # when this process took over
        self.handles: dict[str, Handle] = {}
        self.signalled: set[str] = set()
        self.kill_at: dict[str, float] = {}
        self.billed_until: dict[str, float] = {}
        self.usage: dict[str, float] = {}  # project -> GPU-seconds not yet stored
        self._flushed: dict[str, float] = {}  # job -> billed_until last stored

    # -- reconcile ---------------------------------------------------------------------------

    def reconcile(self, recs: list[JobRecord], now: float, report: PassReport) -> None:
        """Every active job: launched ones observed together (one ``poll``), then each judged
        and its verdict carried out; one job's fault does not stop the others."""
        observed = self._observe([r for r in recs if current_handle(r) is not None])
        for rec in recs:
            try:
                if rec.id in observed:
                    self._judge(rec, *observed[rec.id], now, report)
                else:
                    self._unlaunched(rec, now, report)
            except Exception as exc:
                report.errors.append(f"job {rec.id}: {exc!r}")
                log.exception("job %s: reconcile failed", rec.id)

    def _judge(self, rec: JobRecord, handle: Handle, status: Status, now: float,
               report: PassReport) -> None:
        verdict = judge(self._view(rec, status), now)
        if verdict.checkpoint and rec.id not in self.signalled:
            self.signalled.add(rec.id)
            self.backend.signal(handle, _spec(rec).checkpoint_signal)
        if verdict.stop_grace_s is not None:
            self._stop(rec.id, handle, verdict.stop_grace_s, now)
        ended = status.finished_at
        self._bill(rec, now if ended is None else min(now, ended))
        if verdict.move is not None:
            if status.state is ReplicaState.LOST:
                self.backend.cancel(handle, 0.0)  # no orphan of a lost replica outlives it
            self._move(rec, verdict, report)

    def _unlaunched(self, rec: JobRecord, now: float, report: PassReport) -> None:
        """A job that holds resources without a handle of its current attempt: never launched
        (a crash between the bind and the launch, or a preemption that came first), or
        launched by a control plane that died before saving the handle."""
        if rec.state is JobState.SCHEDULED and not rec.cancel_requested:
            self.launch(rec, now, report)  # adopts the attempt if it had started
            return
        found = self._recover(rec)
        if found is not None:
            log.info("job %s: attempt %d found running without a saved handle; adopted",
                     rec.id, rec.attempts)
            self.store.record_handle(rec.id, found.to_dict())
            return  # the next pass judges it with its handle
        if rec.cancel_requested:
            self._move(rec, Verdict(JobState.CANCELLED, reason="cancelled on request"), report)
        elif rec.state is JobState.SCHEDULED:
            self.launch(rec, now, report)
        elif rec.state is JobState.PREEMPTING:
            self._move(rec, Verdict(JobState.PENDING, reason="requeued: preempted before it "
                                                             "was launched"), report)
        else:  # RUNNING without a handle: nothing can be observed, so it is lost
            lost = Status((ReplicaStatus(0, ReplicaState.LOST, reason="no backend handle"),))
            self._move(rec, judge(self._view(rec, lost), now), report)

    def _recover(self, rec: JobRecord) -> Handle | None:
        if rec.job.placement is None:
            return None
        return self.backend.recover(rec.job, rec.job.placement, rec.attempts)

    def _observe(self, recs: list[JobRecord]) -> dict[str, tuple[Handle, Status]]:
        """Each launched job's handle and status: handles seen for the first time (after a
        restart) are adopted, the others polled in one call."""
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
            self.billed_until.setdefault(rec.id, _billed_from(rec, self.since))
        statuses = self.backend.poll([h for _, h in known]) if known else []
        for (job_id, handle), status in zip(known, statuses, strict=True):
            out[job_id] = handle, status
        return out

    def _view(self, rec: JobRecord, status: Status) -> JobView:
        spec = _spec(rec)
        ended_badly = not status.succeeded and not any(
            r.state is ReplicaState.RUNNING for r in status.replicas)
        failures = self._failures(rec) if ended_badly else 0
        grace = spec.grace_s if spec.grace_s is not None else rec.job.grace_s
        return JobView(rec.state, status, rec.cancel_requested, rec.preempt_deadline,
                       rec.reason, failures, spec.max_retries, grace)

    def _stop(self, job_id: str, handle: Handle, grace_s: float, now: float) -> None:
        if job_id not in self.kill_at:
            self.kill_at[job_id] = now + grace_s + KILL_MARGIN_S
            self.backend.cancel(handle, grace_s)
            if grace_s > 0:
                return
        if grace_s == 0 or now >= self.kill_at[job_id]:
            self.backend.signal(handle, signals.SIGKILL)

    def _move(self, rec: JobRecord, verdict: Verdict, report: PassReport) -> None:
        assert verdict.move is not None
        try:
            after = self.store.transition(rec.id, verdict.move, exit_code=verdict.exit_code,
                                          reason=verdict.reason)
        except (IllegalTransition, Conflict, NotFound) as exc:
            log.info("job %s: skipped %s -> %s: %s", rec.id, rec.state, verdict.move, exc)
            return
        report.moved(rec.id, rec.state, after.state, verdict.reason or "")
        log.info("job %s: %s -> %s%s", rec.id, rec.state, after.state,
                 f" ({verdict.reason})" if verdict.reason else "")
        if after.state is not JobState.RUNNING:
            self.forget(rec.id)

    def forget(self, job_id: str) -> None:
        for table in (self.handles, self.kill_at, self.billed_until):
            table.pop(job_id, None)
        self.signalled.discard(job_id)

    def _failures(self, rec: JobRecord) -> int:
        """Earlier attempts that spent the restart budget: every requeue but preemptions."""
        return rec.failures

    # -- launch ------------------------------------------------------------------------------

    def launch(self, rec: JobRecord, now: float, report: PassReport) -> None:
        """Start a SCHEDULED job and persist its handle (moving it to RUNNING)."""
        if rec.cancel_requested:
            self._move(rec, Verdict(JobState.CANCELLED, reason="cancelled on request"), report)
            return
        try:
            spec = parse_run(rec.run)
            run_as = self.account(rec)
            workdir = self._workdir(spec, rec, run_as)
            assert rec.job.placement is not None
            handle = self.backend.launch(
                rec.job, rec.job.placement,
                LaunchSpec(spec.command, workdir, _env(spec, rec), run_as, spec.image),
                attempt=rec.attempts)
        except InvalidSpec as exc:
            where = exc.field if exc.field.startswith("run") else f"run.{exc.field}"
            self._move(rec, Verdict(JobState.FAILED, reason=(
                f"cannot be started as written: {where}: {exc.reason}")), report)
            return
        except (BackendError, OSError) as exc:
            self._launch_failed(rec, exc, report)
            return
        self._launched(rec, handle, now, report)

    def _workdir(self, spec: RunSpec, rec: JobRecord, run_as: RunAs | None) -> str:
        """Where the job runs: a directory here, prepared; for a backend that runs container
        images, the ``workdir`` as written (a path in the image; "" for the image's own)."""
        if not self.backend.capabilities.containers:
            return str(prepare_workdir(spec, self.data_dir, rec.id, run_as))
        if spec.upload is not None:
            raise InvalidSpec("run.upload", f"the {self.backend.name} backend runs jobs in "
                              "container images, which an uploaded directory does not reach: "
                              "build it into the image")
        return spec.workdir or ""

    def _launched(self, rec: JobRecord, handle: Handle, now: float, report: PassReport) -> None:
        try:
            self.store.transition(rec.id, JobState.RUNNING, reason="",
                                  backend_handle=handle.to_dict())
        except (RotaError, Conflict, NotFound):
            self.backend.cancel(handle, 0.0)  # it cannot be recorded, so it must not run
            raise
        self.handles[rec.id] = handle
        self.billed_until[rec.id] = _billed_from(rec, now)
        report.launched.append(rec.id)
        report.moved(rec.id, rec.state, JobState.RUNNING, "launched")
        log.info("job %s: launched (%d replica%s)", rec.id, len(handle.replicas),
                 "" if len(handle.replicas) == 1 else "s")

    def _launch_failed(self, rec: JobRecord, exc: Exception, report: PassReport) -> None:
        count = self._failures(rec) + 1
        if count >= MAX_LAUNCH_FAILURES:
            verdict = Verdict(JobState.FAILED, reason=f"{LAUNCH_FAILED} {count} times: {exc}")
        else:
            verdict = Verdict(JobState.PENDING, reason=(
                f"{LAUNCH_FAILED} ({count} of {MAX_LAUNCH_FAILURES}), requeued: {exc}"))
        self._move(rec, verdict, report)

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

    def flush_usage(self, now: float) -> None:
        """Store the usage billed since the last flush and each job's ``billed_until``."""
        pending, self.usage = self.usage, {}
        billed = {j: t for j, t in self.billed_until.items() if t > self._flushed.get(j, 0.0)}
        if not pending and not billed:
            return
        self.store.bill(pending, billed, now)
        self._flushed = dict(self.billed_until)


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


def _spec(rec: JobRecord) -> RunSpec:
    """The run spec of a launched job; a job whose ``run`` no longer parses keeps defaults
    (it was valid when launched)."""
    try:
        return parse_run(rec.run)
    except InvalidSpec:
        return RunSpec(command=("true",))


def _env(spec: RunSpec, rec: JobRecord) -> dict[str, str]:
    env: dict[str, Any] = dict(spec.env)
    env["ROTA_ATTEMPT"] = str(rec.attempts)
    if spec.checkpoint_dir is not None:
        env["ROTA_CHECKPOINT_DIR"] = spec.checkpoint_dir
    return env


def _launch_id(stored: dict[str, Any]) -> object:
    """The launch a stored handle names (a handle saved before version 2: its directory)."""
    return stored.get("launch_id", stored.get("attempt_dir"))


def _placeholder(rec: JobRecord) -> Handle:
    """A handle that names nothing, for a job whose stored handle cannot be read."""
    return Handle("none", rec.id, "", ())
