"""Prefetch on the local backend, with a real store and cache: a pending job with an estimated
start or a backfill reservation gets its datasets copied before it is placed, once while it
waits, among the first few in order of start; a job with neither, or one that no longer waits,
gets nothing; a copy that would take its project over its quota on cached bytes is not made
(its launch says why, as without prefetch)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controlkit import submit
from rota.backends.datacache import DataCache
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.control.prefetch import Prefetcher
from rota.core import Node, Placement, ReplicaPlacement
from rota.core.decisions import Reserve, Wait
from test_loop_datasets import declare

NOOP = [sys.executable, "-c", "pass"]


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def backend(data_dir: Path, cache_dir: Path) -> LocalBackend:
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
    return LocalBackend(data_dir, node=node, dataset_cache=DataCache(cache_dir, capacity=1000))


def run(prefetch: Prefetcher, reservations=(), waits=()) -> None:
    prefetch.consider(list(reservations), list(waits))
    prefetch.wait(30)


def test_a_job_with_an_estimated_start_gets_its_dataset_once_and_one_without_none(
        store, backend, tmp_path, cache_dir):
    declare(store, tmp_path, "timed", b"t" * 10)
    declare(store, tmp_path, "untimed", b"u" * 10)
    timed = submit(store, NOOP, datasets=["timed"])
    untimed = submit(store, NOOP, datasets=["untimed"])
    prefetch = Prefetcher(store, backend)
    waits = [Wait(timed, (), estimated_start=100.0), Wait(untimed, ())]
    run(prefetch, waits=waits)
    assert (cache_dir / "timed@1" / "part-0").read_bytes() == b"t" * 10
    assert not (cache_dir / "untimed@1").exists()
    backend.data.cache.evict("timed@1")
    run(prefetch, waits=waits)  # done once while it waits: not copied again
    assert not (cache_dir / "timed@1").exists()
    run(prefetch, waits=[Wait(untimed, ())])  # it stopped waiting (placed, say)...
    run(prefetch, waits=waits)                # ...and waits again: copied again
    assert (cache_dir / "timed@1").is_dir()


def test_a_reserved_job_comes_first_and_a_round_has_at_most_per_round_jobs(
        store, backend, tmp_path, cache_dir):
    names = ["a", "b", "c"]
    jobs = {}
    for name in names:
        declare(store, tmp_path, name, name.encode() * 10)
        jobs[name] = submit(store, NOOP, datasets=[name])
    placement = Placement((ReplicaPlacement("n1", ()),))
    run(Prefetcher(store, backend, per_round=2),
        reservations=[Reserve(jobs["c"], 500.0, placement)],
        waits=[Wait(jobs["a"], (), estimated_start=10.0),
               Wait(jobs["b"], (), estimated_start=20.0)])
    # c (reserved) first, then a (the earliest estimate); b waits for a later round
    assert sorted(p.name for p in cache_dir.glob("*@1")) == ["a@1", "c@1"]


def test_a_copy_over_the_projects_quota_is_not_made_nor_one_for_a_job_that_left_the_queue(
        store, backend, tmp_path, cache_dir):
    declare(store, tmp_path, "large", b"l" * 10)
    store.datasets.set_quota("p", 5)
    over = submit(store, NOOP, datasets=["large"])
    declare(store, tmp_path, "gone", b"g" * 3)
    cancelled = submit(store, NOOP, datasets=["gone"])
    store.request_cancel(cancelled, "alice")
    run(Prefetcher(store, backend), waits=[Wait(over, (), estimated_start=1.0),
                                           Wait(cancelled, (), estimated_start=1.0)])
    assert not list(cache_dir.glob("*@1"))


def test_only_the_first_look_ahead_jobs_are_read_and_considered(store, backend, tmp_path,
                                                                 cache_dir):
    early, late = (submit(store, NOOP, datasets=[declare(store, tmp_path, n, b"x").name])
                   for n in ("early", "late"))
    run(Prefetcher(store, backend, per_round=2, look_ahead=1),
        waits=[Wait(late, (), estimated_start=20.0), Wait(early, (), estimated_start=10.0)])
    assert sorted(p.name for p in cache_dir.glob("*@1")) == ["early@1"]
