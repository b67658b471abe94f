"""The rules of ``judge``, one case per rule: what the loop does about an active job given
what its replicas are doing."""

from __future__ import annotations

import pytest

from rota.backends.base import ReplicaState, ReplicaStatus, Status
from rota.control.verdict import JobView, Verdict, judge
from rota.core import End, JobState

S, R, E = JobState, ReplicaState, End
RUN = ReplicaStatus(0, R.RUNNING)
OK = ReplicaStatus(0, R.EXITED, 0)
BAD = ReplicaStatus(0, R.EXITED, 3)
LOST = ReplicaStatus(0, R.LOST, reason="supervisor is gone")
SICK = ReplicaStatus(0, R.LOST, reason="GPU 2: XID 79", cause=End.GPU_UNHEALTHY)
EVICTED = ReplicaStatus(0, R.LOST, reason="its Pod ml/p was evicted", cause=End.PREEMPTED)
NOSTART = ReplicaStatus(0, R.EXITED, 127, reason="cannot start 'x': No such file or directory")
PEER_OK = ReplicaStatus(1, R.EXITED, 0)
PEER_BAD = ReplicaStatus(1, R.EXITED, 9)
PEER_RUN = ReplicaStatus(1, R.RUNNING)


def view(state: JobState, *replicas: ReplicaStatus, **fields) -> JobView:
    return JobView(state, Status(replicas), **fields)


CASES = [
    ("scheduled-and-running-becomes-running", view(S.SCHEDULED, RUN), Verdict(S.RUNNING, reason="")),
    ("running-keeps", view(S.RUNNING, RUN, PEER_RUN), Verdict()),
    # launched, but its backend holds it unstarted: starting, with the backend's reason
    ("scheduled-and-waiting-stays-scheduled",
     JobView(S.SCHEDULED, Status((RUN,), waiting="Slurm job 7 is pending (Priority)")),
     Verdict(waiting="starting: Slurm job 7 is pending (Priority)")),
    # waiting on GPUs that work outside rota holds: taken back at once, placed again, and no
    # restart budget spent (none left here, yet it is requeued, not failed)
    ("scheduled-and-displaced-is-requeued-without-spending-the-budget",
     JobView(S.SCHEDULED, Status((RUN,), waiting="pending", displaced="node1 GPU 0 is taken"),
             max_retries=0),
     Verdict(S.PENDING, reason="requeued: node1 GPU 0 is taken", stop_grace_s=0.0,
             end=E.DISPLACED)),
    # a cancel of a starting job stops its launch, as for a running one
    ("cancel-stops-a-waiting-launch",
     JobView(S.SCHEDULED, Status((RUN,), waiting="pending"), cancel_requested=True, grace_s=5),
     Verdict(stop_grace_s=5)),
    ("all-zero-succeeds", view(S.RUNNING, OK, PEER_OK), Verdict(S.SUCCEEDED, 0, "", end=E.SUCCEEDED)),
    ("fast-job-succeeds-from-scheduled", view(S.SCHEDULED, OK),
     Verdict(S.SUCCEEDED, 0, "", end=E.SUCCEEDED)),
    ("failure-without-budget-fails", view(S.RUNNING, BAD),
     Verdict(S.FAILED, 3, "replica 0 exited with code 3", end=E.FAILED)),
    # 1 failure so far, budget 2: retry number 2, after 2 x the 10 s backoff
    ("failure-within-budget-requeues", view(S.RUNNING, BAD, failures=1, max_retries=2),
     Verdict(S.PENDING, 3, "retry 2 of 2: replica 0 exited with code 3", end=E.FAILED,
             retry_in_s=20.0)),
    # the 8th retry would wait 10 s x 2^7 = 1280 s: capped at 600
    ("backoff-is-capped", view(S.RUNNING, BAD, failures=7, max_retries=9),
     Verdict(S.PENDING, 3, "retry 8 of 9: replica 0 exited with code 3", end=E.FAILED,
             retry_in_s=600.0)),
    ("budget-spent-fails", view(S.RUNNING, BAD, failures=2, max_retries=2),
     Verdict(S.FAILED, 3, "replica 0 exited with code 3 (after 2 retries)", end=E.FAILED)),
    # a lost replica is the infrastructure's fault: requeued whatever the budget, not spent
    ("lost-requeues-without-spending-the-budget", view(S.RUNNING, LOST, failures=0, max_retries=0),
     Verdict(S.PENDING, None, "requeued (node-lost): replica 0 was lost: supervisor is gone",
             end=E.NODE_LOST)),
    ("unhealthy-gpu-requeues", view(S.RUNNING, SICK),
     Verdict(S.PENDING, None, "requeued (gpu-unhealthy): replica 0 was lost: GPU 2: XID 79",
             end=E.GPU_UNHEALTHY)),
    # two losses in a row before this one: the third holds the job
    ("third-loss-in-a-row-holds", view(S.RUNNING, LOST, lost_streak=2, job_id="12"),
     Verdict(S.PENDING, None, "requeued and held: replica 0 was lost: supervisor is gone",
             end=E.NODE_LOST,
             hold="lost 3 times in a row (node-lost, last: replica 0 was lost: supervisor is "
                  "gone); release it once the cause is found: rota release 12")),
    # an eviction (kubectl drain) is the site taking the node back: requeued as preempted,
    # neither billed nor counted towards a hold, however many came before
    ("eviction-requeues-as-preempted", view(S.RUNNING, EVICTED, lost_streak=2, max_retries=0),
     Verdict(S.PENDING, None, "requeued (preempted): replica 0 was lost: its Pod ml/p was "
                              "evicted", end=E.PREEMPTED)),
    ("missing-program-never-retries", view(S.RUNNING, NOSTART, max_retries=5),
     Verdict(S.FAILED, 127, "the command could not be started: replica 0 exited with code 127 "
                            "(cannot start 'x': No such file or directory)", end=E.FAILED)),
    ("gang-with-failed-peer-is-stopped", view(S.RUNNING, RUN, PEER_BAD, grace_s=7),
     Verdict(stop_grace_s=7)),
    ("cancel-stops-what-runs", view(S.RUNNING, RUN, cancel_requested=True, grace_s=5),
     Verdict(stop_grace_s=5)),
    ("cancel-ends-cancelled", view(S.RUNNING, BAD, cancel_requested=True),
     Verdict(S.CANCELLED, 3, "cancelled on request", end=E.CANCELLED)),
    # deadline 100, now 50: within the grace period
    ("victim-gets-the-checkpoint-signal", view(S.PREEMPTING, RUN, preempt_deadline=100),
     Verdict(checkpoint="preemption")),
    # preempted at 40 (deadline 70, grace 30): a checkpoint at 45 saved its work; stop it now
    ("victim-that-checkpointed-since-is-stopped-without-waiting-out-its-grace",
     view(S.PREEMPTING, RUN, preempt_deadline=70, grace_s=30, last_checkpoint_at=45),
     Verdict(stop_grace_s=5.0)),
    # the same, but its last checkpoint (at 35) is older than the preemption: signal it
    ("victim-whose-checkpoint-is-older-than-its-preemption-gets-the-signal",
     view(S.PREEMPTING, RUN, preempt_deadline=70, grace_s=30, last_checkpoint_at=35),
     Verdict(checkpoint="preemption")),
    # deadline 40, now 50: grace over
    ("victim-past-its-deadline-is-stopped", view(S.PREEMPTING, RUN, preempt_deadline=40),
     Verdict(stop_grace_s=0.0)),
    ("stopped-victim-is-requeued", view(S.PREEMPTING, BAD, preempt_reason="preempted for 9"),
     Verdict(S.PENDING, reason="requeued: preempted for 9", end=E.PREEMPTED)),
    ("victim-that-finished-succeeds", view(S.PREEMPTING, OK),
     Verdict(S.SUCCEEDED, 0, "finished during its preemption grace period", end=E.SUCCEEDED)),
    ("reclaimed-idle-is-stopped-at-once", view(S.RUNNING, RUN, reclaim="idle for 30m"),
     Verdict(stop_grace_s=5.0)),
    ("reclaimed-idle-ends-cancelled", view(S.RUNNING, ReplicaStatus(0, R.EXITED, 143),
                                           reclaim="idle for 30m"),
     Verdict(S.CANCELLED, 143, "reclaimed as idle: idle for 30m", end=E.RECLAIMED_IDLE)),
    # walltime 100 from 0, grace 30: now 50 is before 70, nothing to do
    ("walltime-ahead", view(S.RUNNING, RUN, started_at=0, walltime_s=100, grace_s=30), Verdict()),
    # from 20 (limit 120): the signal comes at 120 - 30 = 90; 50 is before it
    ("walltime-not-yet-its-signal", view(S.RUNNING, RUN, started_at=20, walltime_s=100,
                                         grace_s=30), Verdict()),
    # from -30 (limit 70): 50 is within the last 30 s: the checkpoint signal
    ("walltime-signal-before-the-limit", view(S.RUNNING, RUN, started_at=-30, walltime_s=100,
                                              grace_s=30), Verdict(checkpoint="walltime")),
    # from -60 (limit 40): past it, stopped
    ("walltime-reached-stops", view(S.RUNNING, RUN, started_at=-60, walltime_s=100),
     Verdict(stop_grace_s=5.0)),
    ("walltime-stopped-fails-with-its-end", view(S.RUNNING, ReplicaStatus(0, R.EXITED, 143),
                                                 started_at=-60, walltime_s=100),
     Verdict(S.FAILED, 143, "walltime: stopped at its limit of 100 s", end=E.WALLTIME)),
    # from -30 (limit 70, signal at 40): it died of the signal; not retried, its end walltime
    ("walltime-death-by-its-signal-is-a-walltime-end",
     view(S.RUNNING, ReplicaStatus(0, R.EXITED, 143), started_at=-30, walltime_s=100, grace_s=30,
          max_retries=3),
     Verdict(S.FAILED, 143, "walltime: ended after its checkpoint signal, 30 s before its "
             "limit of 100 s", end=E.WALLTIME)),
    # from 0 (limit 100, signal at 70): a failure at 50 is the job's own, retried
    ("a-failure-before-the-walltime-signal-is-retried",
     view(S.RUNNING, ReplicaStatus(0, R.EXITED, 1), started_at=0, walltime_s=100, grace_s=30,
          max_retries=3),
     Verdict(S.PENDING, 1, "retry 1 of 3: replica 0 exited with code 1", end=E.FAILED,
             retry_in_s=10.0)),
    ("walltime-success-at-the-limit-is-a-success",
     view(S.RUNNING, OK, started_at=-60, walltime_s=100),
     Verdict(S.SUCCEEDED, 0, "", end=E.SUCCEEDED)),
    # a backend that enforces the walltime (Slurm's --time/--signal): no signal, no stop here
    ("walltime-by-backend-no-signal", view(S.RUNNING, RUN, started_at=-30, walltime_s=100,
                                           grace_s=30, walltime_by_backend=True), Verdict()),
    ("walltime-by-backend-no-stop", view(S.RUNNING, RUN, started_at=-60, walltime_s=100,
                                         walltime_by_backend=True), Verdict()),
    # the backend says its walltime ended it (Slurm's TIMEOUT, counted from Slurm's own start,
    # after rota's limit by this clock): the local backend's walltime end, not a retry
    ("walltime-ended-by-backend-is-a-walltime-end",
     view(S.RUNNING, ReplicaStatus(0, R.EXITED, 137, cause=E.WALLTIME), started_at=0,
          walltime_s=100, max_retries=3, walltime_by_backend=True),
     Verdict(S.FAILED, 137, "walltime: stopped at its limit of 100 s", end=E.WALLTIME)),
]


@pytest.mark.parametrize("job, expected", [pytest.param(v, e, id=i) for i, v, e in CASES])
def test_judge(job: JobView, expected: Verdict) -> None:
    assert judge(job, now=50.0) == expected
