"""A standby control plane (``rota.control.standby``) on the database of a live leader: it never
takes the lease while the leader renews it, takes it once the leader stopped renewing (dead, or
frozen past its lease), and only then starts its loop; the leader, woken after that, acts no
more, not even in the pass it was frozen in."""

from __future__ import annotations

import pytest

from controlkit import python, submit
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.control.lease import NAME, RETRY_S, TTL_S, LeaseKeeper
from rota.control.standby import Standby
from rota.core import JobState, Node
from rota.scheduler import build_policy
from rota.store.lease import LeaseHeld


def leased_loop(store, backend, data_dir, clock, keeper, lost=None) -> ControlLoop:
    return ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       lease=keeper, on_lease_lost=(lambda: lost.append(True)) if lost is not None
                       else (lambda: None))


def stand_by(store, where, clock, promote) -> Standby:
    keeper = LeaseKeeper(store, where)
    with pytest.raises(LeaseHeld) as held:
        keeper.acquire(clock.now())
    return Standby(keeper, held.value, promote, clock=clock.now)


def test_a_standby_waits_while_the_leader_renews_and_leads_once_its_lease_expired(
        store, backend, data_dir, tmp_path, clock) -> None:
    leader = LeaseKeeper(store, data_dir)
    leader.acquire(clock.now())
    loop = leased_loop(store, backend, data_dir, clock, leader)
    promoted: list[float] = []
    standby = stand_by(store, tmp_path / "elsewhere", clock,
                       lambda: promoted.append(clock.now()))
    assert standby.role().to_dict(clock.now())["role"] == "standby"
    for _ in range(10):  # 20 s, more than three times the lease's time to live
        clock.advance(2)
        loop.step()
        assert not standby.try_once()
    role = standby.role()
    assert (role.role, role.leader) == ("standby", leader.holder) and promoted == []
    died = clock.now()  # the leader stops renewing: killed, or frozen
    while not standby.try_once():
        clock.advance(RETRY_S)
    # the standby leads at most TTL_S + RETRY_S (7 s) after the leader's last renewal:
    # within 10 s of its death
    assert promoted == [clock.now()] and clock.now() - died <= TTL_S + RETRY_S <= 10
    role = standby.role()
    assert (role.role, role.leader) == ("leader", standby.keeper.holder)
    assert store.get_lease(NAME).holder == standby.keeper.holder
    assert standby.try_once() and promoted == [clock.now()]  # promoted once only
    loop.stop()


def test_a_leader_woken_after_its_lease_was_taken_over_launches_nothing(
        store, backend, data_dir, tmp_path, clock) -> None:
    lost: list[bool] = []
    leader = LeaseKeeper(store, data_dir)
    leader.acquire(clock.now())
    old = leased_loop(store, backend, data_dir, clock, leader, lost)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
    planes: list[ControlLoop] = []
    standby = stand_by(store, elsewhere, clock, lambda: planes.append(leased_loop(
        store, LocalBackend(elsewhere, node=node), elsewhere, clock, standby.keeper)))
    job = submit(store, python("pass"))
    clock.advance(TTL_S + RETRY_S)  # the leader is frozen past its lease
    assert standby.try_once()
    [new] = planes
    old.step()  # it wakes: the pass neither schedules nor launches
    assert lost == [True] and store.get_job(job).state is JobState.PENDING
    new.step()
    record = store.get_job(job)
    assert record.state in (JobState.RUNNING, JobState.SUCCEEDED)
    assert str(elsewhere) in str(record.backend_handle)  # launched by the new leader
    new.stop()
    old.stop()


class FrozenMidPass(LocalBackend):
    """A machine frozen (SIGSTOP) in the middle of a pass: the clock jumps past the lease when
    the backend is asked for its offers (before step 1) or for its overdue attempts (after
    step 1, before the launches), and another control plane takes the lease meanwhile."""

    def __init__(self, *args, where: str, freeze, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.where, self._freeze = where, freeze

    def freeze(self, where: str) -> None:
        if where == self.where:
            self._freeze()
            self.where = ""

    def offers(self):
        self.freeze("offers")
        return []

    def decline(self, offer, reason) -> None:
        pass

    def overdue(self):
        self.freeze("overdue")
        return []

    def reported(self, handle, exit_code, replicas=None) -> bool:
        return False

    def flush_launches(self) -> None:
        pass


@pytest.mark.parametrize("where, state", [("offers", JobState.PENDING),
                                          ("overdue", JobState.SCHEDULED)])
def test_a_pass_frozen_past_its_lease_acts_no_further(store, data_dir, tmp_path, clock,
                                                      where, state) -> None:
    lost: list[bool] = []
    leader = LeaseKeeper(store, data_dir)
    leader.acquire(clock.now())

    def freeze() -> None:
        clock.advance(TTL_S + RETRY_S)
        LeaseKeeper(store, tmp_path / "elsewhere").acquire(clock.now())
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
    frozen = FrozenMidPass(data_dir, node=node, where=where, freeze=freeze)
    loop = leased_loop(store, frozen, data_dir, clock, leader, lost)
    job = submit(store, python("pass"))
    loop.step()
    record = store.get_job(job)  # before step 1: not even placed; after: placed, not launched
    assert record.state is state and record.backend_handle is None
    assert leader.lost  # and the next pass says so (``on_lease_lost``)
    loop.step()
    assert lost == [True]
    loop.stop()
