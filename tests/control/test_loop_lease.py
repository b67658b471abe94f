"""The control loop and its database lease: a second loop on the same database cannot start;
a loop that loses its lease stops acting and says so; a clean stop releases it; a restart on
the same data directory takes its own dead predecessor's lease back at once."""

from __future__ import annotations

import pytest

from controlkit import python, submit
from rota.control import ControlLoop
from rota.control.lease import NAME, TTL_S, LeaseKeeper
from rota.core import JobState
from rota.scheduler import build_policy
from rota.store.lease import LeaseHeld


def leased_loop(store, backend, data_dir, clock, keeper, lost=None) -> ControlLoop:
    return ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       lease=keeper, on_lease_lost=(lambda: lost.append(True)) if lost is not None
                       else (lambda: None))


def test_a_second_site_is_refused_while_the_lease_lives(store, data_dir, tmp_path, clock) -> None:
    LeaseKeeper(store, data_dir).acquire(clock.now())
    with pytest.raises(LeaseHeld):
        LeaseKeeper(store, tmp_path / "elsewhere").acquire(clock.now() + TTL_S * 2 / 3)


def test_the_same_site_takes_its_dead_predecessors_lease_at_once(store, data_dir, clock) -> None:
    dead = LeaseKeeper(store, data_dir)
    dead.acquire(clock.now())
    successor = LeaseKeeper(store, data_dir)  # holds the data-dir lock: the other one is dead
    assert successor.acquire(clock.now() + 1).holder == successor.holder
    assert not dead.ensure(clock.now() + 6)   # it would find out at its next renewal


def test_loop_that_loses_its_lease_stops_acting(store, backend, data_dir, tmp_path,
                                                clock) -> None:
    lost: list[bool] = []
    keeper = LeaseKeeper(store, data_dir)
    keeper.acquire(clock.now())
    loop = leased_loop(store, backend, data_dir, clock, keeper, lost)
    clock.advance(20)  # the lease expired (the plane was frozen) and another one took it
    LeaseKeeper(store, tmp_path / "elsewhere").acquire(clock.now())
    job = submit(store, python("pass"))
    report = loop.step()
    assert lost == [True] and keeper.lost
    assert report.launched == [] and store.get_job(job).state is JobState.PENDING
    loop.step()  # and never again, even if called
    assert store.get_job(job).state is JobState.PENDING
    loop.stop()


def test_loop_renews_while_it_runs_and_releases_at_stop(store, backend, data_dir, tmp_path,
                                                        clock) -> None:
    keeper = LeaseKeeper(store, data_dir)
    keeper.acquire(clock.now())
    loop = leased_loop(store, backend, data_dir, clock, keeper)
    for _ in range(6):  # six steps of half the time to live: three times the time to live
        clock.advance(TTL_S / 2)
        loop.step()
    assert store.get_lease(NAME).expires_at == pytest.approx(clock.now() + TTL_S,
                                                             abs=TTL_S / 3)
    loop.stop()
    assert store.get_lease(NAME) is None
    LeaseKeeper(store, tmp_path / "elsewhere").acquire(clock.now())  # free at once
