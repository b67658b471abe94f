"""Job lifecycle: the state table is the specification.

The legal moves are written out here on their own (not read from ``TRANSITIONS``), so that a
change to the table is a change to this specification too. Every pair of states is checked:
each legal move is allowed, every other move raises ``IllegalTransition``.
"""

from __future__ import annotations

import itertools

import pytest

from builders import job
from rota.core import TRANSITIONS, IllegalTransition, JobState, check_transition

S = JobState

LEGAL = {
    (S.PENDING, S.SCHEDULED),     # bind
    (S.PENDING, S.CANCELLED),     # cancel while waiting
    (S.PENDING, S.FAILED),        # reject (never fits, unknown queue)
    (S.SCHEDULED, S.RUNNING),     # backend reports it started
    (S.SCHEDULED, S.PREEMPTING),  # evicted before it started
    (S.SCHEDULED, S.PENDING),     # requeue: lost node before start
    (S.SCHEDULED, S.FAILED),      # could not be started
    (S.SCHEDULED, S.CANCELLED),
    (S.SCHEDULED, S.SUCCEEDED),   # ran and exited 0 between two polls
    (S.RUNNING, S.SUCCEEDED),     # exit 0
    (S.RUNNING, S.FAILED),        # exit != 0, lost node, retries spent
    (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.PREEMPTING),    # chosen as a victim: grace period starts
    (S.RUNNING, S.PENDING),       # requeue after a failure with retries left
    (S.PREEMPTING, S.PENDING),    # checkpointed and exited: back in the queue
    (S.PREEMPTING, S.SUCCEEDED),  # finished during its grace period
    (S.PREEMPTING, S.FAILED),
    (S.PREEMPTING, S.CANCELLED),
}
ALL_PAIRS = list(itertools.product(JobState, JobState))


def test_the_table_is_exactly_the_specified_moves():
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == LEGAL


@pytest.mark.parametrize("current,new", sorted(LEGAL), ids=lambda s: s.value)
def test_legal_move_is_allowed(current, new):
    check_transition(current, new)  # no exception


@pytest.mark.parametrize("current,new", [p for p in ALL_PAIRS if p not in LEGAL],
                         ids=lambda s: s.value)
def test_any_other_move_is_refused(current, new):
    with pytest.raises(IllegalTransition) as err:
        check_transition(current, new)
    assert current.value in err.value.message and new.value in err.value.message
    assert err.value.code == "illegal_transition"


@pytest.mark.parametrize("state", [S.SUCCEEDED, S.FAILED, S.CANCELLED], ids=str)
def test_terminal_states_have_no_way_out(state):
    assert state.terminal and not state.holds_resources
    for new in JobState:
        with pytest.raises(IllegalTransition, match="terminal"):
            check_transition(state, new)


@pytest.mark.parametrize("state,holds", [
    (S.PENDING, False), (S.SCHEDULED, True), (S.RUNNING, True),
    (S.PREEMPTING, True),  # a victim keeps its GPUs until it has checkpointed and exited
    (S.SUCCEEDED, False), (S.FAILED, False), (S.CANCELLED, False),
], ids=lambda v: str(v))
def test_which_states_hold_resources(state, holds):
    assert state.holds_resources is holds


def test_move_to_returns_a_new_job_and_leaves_the_old_one_alone():
    running = job("j").gpus(1).running_on(("n1", [0])).build()
    victim = running.move_to(S.PREEMPTING)
    assert victim.state is S.PREEMPTING and running.state is S.RUNNING
    assert victim.placement == running.placement  # still holds its GPUs
    requeued = victim.move_to(S.PENDING, placement=None, flavor=None, started_at=None)
    assert requeued.state is S.PENDING and requeued.placement is None


def test_move_to_refuses_an_illegal_move():
    pending = job("j").build()
    with pytest.raises(IllegalTransition):
        pending.move_to(S.RUNNING)  # must be scheduled (bound) first
