"""A node's dataset cache on the local backend: a copy appears only once complete (a copy a
kill -9 cut short is found, deleted and made again, never read), at a bounded rate, and room
is made by evicting least needed copies, never one a running job reads. A job that names a
dataset finds it at ``$ROTA_DATASETS/<name>``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rota.backends.base import BackendError, LaunchSpec, ReplicaState
from rota.backends.datacache import DEFAULT_CAPACITY, CacheFull, DataCache, default_capacity
from rota.backends.local import LocalBackend
from rota.backends.localdata import DATASETS_ENV
from rota.core import InvalidSpec, Job, Placement, ReplicaPlacement
from rota.core.datasets import Dataset
from waiting import poll

SRC = Path(__file__).resolve().parents[2] / "src"


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def dataset(source: Path, name: str = "d", size: int | None = None, version: str = "1"):
    return Dataset(name, "p", str(source), version, size)


def test_a_copy_appears_complete_under_its_name_and_version(tmp_path):
    source = tree(tmp_path / "src", {"a/x.bin": b"x" * 300, "y.txt": b"hello"})
    cache = DataCache(tmp_path / "cache", capacity=10_000)
    cache.ensure([dataset(source)], (), frozenset())
    copy = tmp_path / "cache" / "d@1"
    assert (copy / "a" / "x.bin").read_bytes() == b"x" * 300
    assert (copy / "y.txt").read_text() == "hello"
    assert [(h.dataset, h.version, h.bytes) for h in cache.held()] == [("d", "1", 305)]
    assert not list((tmp_path / "cache").glob(".fill-*"))


class FakeTime:
    """A clock that moves only when slept on: what a copy would wait, counted."""

    def __init__(self) -> None:
        self.now, self.slept = 0.0, 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def test_a_copy_keeps_to_its_bandwidth(tmp_path):
    source = tree(tmp_path / "src", {"big.bin": os.urandom(10_000)})
    time = FakeTime()
    cache = DataCache(tmp_path / "cache", capacity=100_000, bandwidth=1_000,
                      clock=time.clock, sleep=time.sleep)
    cache.ensure([dataset(source)], (), frozenset())
    # 10,000 bytes at 1,000 bytes/s on a clock that moves only when slept on: 10 s slept
    assert time.slept == pytest.approx(10.0)
    assert (tmp_path / "cache" / "d@1" / "big.bin").read_bytes() == (source / "big.bin").read_bytes()
    unbounded = FakeTime()
    DataCache(tmp_path / "cache2", clock=unbounded.clock,
              sleep=unbounded.sleep).ensure([dataset(source)], (), frozenset())
    assert unbounded.slept == 0.0


FILLER = """
import sys
from rota.backends.datacache import CacheFull, DataCache
from rota.core.datasets import Dataset
DataCache(sys.argv[1], capacity=10**9, bandwidth=20_000).ensure(
    [Dataset("d", "p", sys.argv[2], "1", None)], (), frozenset())
"""


def test_a_copy_cut_short_by_kill_9_is_never_used_and_is_made_again(tmp_path):
    source = tree(tmp_path / "src", {"a.bin": os.urandom(200_000), "b.bin": os.urandom(1000)})
    cache_dir = tmp_path / "cache"
    filler = subprocess.Popen([sys.executable, "-c", FILLER, str(cache_dir), str(source)],
                              env={**os.environ, "PYTHONPATH": str(SRC)})
    try:
        staging = cache_dir / ".fill-d@1"
        poll(lambda: (staging / "a.bin").is_file() and (staging / "a.bin").stat().st_size > 0,
             "the copy to begin", 30)
    finally:
        filler.send_signal(signal.SIGKILL)
        filler.wait()
    assert staging.is_dir() and not (cache_dir / "d@1").exists()  # half done, not visible
    cache = DataCache(cache_dir)  # a new control plane over the same directory
    assert cache.held() == [] and not staging.exists()
    cache.ensure([dataset(source)], (), frozenset())
    for name in ("a.bin", "b.bin"):
        assert (cache_dir / "d@1" / name).read_bytes() == (source / name).read_bytes()
    # a copy renamed into place whose note a crash lost: measured, then made again
    (cache_dir / ".meta" / "d@1.json").unlink()
    (cache_dir / "d@1" / "b.bin").write_bytes(b"not what the source holds")
    assert [h.bytes for h in DataCache(cache_dir).held()] == [200_025]
    DataCache(cache_dir).ensure([dataset(source)], (), frozenset())
    assert (cache_dir / "d@1" / "b.bin").read_bytes() == (source / "b.bin").read_bytes()
    assert json.loads((cache_dir / ".meta" / "d@1.json").read_text()) == {
        "bytes": 201_000, "source": str(source), "created_at": 0.0}


def test_a_dataset_declared_again_is_copied_again_unless_a_running_job_reads_the_old(
        tmp_path):
    old = tree(tmp_path / "old", {"f": b"old"})
    new = tree(tmp_path / "new", {"f": b"new"})
    cache = DataCache(tmp_path / "cache", capacity=1000)
    cache.ensure([Dataset("d", "p", str(old), "1", None, created_at=1.0)], (), frozenset())
    again = Dataset("d", "p", str(new), "1", None, created_at=2.0)
    with pytest.raises(CacheFull) as caught:
        cache.ensure([again], {"d@1"}, frozenset())
    assert "earlier copy of dataset d (version 1) that running jobs read" in caught.value.reason
    assert (tmp_path / "cache" / "d@1" / "f").read_bytes() == b"old"
    cache.ensure([again], (), frozenset())
    assert (tmp_path / "cache" / "d@1" / "f").read_bytes() == b"new"


def test_a_half_copy_left_beside_a_live_cache_is_restarted_by_the_next_fill(tmp_path):
    source = tree(tmp_path / "src", {"a.bin": b"a" * 100})
    cache = DataCache(tmp_path / "cache", capacity=1000)
    tree(tmp_path / "cache" / ".fill-d@1", {"a.bin": b"partial"})
    cache.ensure([dataset(source)], (), frozenset())
    assert (tmp_path / "cache" / "d@1" / "a.bin").read_bytes() == b"a" * 100


def test_room_is_made_by_evicting_what_no_job_needs_never_what_runs(tmp_path):
    sources = {n: tree(tmp_path / n, {"f": n.encode() * 40}) for n in ("a", "b", "c", "d")}
    cache = DataCache(tmp_path / "cache", capacity=100)
    for n in ("a", "b"):  # 40 bytes each, a older than b
        cache.ensure([dataset(sources[n], n)], (), frozenset())
    os.utime(tmp_path / "cache" / "a@1", (1, 1))
    # c needs 40, 20 free: a is older, but a live job names it: b goes
    cache.ensure([dataset(sources["c"], "c")], (), frozenset({"a@1"}))
    assert sorted(h.dataset for h in cache.held()) == ["a", "c"]
    # d needs 40: a and c are read by running jobs, so nothing may go and d is refused
    with pytest.raises(CacheFull) as caught:
        cache.ensure([dataset(sources["d"], "d")], frozenset({"a@1", "c@1"}), frozenset())
    assert "running jobs read a@1, c@1" in str(caught.value)
    assert sorted(h.dataset for h in cache.held()) == ["a", "c"]


def _job(job_id: str) -> tuple[Job, Placement]:
    from builders import job
    built = job("x").project("p").queue("q").build()
    return Job(id=job_id, project="p", queue="q", request=built.request), \
        Placement((ReplicaPlacement("n1"),))


def test_a_job_reads_its_dataset_at_rota_datasets_and_pins_it_while_it_runs(
        tmp_path, data_dir, n1):
    source = tree(tmp_path / "src", {"labels.txt": b"cat\ndog\n"})
    other = tree(tmp_path / "other", {"f": b"o" * 80})
    backend = LocalBackend(data_dir, node=n1,
                           dataset_cache=DataCache(tmp_path / "cache", capacity=85))
    assert backend.capabilities.datasets
    out = tmp_path / "seen.txt"
    code = (f"import os,time; open({str(out)!r},'w').write(open(os.path.join("
            f"os.environ[{DATASETS_ENV!r}], 'd', 'labels.txt')).read()); time.sleep(60)")
    job, placement = _job("1")
    spec = LaunchSpec((sys.executable, "-c", code), str(tmp_path), datasets=(dataset(source),))
    handle = backend.launch(job, placement, spec)
    poll(lambda: out.is_file() and out.read_text() == "cat\ndog\n", "the job to read its dataset", 30)
    assert handle.ref["datasets"] == ["d@1"]
    assert [h.dataset for h in backend.dataset_caches()["n1"]] == ["d"]
    # another job's 80 bytes do not fit beside d's 8 in 85 unless d goes: it stays, and
    # the other launch is refused as the cache being full
    job2, _ = _job("2")
    with pytest.raises(BackendError) as caught:
        backend.launch(job2, placement, LaunchSpec((sys.executable, "-c", "pass"),
                                                   str(tmp_path),
                                                   datasets=(dataset(other, "o"),)))
    assert caught.value.code == "cache_full" and "running jobs read d@1" in str(caught.value)
    assert (tmp_path / "cache" / "d@1" / "labels.txt").is_file()
    backend.cancel(handle, grace_s=0)
    poll(lambda: backend.poll([handle])[0].state is not ReplicaState.RUNNING, "its end", 30)
    backend.launch(job2, placement, LaunchSpec((sys.executable, "-c", "pass"), str(tmp_path),
                                               datasets=(dataset(other, "o"),)))
    assert [h.dataset for h in backend.dataset_caches()["n1"]] == ["o"]


def test_a_backend_without_a_cache_refuses_a_job_that_names_a_dataset(tmp_path, backend):
    assert not backend.capabilities.datasets
    job, placement = _job("1")
    with pytest.raises(InvalidSpec) as caught:
        backend.launch(job, placement, LaunchSpec(
            (sys.executable, "-c", "pass"), str(tmp_path),
            datasets=(dataset(tmp_path),)))
    assert caught.value.field == "datasets"


def test_a_copy_keeps_the_modes_of_its_source_and_copies_no_links(tmp_path):
    source = tree(tmp_path / "src", {"open/f": b"a", "private/g": b"b"})
    (source / "private").chmod(0o700)
    (source / "open" / "f").chmod(0o644)
    (source / "link").symlink_to("/etc")
    DataCache(tmp_path / "cache").ensure([dataset(source)], (), frozenset())
    copy = tmp_path / "cache" / "d@1"
    assert (copy / "private").stat().st_mode & 0o777 == 0o700
    assert (copy / "open" / "f").stat().st_mode & 0o777 == 0o644
    assert not (copy / "link").exists() and not (copy / "link").is_symlink()


def test_the_default_size_never_promises_more_than_half_the_free_disk(tmp_path):
    """Without --dataset-cache-size the cache holds 100 GiB, or half of what its file system
    has free where that is less (the directory need not exist yet: its parent is asked)."""
    asked = []

    def usage(path: str) -> tuple[int, int, int]:
        asked.append(path)
        return (0, 0, free)

    GiB = 1024 ** 3
    free = 64 * GiB
    assert default_capacity(tmp_path / "not" / "yet", usage) == 32 * GiB
    assert asked == [str(tmp_path)]
    free = 10 * 1024 * GiB
    assert default_capacity(tmp_path, usage) == DEFAULT_CAPACITY == 100 * GiB
