"""Slurm's states as rota reads them, exit codes, and rota's names for its Slurm jobs."""

import pytest

from rota.backends.base import ReplicaState
from rota.backends.slurm.states import (
    JOB_STATES, REPLICA_STATES, ExitCode, JobPhase, attempt_name, end_reason, job_comment,
    job_phase, losing_reason, owner, unschedulable_reason,
)
from rota.backends.slurm.text import SlurmOutputError
from rota.core import InvalidSpec


@pytest.mark.parametrize("state, phase, replica", [
    ("PENDING", JobPhase.PENDING, ReplicaState.RUNNING),      # submitted, not ended
    ("CONFIGURING", JobPhase.RUNNING, ReplicaState.RUNNING),
    ("RUNNING", JobPhase.RUNNING, ReplicaState.RUNNING),
    ("COMPLETING", JobPhase.RUNNING, ReplicaState.RUNNING),   # still on its nodes
    ("SUSPENDED", JobPhase.RUNNING, ReplicaState.RUNNING),
    ("COMPLETED", JobPhase.EXITED, ReplicaState.EXITED),
    ("FAILED", JobPhase.EXITED, ReplicaState.EXITED),
    ("CANCELLED", JobPhase.EXITED, ReplicaState.EXITED),
    ("TIMEOUT", JobPhase.EXITED, ReplicaState.EXITED),
    ("OUT_OF_MEMORY", JobPhase.EXITED, ReplicaState.EXITED),
    ("PREEMPTED", JobPhase.LOST, ReplicaState.LOST),          # Slurm's doing: requeue it
    ("NODE_FAIL", JobPhase.LOST, ReplicaState.LOST),
    ("BOOT_FAIL", JobPhase.LOST, ReplicaState.LOST),
    ("REQUEUED", JobPhase.LOST, ReplicaState.LOST),           # never rerun an attempt
    ("REQUEUE_HOLD", JobPhase.LOST, ReplicaState.LOST),
])
def test_slurm_job_states_map_to_running_exited_or_lost(state, phase, replica):
    assert job_phase(state) is phase
    assert REPLICA_STATES[phase] is replica


def test_every_state_has_a_phase_and_ended_ones_a_reason_where_slurm_did_it():
    for state, (phase, reason) in JOB_STATES.items():
        assert state.isupper()
        if phase is JobPhase.LOST:
            assert reason, state
    assert end_reason("PREEMPTED") == "preempted by Slurm"
    assert end_reason("COMPLETED") == ""
    assert JobPhase.PENDING.started is False and JobPhase.RUNNING.started
    assert JobPhase.EXITED.ended and JobPhase.LOST.ended and not JobPhase.RUNNING.ended


def test_an_unknown_job_state_is_an_error_naming_the_job():
    with pytest.raises(SlurmOutputError, match="job 12.*'EXPLODED'"):
        job_phase("EXPLODED", "job 12")


@pytest.mark.parametrize("state, flags, reason, expected", [
    ("idle", set(), "", None),
    ("mixed", {"COMPLETING"}, "", None),
    ("allocated", {"PLANNED"}, "", None),
    ("idle", {"DRAIN"}, "disk full", "drained in Slurm: disk full"),
    ("mixed", {"DRAIN"}, "", "drained in Slurm"),           # draining: jobs still run
    ("down", set(), "bad gpu", "down in Slurm: bad gpu"),
    ("down", {"NOT_RESPONDING"}, "", "down in Slurm, not responding to Slurm"),
    ("idle", {"FAIL"}, "ecc", "failing in Slurm: ecc"),
    ("idle", {"RESERVED"}, "", "in a Slurm reservation"),
    ("idle", {"MAINTENANCE", "RESERVED"}, "", "in a Slurm maintenance, in a Slurm reservation"),
    ("idle", {"POWERED_DOWN"}, "", "powered down"),
    ("future", set(), "", "not yet in service in Slurm"),
], ids=["idle", "completing", "planned", "drained", "draining", "down", "not-responding",
        "fail", "reserved", "maintenance", "powered-down", "future"])
def test_unschedulable_nodes_carry_slurms_reason(state, flags, reason, expected):
    assert unschedulable_reason(state, frozenset(flags), reason) == expected


@pytest.mark.parametrize("text, code, signal, rota", [
    ("0:0", 0, 0, 0), ("3:0", 3, 0, 3), ("0:9", 0, 9, 137), ("0:15", 0, 15, 143),
])
def test_exit_codes_read_code_and_signal(text, code, signal, rota):
    exit_code = ExitCode.parse(text)
    assert (exit_code.code, exit_code.signal, exit_code.exit_code) == (code, signal, rota)
    assert str(exit_code) == text


@pytest.mark.parametrize("status, expected", [
    (0, ExitCode(0)), (768, ExitCode(3)), (1024, ExitCode(4)), (9, ExitCode(0, 9)),
    (15, ExitCode(0, 15)),
])
def test_squeue_wait_statuses_become_exit_codes(status, expected):
    # squeue --json prints the wait status: exit 3 is 3 << 8 = 768, SIGKILL is 9
    assert ExitCode.from_wait_status(status) == expected


@pytest.mark.parametrize("text", ["3", "a:b", "3:0:1", ""])
def test_malformed_exit_codes_are_errors(text):
    with pytest.raises(SlurmOutputError, match="code:signal"):
        ExitCode.parse(text)


def test_attempt_names_round_trip_through_owner():
    assert attempt_name("17", 2) == "rota-17-2"
    assert job_comment("17") == "rota:17"
    assert owner("rota-17-2", "rota:17") == ("17", 2)
    assert owner("rota-a-b-3", "rota:a-b") == ("a-b", 3)     # ids may hold dashes
    assert owner("rota-17-2", "") == ("17", 2)               # sacct without job_comment


@pytest.mark.parametrize("name, comment", [
    ("train", ""), ("rota-17", "rota:17"), ("rota-17-x", "rota:17"),
    ("rota-17-2", "rota:18"), ("rota-17-2", "my own job"),
], ids=["other-name", "no-attempt", "bad-attempt", "other-job", "user-comment"])
def test_jobs_with_other_names_or_comments_are_not_rotas(name, comment):
    assert owner(name, comment) is None


@pytest.mark.parametrize("job_id", ["", "a b", "x;rm", "-1"])
def test_job_ids_unfit_for_slurm_names_are_refused(job_id):
    with pytest.raises(InvalidSpec, match="id"):
        attempt_name(job_id, 1)


@pytest.mark.parametrize("state, flags, expected", [
    ("mixed", {"DRAIN"}, None),                               # draining: jobs may end
    ("allocated", {"FAIL"}, None),                            # failing: the same, as Slurm
    ("down", set(), "down in Slurm: fan"),
    ("error", set(), "in error in Slurm: fan"),
    ("down", {"DRAIN"}, "down in Slurm: fan"),
    ("allocated", {"NOT_RESPONDING"}, None),                  # Slurm fails the job if it must
    ("unknown", set(), None),                                 # every node, as slurmctld starts
    ("allocated", {"RESERVED"}, None),                        # a reservation waits for the job
    ("mixed", {"REBOOT_REQUESTED"}, None),
])
def test_a_running_job_leaves_a_node_only_when_it_is_down_or_in_error(state, flags, expected):
    assert losing_reason(state, "fan") == expected  # the node's flags do not matter


def test_an_attempt_is_the_instances_whose_comment_it_carries():
    assert job_comment("17", "abc") == "rota:17@abc"
    assert owner("rota-17-2", "rota:17@abc", "abc") == ("17", 2)
    assert owner("rota-17-2", "rota:17@xyz", "abc") is None     # another rota's job 17
    assert owner("rota-17-2", "rota:17", "abc") is None
    assert owner("rota-17-2", "", "abc") == ("17", 2)           # sacct without job_comment
