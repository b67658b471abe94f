"""What to do about one active job, given what its backend reports: a pure function.

``judge(view, now)`` looks at a job that holds resources (SCHEDULED, RUNNING or PREEMPTING)
together with the ``Status`` of its replicas and returns a ``Verdict``: at most one state move
(with exit code and reason), and at most one action on the processes (send the checkpoint
signal, or stop them with a grace period). The control loop carries it out; nothing here does
I/O or reads a clock.

Rules, first match wins:

"Runs" below means that some replica still runs: a gang with a lost or failed replica is stopped
before it is judged, so that no process outlives its job.

1. Cancel requested: while anything runs, stop it with the job's grace period; once nothing
   runs, CANCELLED.
2. PREEMPTING: all replicas exited 0 -> SUCCEEDED (it finished within its grace); something
   runs and the deadline is ahead -> send the checkpoint signal; the deadline passed -> stop
   at once; nothing runs -> requeue (PENDING). A preemption does not use the restart budget.
3. Running: a SCHEDULED job becomes RUNNING. A gang whose replica failed while others still
   run is stopped (its peers cannot go on without it), then judged when all have ended.
4. All exited 0 -> SUCCEEDED. A non-zero exit or a lost replica -> requeue while the restart
   budget lasts (``failures < max_retries``), otherwise FAILED with the exit code. A command
   that could not be started at all (exit 127 with "cannot start" from the supervisor) fails
   at once: retrying cannot help.

Requeues that spend the restart budget carry a reason starting with ``RETRY_PREFIX``, for
people; ``failures`` comes from the job's ``attempts`` column (``rota.control.reconcile``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rota.backends.base import ReplicaState, ReplicaStatus, Status
from rota.core import JobState

RETRY_PREFIX = "retry "
EXIT_CANNOT_START = 127


@dataclass(frozen=True, slots=True)
class JobView:
    """What ``judge`` needs to know about one active job."""

    state: JobState
    status: Status
    cancel_requested: bool = False
    preempt_deadline: float | None = None
    preempt_reason: str = ""
    failures: int = 0
    max_retries: int = 0
    grace_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Verdict:
    move: JobState | None = None
    exit_code: int | None = None
    reason: str | None = None
    checkpoint: bool = False         # send the job's checkpoint signal (once)
    stop_grace_s: float | None = None  # stop the processes, SIGKILL after this grace (once)


KEEP = Verdict()


def judge(view: JobView, now: float) -> Verdict:
    status = view.status
    running = any(r.state is ReplicaState.RUNNING for r in status.replicas)
    if view.cancel_requested:
        if running:
            return Verdict(stop_grace_s=view.grace_s)
        return Verdict(JobState.CANCELLED, _exit_code(status), "cancelled on request")
    if view.state is JobState.PREEMPTING:
        return _preempting(view, running, now)
    if running:
        failed = _first_failure(status)
        if failed is not None:
            return Verdict(stop_grace_s=view.grace_s)
        if view.state is JobState.SCHEDULED:
            return Verdict(JobState.RUNNING, reason="")
        return KEEP
    if status.succeeded:
        return Verdict(JobState.SUCCEEDED, 0, "")
    return _failed(view)


def _preempting(view: JobView, running: bool, now: float) -> Verdict:
    if view.status.succeeded:
        return Verdict(JobState.SUCCEEDED, 0, "finished during its preemption grace period")
    if running:
        if view.preempt_deadline is not None and now >= view.preempt_deadline:
            return Verdict(stop_grace_s=0.0)
        return Verdict(checkpoint=True)
    why = view.preempt_reason or "preempted"
    return Verdict(JobState.PENDING, reason=f"requeued: {why}")


def _failed(view: JobView) -> Verdict:
    status = view.status
    replica = _first_failure(status)
    if replica is None:  # lost without an exit code
        replica = next(r for r in status.replicas if r.state is not ReplicaState.EXITED)
    what = _describe(replica)
    code = replica.exit_code
    hopeless = code == EXIT_CANNOT_START and replica.reason.startswith("cannot start")
    if not hopeless and view.failures < view.max_retries:
        attempt = view.failures + 1
        return Verdict(JobState.PENDING, code,
                       f"{RETRY_PREFIX}{attempt} of {view.max_retries}: {what}")
    if hopeless:
        return Verdict(JobState.FAILED, code, f"the command could not be started: {what}")
    budget = f" (after {view.failures} retries)" if view.max_retries else ""
    return Verdict(JobState.FAILED, code, f"{what}{budget}")


def _first_failure(status: Status) -> ReplicaStatus | None:
    """The replica that ended badly (lost, or exited with a non-zero code), preferring one
    that ended on its own over peers the loop stopped because of it (those carry a reason)."""
    failed = [r for r in status.replicas if r.state is ReplicaState.LOST
              or (r.state is ReplicaState.EXITED and r.exit_code != 0)]
    return next((r for r in failed if not r.reason), failed[0] if failed else None)


def _describe(r: ReplicaStatus) -> str:
    if r.state is ReplicaState.LOST:
        return f"replica {r.rank} was lost: {r.reason or 'no exit status'}"
    if r.exit_code is None:
        return f"replica {r.rank} was stopped before its command started: {r.reason}"
    text = f"replica {r.rank} exited with code {r.exit_code}"
    return f"{text} ({r.reason})" if r.reason else text


def _exit_code(status: Status) -> int | None:
    codes = [c for c in status.exit_codes if c is not None]
    return next((c for c in codes if c != 0), codes[0] if codes else None)
