"""Storage checks in a burst (``rota.api.storage.StorageQuota``): while one check measures a
project, the others add what was accepted to its last measurement instead of queueing behind
it, and still cannot slip past the cap together; a measurement too old is waited for, and
then serves the checks that waited."""

from __future__ import annotations

import threading

import pytest

from rota.api.storage import FRESH_S, StorageFull, StorageQuota
from rota.core import JobState

WAIT_S = 30.0  # a bound on waiting for a thread that should finish, never a measure of speed


class Slow:
    """A project's job listing that blocks, once ``block`` is set, until ``go`` is."""

    def __init__(self) -> None:
        self.block, self.go, self.inside = threading.Event(), threading.Event(), threading.Event()
        self.calls = 0

    def __call__(self, project: str) -> list[tuple[str, JobState, str | None]]:
        self.calls += 1
        if self.block.is_set():
            self.inside.set()
            assert self.go.wait(WAIT_S)
        return []


@pytest.fixture
def quota(tmp_path):
    now = [0.0]
    listing = Slow()
    made = StorageQuota(tmp_path, listing, lambda: [], lambda: {}, ttl_s=0.0,
                        monotonic=lambda: now[0])
    made.admit("p", 0, 100, "job")  # a first measurement, at 0
    return made, listing, now


def in_thread(call) -> tuple[threading.Thread, list]:
    """``call()`` on its own thread; its result or exception lands in the list."""
    out: list = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_check_during_a_measurement_adds_to_the_last_one_without_waiting(quota):
    made, listing, now = quota
    now[0] = FRESH_S / 2
    listing.block.set()
    measuring, _ = in_thread(lambda: made.admit("p", 10, 100, "job"))
    assert listing.inside.wait(WAIT_S)
    first, out = in_thread(lambda: made.admit("p", 60, 100, "job"))
    first.join(WAIT_S)
    assert not first.is_alive() and out == [60]  # answered while the listing still blocks
    refused, out = in_thread(lambda: made.admit("p", 41, 100, "job"))
    refused.join(WAIT_S)  # 60 held, 41 more would pass 100: the two cannot slip past together
    assert isinstance(out[0], StorageFull) and "would add 41 B" in str(out[0])
    assert measuring.is_alive()
    listing.go.set()
    measuring.join(WAIT_S)
    made.settle("p", 60, {"job-1": 60})
    with pytest.raises(StorageFull, match="pending jobs' uploads to unpack 70 B"):
        made.admit("p", 31, 100, "job")  # 10 held by the measuring check, 60 stored since


def test_a_check_waits_for_the_measurement_when_the_last_one_is_too_old(quota):
    made, listing, now = quota
    now[0] = FRESH_S * 2
    listing.block.set()
    measuring, _ = in_thread(lambda: made.admit("p", 0, 100, "job"))
    assert listing.inside.wait(WAIT_S)
    waiting, out = in_thread(lambda: made.admit("p", 10, 100, "job"))
    waiting.join(0.5)
    assert waiting.is_alive() and out == []  # behind the measurement
    listing.go.set()
    measuring.join(WAIT_S)
    waiting.join(WAIT_S)
    assert out == [10]
    assert listing.calls == 2  # the fixture's and the measuring check's: the one that waited
    # for it took its answer instead of measuring again


def test_an_uncontended_check_measures_even_right_after_another(tmp_path):
    """Alone, a check sees what a job started a moment ago wrote: no measurement is reused."""
    jobs: list[tuple[str, JobState, str | None]] = []
    made = StorageQuota(tmp_path, lambda p: list(jobs), lambda: [], lambda: {}, ttl_s=0.0,
                        monotonic=lambda: 0.0)
    assert made.admit("p", 0, 10_000, "job") == 0
    home = tmp_path / "jobs" / "j1"
    home.mkdir(parents=True)
    (home / "out").write_bytes(b"\1" * 64 * 1024)
    jobs.append(("j1", JobState.RUNNING, None))
    with pytest.raises(StorageFull, match="job directories 64 KiB"):
        made.admit("p", 0, 10_000, "job")
