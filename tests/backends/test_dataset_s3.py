"""Datasets whose source is an S3-compatible bucket, against a real server (``.ci/s3``:
gofakes3, which checks each request's signature): rota's client lists and reads what the
server holds only with the right secret, which no message shows; a node's cache copies the
objects under the prefix as files, at its bandwidth bound, measures an unknown size by
listing, and a copy a kill -9 cut short is never used and is made again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from rota.backends.base import BackendError, LaunchSpec
from rota.backends.datacache import CacheFull, DataCache
from rota.backends.localdata import Datasets
from rota.backends.s3source import S3Client, S3Error
from rota.core.datasets import Dataset
from builders import job
from s3server import s3_server
from test_dataset_cache import SRC, FakeTime, tree
from waiting import poll

FILES = {"set/a.bin": b"a" * 3000, "set/sub/b c+d.txt": b"hello", "other/x": b"not ours"}


@pytest.fixture
def server(tmp_path):
    seed = tree(tmp_path / "seed" / "data", FILES).parent
    with s3_server(seed, tmp_path / "s3") as found:
        yield found


def client(server, **changes) -> S3Client:
    return S3Client.from_env({**server.env, **changes})


def s3(name: str = "d", source: str = "s3://data/set", size: int | None = None) -> Dataset:
    return Dataset(name, "p", source, "1", size)


def test_the_client_lists_and_reads_the_objects_under_a_prefix(server):
    c = client(server)
    assert [(o.path, o.size) for o in c.objects("s3://data/set")] == [
        ("a.bin", 3000), ("sub/b c+d.txt", 5)]
    assert c.size("s3://data") == 3000 + 5 + 8
    with c.open("s3://data/set", "set/sub/b c+d.txt") as body:
        assert body.read() == b"hello"


def test_a_wrong_secret_is_refused_by_the_server_and_no_message_shows_a_secret(server):
    secret = server.env["AWS_SECRET_ACCESS_KEY"]
    wrong = client(server, AWS_SECRET_ACCESS_KEY="0" * 32)
    with pytest.raises(S3Error) as caught:
        wrong.size("s3://data/set")
    assert "403 SignatureDoesNotMatch" in str(caught.value)
    with pytest.raises(S3Error, match="404 NoSuchBucket"):
        client(server).size("s3://nothing/set")
    shown = f"{client(server)!r} {caught.value}"
    assert secret not in shown and "0" * 32 not in shown
    with pytest.raises(S3Error, match="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        S3Client.from_env({})


def test_a_cache_copies_the_objects_as_files_readable_by_all(server, tmp_path):
    cache = DataCache(tmp_path / "cache", capacity=100_000, s3=lambda: client(server))
    cache.ensure([s3()], (), frozenset())
    copy = tmp_path / "cache" / "d@1"
    assert (copy / "a.bin").read_bytes() == b"a" * 3000
    assert (copy / "sub" / "b c+d.txt").read_bytes() == b"hello"
    assert not (copy / "x").exists() and not (copy / "other").exists()
    assert [oct(p.stat().st_mode & 0o777) for p in (copy, copy / "sub", copy / "a.bin")] == [
        "0o755", "0o755", "0o644"]
    assert [(h.dataset, h.bytes) for h in cache.held()] == [("d", 3005)]
    reads = server.object_reads()
    cache.ensure([s3()], (), frozenset())  # held and current: nothing is read again
    assert server.object_reads() == reads == 2


def test_an_s3_copy_keeps_to_the_bandwidth_and_an_unknown_size_is_listed(server, tmp_path):
    time = FakeTime()
    cache = DataCache(tmp_path / "cache", capacity=100_000, bandwidth=1_000, clock=time.clock,
                      sleep=time.sleep, s3=lambda: client(server))
    cache.ensure([s3()], (), frozenset())
    # 3,005 bytes at 1,000 bytes/s on a clock that moves only when slept on: 3.005 s slept
    assert time.slept == pytest.approx(3.005)
    small = DataCache(tmp_path / "small", capacity=3000, s3=lambda: client(server))
    with pytest.raises(CacheFull, match="needs 3005 bytes, more than the cache's capacity"):
        small.ensure([s3()], (), frozenset())  # its size listed, not copied first
    assert server.object_reads() == 2


def test_a_launch_whose_s3_source_refuses_fails_as_a_launch(server, tmp_path):
    cache = DataCache(tmp_path / "cache", capacity=100_000,
                      s3=lambda: client(server, AWS_SECRET_ACCESS_KEY="0" * 32))
    data = Datasets(tmp_path / "data", cache, lambda: [])
    spec = LaunchSpec(["true"], str(tmp_path), {}, datasets=(s3(size=3005),))
    with pytest.raises(BackendError) as caught:
        with data.filled(job("j1").build(), spec):
            pass
    assert caught.value.code == "launch_failed" and "403" in str(caught.value)
    assert server.env["AWS_SECRET_ACCESS_KEY"] not in str(caught.value)


FILLER = """
import os, sys
from rota.backends.datacache import DataCache
from rota.core.datasets import Dataset
DataCache(sys.argv[1], capacity=10**9).ensure(
    [Dataset("d", "p", "s3://data/set", "1", None)], (), frozenset())
"""


def test_an_s3_copy_cut_short_by_kill_9_is_never_used_and_is_made_again(tmp_path):
    seed = tree(tmp_path / "seed" / "data", {"set/a.bin": os.urandom(400_000),
                                             "set/b.bin": os.urandom(1000)}).parent
    with s3_server(seed, tmp_path / "s3", bandwidth=50_000) as server:  # 8 s for a.bin
        cache_dir = tmp_path / "cache"
        filler = subprocess.Popen([sys.executable, "-c", FILLER, str(cache_dir)],
                                  env={**os.environ, **server.env, "PYTHONPATH": str(SRC)})
        staging = cache_dir / ".fill-d@1"
        try:
            poll(lambda: (staging / "a.bin").is_file() and (staging / "a.bin").stat().st_size,
                 "the copy to begin", 30)
        finally:
            filler.send_signal(signal.SIGKILL)
            filler.wait()
        assert staging.is_dir() and not (cache_dir / "d@1").exists()  # half done: not visible
        cache = DataCache(cache_dir, s3=lambda: client(server))  # a new control plane
        assert cache.held() == [] and not staging.exists()
        cache.ensure([s3()], (), frozenset())
        for name in ("a.bin", "b.bin"):
            assert (cache_dir / "d@1" / name).read_bytes() == (seed / "data/set" / name
                                                                ).read_bytes()
