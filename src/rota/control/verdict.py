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
   runs, CANCELLED. Reclaimed as idle (``reclaim``: why): stopped at once (SIGTERM, SIGKILL
   ``RECLAIM_KILL_WAIT_S`` later), then CANCELLED with the end ``reclaimed-idle``.
2. PREEMPTING: all replicas exited 0 -> SUCCEEDED (it finished within its grace); something
   runs and the deadline is ahead -> send the checkpoint signal; the job reported a checkpoint
   since its preemption began (``rota checkpoint``) -> stop it now (SIGTERM, SIGKILL
   ``CHECKPOINTED_KILL_WAIT_S`` later): its work is saved, and the preemptor need not wait out
   the grace period; the deadline passed -> stop at once; nothing runs -> requeue (PENDING).
   A preemption does not use the restart budget.
3. Running: a SCHEDULED job becomes RUNNING once its backend runs it. One that its backend
   holds unstarted (``Status.waiting``) stays SCHEDULED (*starting*), with the backend's
   reason (``Verdict.waiting``); one that waits because work outside rota holds the devices
   it was placed on (``Status.displaced``) is taken back at once (stopped, without a grace:
   nothing of it runs) and requeued with the end ``displaced``, which spends no restart
   budget, so that the next cycle places it elsewhere. A gang whose replica failed while
   others still run is stopped (its peers cannot go on without it), then judged when all
   have ended.
   Walltime, as Slurm's ``--time`` with ``--signal``: ``grace_s`` before the limit
   (``started_at + walltime_s``) the job gets its checkpoint signal; at the limit it is
   stopped (SIGTERM, SIGKILL ``WALLTIME_KILL_WAIT_S`` later). A job that ends without
   succeeding once its signal is due (its last ``grace_s`` included: a job that does not catch
   the signal dies of it) ends FAILED with the end ``walltime``; it is not retried. Where the
   backend's system enforces the walltime itself (``walltime_by_backend``: Slurm's ``--time``
   and ``--signal``), nothing is sent from here, so that the job gets one checkpoint signal
   and ends as that system says (Slurm: TIMEOUT); a job the backend reports ended by its
   walltime (a replica with the cause ``End.WALLTIME``) ends the same way, whatever the clock
   here says (Slurm counts from its own start, in whole minutes).
4. All exited 0 -> SUCCEEDED. A lost replica (its node, supervisor or GPU failed: no exit
   code) is a fault of the infrastructure, not the job's: requeue without spending the restart
   budget, end ``node-lost`` (or ``gpu-unhealthy``); the ``MAX_LOST_IN_A_ROW``-th loss in a
   row requeues it *held*, so that a job that kills its nodes does not loop. A replica the
   backend reports taken back by the site (the cause ``End.PREEMPTED``: a Pod evicted by
   ``kubectl drain``) is no fault: the job is requeued as preempted, never held. A non-zero exit
   -> requeue while the restart budget lasts (``failures < max_retries``), after a backoff that
   doubles with each failure (``backoff_s``, ``2 * backoff_s``, ... up to ``MAX_BACKOFF_S``),
   otherwise FAILED with the exit code. A command that could not be started at all (exit 127
   with "cannot start" from the supervisor) fails at once: retrying cannot help.

Every move out of a holding state says how the attempt ended (``Verdict.end``, a
``rota.core.End``): the job's history keeps it. Requeues that spend the restart budget carry
a reason starting with ``RETRY_PREFIX``, for people.
"""

from __future__ import annotations

from dataclasses import dataclass

from rota.backends.base import ReplicaState, ReplicaStatus, Status
from rota.core import End, JobState
from rota.core.shortforms import STARTING

RETRY_PREFIX = "retry "
EXIT_CANNOT_START = 127
MAX_LOST_IN_A_ROW = 3
MAX_BACKOFF_S = 600.0
WALLTIME_KILL_WAIT_S = 5.0  # from SIGTERM at the limit to SIGKILL (Slurm's KillWait)
RECLAIM_KILL_WAIT_S = 5.0   # an idle job's GPUs are wanted now
CHECKPOINTED_KILL_WAIT_S = 5.0  # a preempted job that has saved its work: from SIGTERM to SIGKILL


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
    lost_streak: int = 0       # attempts before this one lost in a row to faults
    backoff_s: float = 10.0    # the first retry's wait; each further one doubles it
    job_id: str = ""           # for the advice in a held job's reason
    started_at: float | None = None
    walltime_s: float | None = None
    reclaim: str | None = None  # reclaimed as idle: why
    last_checkpoint_at: float | None = None  # the attempt's last reported checkpoint
    walltime_by_backend: bool = False  # the backend signals and stops it at its walltime

    @property
    def limit(self) -> float | None:
        """When the walltime runs out; None without a walltime."""
        if self.started_at is None or self.walltime_s is None:
            return None
        return self.started_at + self.walltime_s


@dataclass(frozen=True, slots=True)
class Verdict:
    move: JobState | None = None
    exit_code: int | None = None
    reason: str | None = None
    checkpoint: str | None = None    # send the checkpoint signal (once per purpose: why)
    stop_grace_s: float | None = None  # stop the processes, SIGKILL after this grace (once)
    end: End | None = None           # how the attempt ended, with a move out of holding
    hold: str | None = None          # a requeue that holds the job back: why
    retry_in_s: float | None = None  # a requeue that may not start before this much time
    waiting: str | None = None       # a SCHEDULED job its backend has not started yet: why
    max_rss_kib: int | None = None   # with a move out of holding: the attempt's peak memory


KEEP = Verdict()


def judge(view: JobView, now: float) -> Verdict:
    status = view.status
    running = any(r.state is ReplicaState.RUNNING for r in status.replicas)
    if view.cancel_requested:
        if running:
            return Verdict(stop_grace_s=view.grace_s)
        return Verdict(JobState.CANCELLED, _exit_code(status), "cancelled on request",
                       end=End.CANCELLED)
    if view.reclaim is not None and view.state is not JobState.PREEMPTING:
        if running:
            return Verdict(stop_grace_s=RECLAIM_KILL_WAIT_S)
        return Verdict(JobState.CANCELLED, _exit_code(status),
                       f"reclaimed as idle: {view.reclaim}", end=End.RECLAIMED_IDLE)
    if view.state is JobState.PREEMPTING:
        return _preempting(view, running, now)
    if running:
        failed = _first_failure(status)
        if failed is not None:
            return Verdict(stop_grace_s=view.grace_s)
        if view.state is JobState.SCHEDULED:
            return _starting(status)
        return _walltime(view, now)
    if status.succeeded:
        return Verdict(JobState.SUCCEEDED, 0, "", end=End.SUCCEEDED)
    limit = view.limit
    ended_by_backend = any(r.cause is End.WALLTIME for r in status.replicas)
    if ended_by_backend or (limit is not None and now >= limit):
        limit_of = f" of {view.walltime_s:g} s" if view.walltime_s is not None else ""
        return Verdict(JobState.FAILED, _exit_code(status),
                       f"walltime: stopped at its limit{limit_of}", end=End.WALLTIME)
    if limit is not None and now >= limit - view.grace_s:
        return Verdict(JobState.FAILED, _exit_code(status),
                       f"walltime: ended after its checkpoint signal, {view.grace_s:g} s before "
                       f"its limit of {view.walltime_s:g} s", end=End.WALLTIME)
    return _failed(view)


def _starting(status: Status) -> Verdict:
    """A SCHEDULED job whose launch is alive: RUNNING once its backend runs it (rule 3)."""
    if status.displaced is not None:
        return Verdict(JobState.PENDING, reason=f"requeued: {status.displaced}",
                       stop_grace_s=0.0, end=End.DISPLACED)
    if status.waiting is not None:
        return Verdict(waiting=f"{STARTING}{status.waiting}")
    return Verdict(JobState.RUNNING, reason="")


def _walltime(view: JobView, now: float) -> Verdict:
    limit = view.limit
    if limit is None or view.walltime_by_backend or now < limit - view.grace_s:
        return KEEP
    if now < limit:
        return Verdict(checkpoint="walltime")
    return Verdict(stop_grace_s=WALLTIME_KILL_WAIT_S)


def _preempting(view: JobView, running: bool, now: float) -> Verdict:
    if view.status.succeeded:
        return Verdict(JobState.SUCCEEDED, 0, "finished during its preemption grace period",
                       end=End.SUCCEEDED)
    if running:
        deadline = view.preempt_deadline
        if deadline is not None and now >= deadline:
            return Verdict(stop_grace_s=0.0)
        if deadline is not None and view.last_checkpoint_at is not None \
                and view.last_checkpoint_at >= deadline - view.grace_s:
            return Verdict(stop_grace_s=CHECKPOINTED_KILL_WAIT_S)
        return Verdict(checkpoint="preemption")
    why = view.preempt_reason or "preempted"
    return Verdict(JobState.PENDING, reason=f"requeued: {why}", end=End.PREEMPTED)


def _failed(view: JobView) -> Verdict:
    status = view.status
    lost = [r for r in status.replicas if r.state is ReplicaState.LOST]
    if lost:
        return _lost(view, lost[0])
    replica = _first_failure(status)
    if replica is None:  # stopped without an exit code
        replica = next(r for r in status.replicas if r.state is not ReplicaState.EXITED)
    what = _describe(replica)
    code = replica.exit_code
    hopeless = code == EXIT_CANNOT_START and replica.reason.startswith("cannot start")
    if not hopeless and view.failures < view.max_retries:
        attempt = view.failures + 1
        return Verdict(JobState.PENDING, code,
                       f"{RETRY_PREFIX}{attempt} of {view.max_retries}: {what}", end=End.FAILED,
                       retry_in_s=min(MAX_BACKOFF_S, view.backoff_s * 2 ** view.failures))
    if hopeless:
        return Verdict(JobState.FAILED, code, f"the command could not be started: {what}",
                       end=End.FAILED)
    budget = f" (after {view.failures} retries)" if view.max_retries else ""
    return Verdict(JobState.FAILED, code, f"{what}{budget}", end=End.FAILED)


def _lost(view: JobView, replica: ReplicaStatus) -> Verdict:
    """A fault of the infrastructure, or the site taking the node back: requeued, not billed
    to the job's restart budget; only faults count towards a hold."""
    end = replica.cause or End.NODE_LOST
    what = _describe(replica)
    if not end.fault:
        return Verdict(JobState.PENDING, reason=f"requeued ({end}): {what}", end=end)
    streak = view.lost_streak + 1
    if streak >= MAX_LOST_IN_A_ROW:
        return Verdict(JobState.PENDING, reason=f"requeued and held: {what}", end=end, hold=(
            f"lost {streak} times in a row ({end}, last: {what}); release it once the cause is "
            f"found: rota release {view.job_id or 'ID'}"))
    return Verdict(JobState.PENDING, reason=f"requeued ({end}): {what}", end=end)


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
