"""Jobs that name datasets under the control loop, on the local backend with a node cache:
the job starts once its node holds a copy and reads it at ``$ROTA_DATASETS/<name>``; the
store learns what the node's cache holds; a copy over the project's quota on cached bytes,
or a backend that caches no datasets, fails the job saying why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controlkit import drive, state_is, submit
from rota.backends.datacache import DataCache
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import JobState as S
from rota.core import Node
from rota.core.datasets import Dataset
from rota.scheduler import build_policy


@pytest.fixture
def backend(data_dir: Path, tmp_path: Path) -> LocalBackend:
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
    return LocalBackend(data_dir, node=node,
                        dataset_cache=DataCache(tmp_path / "cache", capacity=1000))


def declare(store, tmp_path: Path, name: str, data: bytes) -> Dataset:
    source = tmp_path / "shared" / name
    source.mkdir(parents=True)
    (source / "part-0").write_bytes(data)
    return store.datasets.create(Dataset(name, "p", str(source), "1", len(data), "alice"))


def reader(out: Path, name: str) -> list[str]:
    return [sys.executable, "-c", f"import os; open({str(out)!r}, 'w').write(open(os.path.join("
            f"os.environ['ROTA_DATASETS'], {name!r}, 'part-0')).read())"]


def test_a_job_reads_its_dataset_from_the_node_cache_and_the_store_knows_the_copy(
        loop, store, tmp_path, clock):
    declare(store, tmp_path, "imagenet", b"pixels")
    out = tmp_path / "seen"
    job_id = submit(store, reader(out, "imagenet"), datasets=["imagenet"])
    drive(loop, state_is(store, job_id, S.SUCCEEDED), "the job to succeed")
    assert out.read_text() == "pixels"
    drive(loop, lambda: store.datasets.caches("imagenet"), "the cache to be recorded",
          tick=lambda: clock.advance(11))
    [copy] = store.datasets.caches("imagenet")
    assert (copy.node, copy.version, copy.bytes) == ("n1", "1", 6)
    assert store.datasets.quota("p") == (None, 6)


def test_a_copy_over_the_projects_quota_fails_the_job_saying_why(loop, store, tmp_path, clock):
    declare(store, tmp_path, "small", b"s" * 6)
    declare(store, tmp_path, "large", b"l" * 10)
    store.datasets.set_quota("p", 12)
    first = submit(store, reader(tmp_path / "a", "small"), datasets=["small"])
    drive(loop, state_is(store, first, S.SUCCEEDED), "the first job to succeed")
    drive(loop, lambda: store.datasets.caches("small"), "the cache to be recorded",
          tick=lambda: clock.advance(11))
    second = submit(store, reader(tmp_path / "b", "large"), datasets=["large"])
    rec = drive(loop, state_is(store, second, S.FAILED), "the second job to fail")
    assert rec.reason.startswith("cannot be started as written: run.datasets: caching "
                                 "dataset large (10 bytes) on node n1 would bring project "
                                 "p's cached datasets to 16 bytes, over its quota of 12")


def test_a_backend_that_caches_no_datasets_fails_a_job_that_names_one(store, tmp_path,
                                                                      data_dir, clock):
    declare(store, tmp_path, "d", b"x")
    bare = LocalBackend(data_dir / "bare",
                        node=Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB")))
    loop = ControlLoop(store, bare, build_policy("default"), data_dir / "bare", clock=clock)
    try:
        job_id = submit(store, [sys.executable, "-c", "pass"], datasets=["d"])
        rec = drive(loop, state_is(store, job_id, S.FAILED), "the job to fail")
        assert rec.reason == ("cannot be started as written: run.datasets: the local backend "
                              "has no dataset cache here (docs/datasets.md)")
    finally:
        loop.stop()
