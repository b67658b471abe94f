"""What an attempt on Slurm is doing, from squeue, sacct and the node states (pure), and where
its replicas landed."""

from dataclasses import replace

import pytest

from rota.backends.base import Handle, ReplicaHandle, ReplicaState as R
from rota.backends.slurm.nodes import node_report
from rota.backends.slurm.observe import ACCOUNTING_WAIT_S, Seen, attempt_status, landed
from rota.backends.slurm.records import NodeAllocation, SlurmJob, SlurmStep
from rota.backends.slurm.states import ExitCode
from rota.backends.slurm.text import Gres
from rota.core import DeviceShare, End, Placement, ReplicaPlacement
from slurmkit import GPU_TYPES, slurm_node

H100 = 81920
REPORTS = {n: node_report(slurm_node(n), GPU_TYPES) for n in ("n1", "n2", "n3")}


def handle(*replicas, pinned=True, slurm_id=41):
    """handle(("n1", 0), ("n2", 1)): one replica per item, on that node and GPU."""
    reps = tuple(ReplicaHandle(k, node, tuple(DeviceShare(i, 1000, H100) for i in idx))
                 for k, (node, *idx) in enumerate(replicas))
    return Handle("slurm", "7", str(slurm_id), reps, 0,
                  {"slurm_job": slurm_id, "name": "rota-7-0", "pinned": pinned})


def sjob(state="RUNNING", nodes=("n1",), exit=None, start=100.0, end=None, allocations=(),
         steps=(), job_id=41):
    return SlurmJob(id=job_id, name="rota-7-0", comment="rota:7", state=state, reason="None",
                    partition="debug", nodes=nodes, exit=exit, start_time=start, end_time=end,
                    time_limit_s=None, allocations=allocations, steps=steps)


def alloc(node, *gres):
    return NodeAllocation(node, 1, 1000, tuple(gres))


def step(rank, state, code, signal=0, end=200.0):
    return SlurmStep(str(rank), f"rank-{rank}", state, ("n1",), 100.0, end,
                     ExitCode(code, signal))


def states(status):
    return [(r.state, r.exit_code, r.reason) for r in status.replicas]


def test_a_job_pending_or_running_in_slurm_runs():
    one = handle(("n1", 0))
    assert states(attempt_status(one, Seen(sjob("PENDING", start=None)))) == [(R.RUNNING, None, "")]
    assert states(attempt_status(one, Seen(sjob()))) == [(R.RUNNING, None, "")]


def test_a_job_pending_behind_the_job_that_still_holds_its_gpus_runs_where_placed():
    # the next job, queued on GPUs that a job which reported its end still holds: Slurm keeps
    # it pending for Resources, with no nodes yet; rota counts it running where it placed it
    successor = handle(("n1", 2))
    waiting = replace(sjob("PENDING", nodes=(), start=None), reason="Resources")
    status = attempt_status(successor, Seen(waiting, reports=REPORTS))
    assert states(status) == [(R.RUNNING, None, "")] and status.placement is None


def test_a_job_pending_in_slurm_is_waiting_with_slurms_reason_and_a_running_one_is_not():
    one = handle(("n1", 0))
    pending = replace(sjob("PENDING", nodes=(), start=None), reason="Priority")
    status = attempt_status(one, Seen(pending))
    assert status.waiting == "Slurm job 41 is pending (Priority)" and status.displaced is None
    assert attempt_status(one, Seen(sjob())).waiting is None


@pytest.mark.parametrize("reason,foreign,pinned,why", [
    # node n1's GPU 0, where rota placed it, is held by a plain sbatch job: displaced
    ("Resources", {"n1": frozenset({0, 1})}, True,
     "Slurm job 41 waits (Resources) for GPUs that work outside rota holds: n1 GPU 0"),
    ("Priority", {"n1": frozenset({0})}, True,
     "Slurm job 41 waits (Priority) for GPUs that work outside rota holds: n1 GPU 0"),
    # foreign work on other GPUs of n1: it waits for rota's own job (a successor), not displaced
    ("Resources", {"n1": frozenset({2, 3})}, True, None),
    ("Resources", {"n2": frozenset({0})}, True, None),
    # not yet looked at by Slurm's scheduler, or held: no judgement yet
    ("None", {"n1": frozenset({0})}, True, None),
    ("JobHeldUser", {"n1": frozenset({0})}, True, None),
    # Slurm places an unpinned job where it likes
    ("Resources", {"n1": frozenset({0})}, False, None),
], ids=["resources", "priority", "other-gpus", "other-node", "not-scheduled-yet", "held",
        "unpinned"])
def test_a_pinned_job_waiting_on_gpus_held_by_work_outside_rota_is_displaced(
        reason, foreign, pinned, why):
    pending = replace(sjob("PENDING", nodes=(), start=None), reason=reason)
    status = attempt_status(handle(("n1", 0), pinned=pinned), Seen(pending, foreign=foreign))
    assert status.displaced == why and status.waiting == f"Slurm job 41 is pending ({reason})"


def test_a_replica_on_a_drained_node_is_lost_with_slurms_reason():
    gang = handle(("n1", 0), ("n2", 0))
    seen = Seen(sjob(nodes=("n1", "n2")), losing={"n2": "drained in Slurm: fan"})
    assert states(attempt_status(gang, seen)) == [
        (R.RUNNING, None, ""), (R.LOST, None, "n2 is drained in Slurm: fan")]


def test_a_pending_job_loses_a_drained_node_only_where_rota_pinned_it():
    losing = {"n1": "drained in Slurm: fan"}
    pending = sjob("PENDING", start=None)
    assert attempt_status(handle(("n1", 0)), Seen(pending, losing=losing)).state is R.LOST
    unpinned = handle(("n1", 0), pinned=False)  # Slurm will place it elsewhere
    assert attempt_status(unpinned, Seen(pending, losing=losing)).state is R.RUNNING


def test_an_ended_job_of_one_replica_exits_with_the_jobs_code():
    status = attempt_status(handle(("n1", 0)), Seen(sjob("FAILED", exit=ExitCode(3), end=150.0),
                                                     now=151.0))
    assert states(status) == [(R.EXITED, 3, "")] and status.finished_at == 150.0
    killed = attempt_status(handle(("n1", 0)), Seen(sjob("CANCELLED", exit=ExitCode(0, 15),
                                                         end=150.0)))
    assert [(r.exit_code, r.signal, r.reason) for r in killed.replicas] == [
        (143, 15, "cancelled in Slurm")]                   # 128 + SIGTERM, as on local


def test_a_gang_reports_each_replicas_step():
    gang = handle(("n1", 0), ("n2", 0))
    ended = sjob("FAILED", nodes=("n1", "n2"), exit=ExitCode(3), end=150.0)
    accounted = replace(ended, steps=(step(0, "CANCELLED", 0, 9), step(1, "FAILED", 3)))
    status = attempt_status(gang, Seen(ended, accounted, now=151.0))
    assert states(status) == [(R.EXITED, 137, "cancelled in Slurm"), (R.EXITED, 3, "")]


def test_a_job_slurm_stopped_at_its_time_limit_ended_by_its_walltime():
    # sacct of a rota job past its --time on the fixture: TIMEOUT 0:0, step rank-0 CANCELLED 0:9
    ended = sjob("TIMEOUT", exit=ExitCode(0), end=150.0, steps=(step(0, "CANCELLED", 0, 9),))
    status = attempt_status(handle(("n1", 0)), Seen(None, ended, now=160.0))
    assert [(r.state, r.exit_code, r.cause) for r in status.replicas] == [
        (R.EXITED, 137, End.WALLTIME)]
    listed = attempt_status(handle(("n1", 0)), Seen(sjob("TIMEOUT", exit=ExitCode(0, 9),
                                                         end=150.0), accounting=False))
    assert [(r.exit_code, r.cause) for r in listed.replicas] == [(137, End.WALLTIME)]
    cancelled = replace(ended, state="CANCELLED")        # stopped by someone, not its walltime
    assert attempt_status(handle(("n1", 0)), Seen(None, cancelled)).replicas[0].cause is None


def test_a_gang_waits_for_its_steps_in_accounting_then_takes_the_jobs_code():
    gang = handle(("n1", 0), ("n2", 0))
    ended = sjob("FAILED", nodes=("n1", "n2"), exit=ExitCode(3), end=150.0)
    early = attempt_status(gang, Seen(ended, None, now=151.0))
    assert early.state is R.RUNNING                        # sacct has no steps yet
    late = attempt_status(gang, Seen(ended, None, now=150.0 + ACCOUNTING_WAIT_S))
    assert states(late) == [(R.EXITED, 3, ""), (R.EXITED, 3, "")]
    without = attempt_status(gang, Seen(ended, None, accounting=False, now=151.0))
    assert without.state is R.EXITED                       # no accounting: nothing to wait for


def test_a_gang_slurm_lists_completed_exited_0_everywhere_without_waiting_for_sacct():
    """The batch script exits 0 only when every replica did: squeue's brief record (no exit
    code, no step) says enough, at once."""
    gang = handle(("n1", 0), ("n2", 0))
    done = sjob("COMPLETED", nodes=("n1", "n2"), end=150.0)
    status = attempt_status(gang, Seen(done, None, now=151.0))
    assert states(status) == [(R.EXITED, 0, ""), (R.EXITED, 0, "")]
    assert status.finished_at == 150.0
    # where sacct has the steps, their own end times stand
    steps = (step(0, "COMPLETED", 0, end=149.0), step(1, "COMPLETED", 0, end=150.0))
    accounted = replace(done, steps=steps, exit=ExitCode(0))
    assert [r.finished_at for r in attempt_status(gang, Seen(done, accounted)).replicas] == [
        149.0, 150.0]


@pytest.mark.parametrize("state, reason", [("NODE_FAIL", "a Slurm node failed"),
                                           ("PREEMPTED", "preempted by Slurm")])
def test_a_job_slurm_ended_for_its_own_reasons_is_lost(state, reason):
    status = attempt_status(handle(("n1", 0)), Seen(sjob(state, exit=ExitCode(0), end=150.0)))
    assert states(status) == [(R.LOST, None, reason)]


def test_the_steps_slurm_cancelled_with_a_preempted_gang_do_not_make_it_a_failure():
    # sacct of a job preempted by a higher-tier partition: its steps are CANCELLED (0:15)
    ended = sjob("PREEMPTED", exit=ExitCode(0), end=150.0, nodes=("n1", "n2"),
                 steps=(step(0, "CANCELLED", 0, 15), step(1, "CANCELLED", 0, 15)))
    status = attempt_status(handle(("n1", 0), ("n2", 0)), Seen(None, ended, now=160.0))
    assert states(status) == [(R.LOST, None, "preempted by Slurm")] * 2


def test_a_job_cancelled_before_it_started_ran_nothing():
    status = attempt_status(handle(("n1", 0)), Seen(sjob("CANCELLED", exit=ExitCode(0),
                                                         start=None, end=150.0)))
    assert states(status) == [(R.EXITED, None, "cancelled in Slurm before it started")]
    # as squeue shows it: a start time (that of the cancel) but no node
    listed = sjob("CANCELLED", nodes=(), exit=ExitCode(0), start=150.0, end=150.0)
    assert states(attempt_status(handle(("n1", 0)), Seen(listed))) == states(status)


def test_a_job_slurm_does_not_know_is_lost():
    gone = attempt_status(handle(("n1", 0)), Seen(None, None))
    assert states(gone) == [(R.LOST, None, "Slurm has no record of job 41")]
    forgot = attempt_status(handle(("n1", 0)), Seen(None, sjob()))
    assert forgot.state is R.LOST and "slurmctld has no such job" in forgot.replicas[0].reason
    unaccounted = attempt_status(handle(("n1", 0)), Seen(None, None, accounting=False))
    assert "keeps no accounting" in unaccounted.replicas[0].reason


def test_where_slurm_put_the_devices_of_a_pinned_job():
    gang = handle(("n1", 0), ("n1", 1), ("n2", 2), ("n2", 3))
    ran = sjob(nodes=("n1", "n2"), allocations=(alloc("n1", Gres("gpu", "h100", 2, (2, 3))),
                                                 alloc("n2", Gres("gpu", "h100", 2, (0, 1)))))
    # the two replicas of a node share its GPUs in rank order
    assert landed(gang, ran, REPORTS) == Placement((
        ReplicaPlacement("n1", (DeviceShare(2, 1000, H100),)),
        ReplicaPlacement("n1", (DeviceShare(3, 1000, H100),)),
        ReplicaPlacement("n2", (DeviceShare(0, 1000, H100),)),
        ReplicaPlacement("n2", (DeviceShare(1, 1000, H100),))))
    assert attempt_status(gang, Seen(ran, reports=REPORTS)).placement is not None
    same = sjob(allocations=(alloc("n1", Gres("gpu", "h100", 1, (0,))),))
    assert landed(handle(("n1", 0)), same, REPORTS) is None   # where it was placed


def test_where_slurm_put_an_unpinned_gang_follows_slurms_node_order():
    gang = handle(("n1", 0), ("n1", 1), pinned=False)       # planned on n1, landed on n3, n2
    ran = sjob(nodes=("n2", "n3"), allocations=(alloc("n2", Gres("gpu", "h100", 1, (1,))),
                                                 alloc("n3", Gres("gpu", "h100", 1, (3,)))))
    assert landed(gang, ran, REPORTS) == Placement((
        ReplicaPlacement("n2", (DeviceShare(1, 1000, H100),)),
        ReplicaPlacement("n3", (DeviceShare(3, 1000, H100),))))


def test_a_fraction_lands_on_the_gpu_of_its_shards_holding_what_they_hold():
    planned = Handle("slurm", "7", "41", (ReplicaHandle(0, "n1", (DeviceShare(0, 300, 8192),)),),
                     0, {"slurm_job": 41, "pinned": True})
    # 0.3 of an H100 cut in 4 shards is 2 shards: half of GPU 2
    ran = sjob(allocations=(alloc("n1", Gres("shard", "h100", 2, (2,))),))
    assert landed(planned, ran, REPORTS) == Placement((
        ReplicaPlacement("n1", (DeviceShare(2, 500, 8192),)),))


def test_no_placement_while_slurm_has_not_said_where():
    assert landed(handle(("n1", 0)), sjob(allocations=()), REPORTS) is None
    pending = attempt_status(handle(("n1", 0)), Seen(sjob("PENDING", start=None)))
    assert pending.placement is None
