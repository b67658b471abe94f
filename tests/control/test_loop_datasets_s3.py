"""Jobs that read a dataset from an S3-compatible source (a real server, bandwidth-bound)
under the control loop on the local backend: the first job's launch copies it, a second job
starts on the cached copy without reading the source again; a job queued behind another gets
its dataset copied while it waits (prefetch), so that its launch reads nothing from the
source. The S3 credentials are the control plane's: no job sees them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from controlkit import drive, state_is, submit
from rota.backends.datacache import DataCache
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.core import JobState as S
from rota.core import Node
from rota.core.datasets import Dataset
from s3server import env_of, s3_server

DATA = bytes(range(256)) * 800  # 204,800 bytes: 2 s at the server's 100,000 bytes/s


@pytest.fixture
def server(tmp_path):
    seed = tmp_path / "seed" / "corpus" / "v1"
    seed.mkdir(parents=True)
    (seed / "part-0").write_bytes(DATA)
    with s3_server(seed.parent.parent, tmp_path / "s3", bandwidth=100_000) as found:
        with env_of(found.env):  # the control plane's environment
            yield found


@pytest.fixture
def backend(data_dir: Path, tmp_path: Path) -> LocalBackend:
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
    return LocalBackend(data_dir, node=node,
                        dataset_cache=DataCache(tmp_path / "cache", capacity=10**7))


@pytest.fixture
def corpus(store, server) -> Dataset:
    return store.datasets.create(Dataset("corpus", "p", "s3://corpus/v1", "1", len(DATA),
                                         "alice"))


def reader(out: Path) -> list[str]:
    """A job that writes what it read of the dataset, where from, and whether it saw keys."""
    return [sys.executable, "-c",
            "import json, os; p = os.path.join(os.environ['ROTA_DATASETS'], 'corpus', "
            "'part-0'); data = open(p, 'rb').read(); "
            f"json.dump({{'bytes': len(data), 'sum': sum(data), 'at': os.path.realpath(p), "
            f"'keys': sorted(k for k in os.environ if k.startswith('AWS_'))}}, "
            f"open({str(out)!r}, 'w'))"]


def test_a_second_job_starts_on_the_cached_copy_without_reading_the_source(
        loop, store, server, corpus, tmp_path):
    first = submit(store, reader(tmp_path / "first"), datasets=["corpus"])
    drive(loop, state_is(store, first, S.SUCCEEDED), "the first job to succeed")
    seen = json.loads((tmp_path / "first").read_text())
    assert (seen["bytes"], seen["sum"]) == (len(DATA), sum(DATA))
    assert seen["at"] == str(tmp_path / "cache" / "corpus@1" / "part-0")
    assert seen["keys"] == []  # the control plane's credentials reach no job
    assert server.object_reads() == 1
    second = submit(store, reader(tmp_path / "second"), datasets=["corpus"])
    drive(loop, state_is(store, second, S.SUCCEEDED), "the second job to succeed")
    assert json.loads((tmp_path / "second").read_text()) == seen
    assert server.object_reads() == 1  # read from the cache: not one request for the object


def test_a_job_queued_behind_another_gets_its_dataset_before_its_start(
        loop, store, server, corpus, tmp_path, clock):
    gate = tmp_path / "gate"
    holder = submit(store, [sys.executable, "-c", "import os, time\nwhile not os.path.exists("
                            f"{str(gate)!r}): time.sleep(0.05)"], gpus=4, walltime_s=600)
    drive(loop, state_is(store, holder, S.RUNNING), "the holder to run")
    queued = submit(store, reader(tmp_path / "queued"), gpus=4, datasets=["corpus"])
    copy = tmp_path / "cache" / "corpus@1"
    # it waits for the holder's GPUs, with a backfill reservation at the holder's walltime
    rec = drive(loop, lambda: copy.is_dir() and store.get_job(queued), "the copy to be made")
    assert rec.state is S.PENDING and rec.estimated_start is not None
    loop.prefetch.wait()
    reads = server.object_reads()
    assert reads == 1 and (copy / "part-0").read_bytes() == DATA
    gate.touch()
    drive(loop, state_is(store, queued, S.SUCCEEDED), "the queued job to succeed")
    assert json.loads((tmp_path / "queued").read_text())["sum"] == sum(DATA)
    assert server.object_reads() == reads  # its launch copied nothing
