"""A node's dataset cache on the local backend: a directory with a capacity, filled by copying
each dataset from its source at a bounded rate, before the job that names it starts.

Layout of the cache directory (``rota up --dataset-cache DIR``)::

    <name>@<version>/                 a complete copy: what jobs read
    .fill-<name>@<version>/           a copy under way (never read by a job)
    .meta/<name>@<version>.json       {"bytes", "source", "created_at"}: written last

Crash safety: a copy is written under ``.fill-<key>`` and renamed to ``<key>`` in one step
once every byte is there, and only then is its ``.meta`` file written. So a copy a kill -9
interrupted is a ``.fill-`` directory, which the next fill of that dataset (or a new
``DataCache`` over the directory) deletes and starts again, and a job never sees it. A copy
is used only while its ``.meta`` names the dataset as declared now (source and creation
time): one whose note a crash lost, or of a dataset removed and declared again under the same
name and version, is made again.

Eviction (``rota.core.datasets.choose_evictions``): never a copy that a running job of this
backend reads (``running``: the backend passes the keys of the launches it tracks and of
those under way), nor one the launch at hand reads; first copies no live job names (``wanted``),
least recently used first (a copy's ``last_used`` is its directory's modification time,
touched each time a job starts with it).

Bandwidth: ``bandwidth`` bytes per second at most, averaged from the start of each copy
(``clock`` and ``sleep`` are injected: tests count what would be slept).

Modes: a copy of a path keeps each file's and directory's mode (links are not copied) and
belongs to the control plane's account, so what only an owner or a group could read at the
source, nobody else reads in the copy.

S3 sources (``s3://bucket/prefix``, ``rota.backends.s3source``): the objects under the prefix
are listed (their sizes are the bytes needed when the dataset's size is not known) and each is
streamed into the ``.fill-`` directory at the same bound, as a file at its key below the
prefix; files are readable by all (0644) and directories enterable by all (0755), as S3 has
no modes. The client comes from ``s3`` (by default the control plane's environment:
``S3Client.from_env``), asked once per copy.

A job reads its datasets at ``$ROTA_DATASETS/<name>``: ``link_for_job`` makes that directory
(``<job home>/datasets``) with one symbolic link per dataset to its copy here.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterable, Sequence

from rota.backends.s3source import S3Client
from rota.core.datasets import CacheEntry, Dataset, choose_evictions, is_s3

FILL_PREFIX = ".fill-"
META_DIR = ".meta"
CHUNK = 1024 * 1024
DEFAULT_CAPACITY = 100 * 1024 ** 3


def default_capacity(root: str | Path,
                     usage: Callable[[str], tuple[int, int, int]] = shutil.disk_usage) -> int:
    """The cache's size when the operator gives none: ``DEFAULT_CAPACITY``, or half the space
    free now on the file system that will hold ``root`` where that is less, so that a default
    never promises more than the disk has."""
    where = Path(root)
    while not where.exists() and where != where.parent:
        where = where.parent
    free = usage(str(where))[2]
    return min(DEFAULT_CAPACITY, free // 2)


class CacheFull(Exception):
    """Room cannot be made for a dataset: ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Held:
    """One complete copy in the cache."""

    dataset: str
    version: str
    bytes: int
    last_used: float


class DataCache:
    def __init__(self, root: str | Path, capacity: int = DEFAULT_CAPACITY,
                 bandwidth: int | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 s3: Callable[[], S3Client] = S3Client.from_env) -> None:
        self.root = Path(root).resolve()
        self._s3 = s3
        self.capacity, self.bandwidth = capacity, bandwidth
        self._clock, self._sleep = clock, sleep
        self._changed = threading.Condition()  # a copy began or ended
        self._filling: dict[str, int] = {}  # keys being copied now, and the bytes they need
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # jobs of every account read their copies through links
        (self.root / META_DIR).mkdir(exist_ok=True)
        for stale in self.root.glob(FILL_PREFIX + "*"):  # copies a dead process left half-done
            shutil.rmtree(stale, ignore_errors=True)

    # -- what the cache holds -----------------------------------------------------------------

    def held(self) -> list[Held]:
        """Every complete copy, by key."""
        out = []
        for path in sorted(self.root.iterdir()):
            if path.name.startswith(".") or "@" not in path.name or not path.is_dir():
                continue
            name, _, version = path.name.partition("@")
            out.append(Held(name, version, self._bytes(path), path.stat().st_mtime))
        return out

    def _meta(self, key: str) -> dict:
        try:
            found = json.loads((self.root / META_DIR / f"{key}.json").read_text())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _bytes(self, copy: Path) -> int:
        size = self._meta(copy.name).get("bytes")
        if isinstance(size, int):
            return size
        return tree_bytes(copy)  # complete but not noted: a crash after the rename

    def _current(self, ds: Dataset) -> bool:
        """Whether the copy under ``ds``'s key is of ``ds`` as declared now (its source and
        creation): a dataset removed and declared again under the same name and version is
        copied again, and a copy whose note a crash lost is made again."""
        meta = self._meta(ds.key)
        return meta.get("source") == ds.source and meta.get("created_at") == ds.created_at

    def path_of(self, ds: Dataset) -> Path:
        return self.root / ds.key

    # -- filling ------------------------------------------------------------------------------

    def ensure(self, datasets: Sequence[Dataset], running: Iterable[str],
               wanted: frozenset[str]) -> None:
        """Make sure every one of ``datasets`` has a complete, current copy here, copying
        those missing after evicting what must go (``CacheFull`` when room cannot be made);
        ``running``: keys that running jobs (and other launches under way) read."""
        running = frozenset(running)
        for ds in datasets:
            self._ensure_one(ds, running, running | {d.key for d in datasets}, wanted)

    def _ensure_one(self, ds: Dataset, running: frozenset[str], pinned: frozenset[str],
                    wanted: frozenset[str]) -> None:
        final = self.path_of(ds)
        with self._changed:
            while ds.key in self._filling:  # another launch copies it: wait for its end
                self._changed.wait()
            if final.is_dir() and self._current(ds):
                os.utime(final)  # used now: last in the least-recently-used order
                return
            if final.is_dir():  # of an earlier declaration: replaced, unless it is read
                if ds.key in running:
                    raise CacheFull(f"node cache {self.root} holds an earlier copy of dataset "
                                    f"{ds.name} (version {ds.version}) that running jobs read")
                self.evict(ds.key)
            need = ds.size_bytes if ds.size_bytes is not None else self._measure(ds)
            entries = [CacheEntry(f"{h.dataset}@{h.version}", h.bytes, h.last_used)
                       for h in self.held()]
            room = self.capacity - sum(self._filling.values())  # promised to copies under way
            verdict = choose_evictions(entries, room, need, pinned, wanted)
            if verdict.blocked:
                raise CacheFull(f"node cache {self.root} cannot hold dataset {ds.name}: "
                                f"{verdict.blocked}")
            for key in verdict.drop:
                self.evict(key)
            self._filling[ds.key] = need
        try:
            self._copy(ds, final)
        finally:
            with self._changed:
                del self._filling[ds.key]
                self._changed.notify_all()

    def _measure(self, ds: Dataset) -> int:
        return self._s3().size(ds.source) if is_s3(ds.source) else tree_bytes(Path(ds.source))

    def _copy(self, ds: Dataset, final: Path) -> None:
        staging = self.root / f"{FILL_PREFIX}{ds.key}"
        shutil.rmtree(staging, ignore_errors=True)  # a half-done copy is started again
        copier = _Throttled(self.bandwidth, self._clock, self._sleep)
        if is_s3(ds.source):
            staging.mkdir(mode=0o700)
            _copy_objects(self._s3(), ds.source, staging, copier)
            os.chmod(staging, 0o755)
        else:
            _copy_tree(ds, staging, copier)
        _fsync_dir(staging)
        os.rename(staging, final)
        _fsync_dir(self.root)
        _write_meta(self.root / META_DIR / f"{ds.key}.json",
                    {"bytes": copier.total, "source": ds.source, "created_at": ds.created_at})

    def evict(self, key: str) -> None:
        """Drop a complete copy: its meta first goes with it (renamed out of sight at once)."""
        path = self.root / key
        doomed = self.root / f"{FILL_PREFIX}evicted-{key}"
        os.rename(path, doomed)
        (self.root / META_DIR / f"{key}.json").unlink(missing_ok=True)
        shutil.rmtree(doomed, ignore_errors=True)


def _copy_tree(ds: Dataset, staging: Path, copier: _Throttled) -> None:
    """A path source's files and directories into ``staging``, each keeping its mode."""
    source = Path(ds.source)
    if not source.is_dir():
        raise FileNotFoundError(f"dataset {ds.name}: source {source} is not a directory here")
    staging.mkdir(mode=0o700)
    made: list[tuple[Path, Path]] = [(source, staging)]
    for root, dirs, files in os.walk(source):
        rel = Path(root).relative_to(source)
        for d in dirs:
            if not os.path.islink(os.path.join(root, d)):
                (staging / rel / d).mkdir(mode=0o700)
                made.append((Path(root) / d, staging / rel / d))
        for f in files:
            if not os.path.islink(os.path.join(root, f)):
                copier.copy(Path(root) / f, staging / rel / f)
    for src, dst in made:  # each directory's own mode, once it is filled
        shutil.copymode(src, dst)


def _copy_objects(client: S3Client, source: str, staging: Path, copier: _Throttled) -> None:
    """An S3 source's objects into ``staging`` (module docstring)."""
    for obj in client.objects(source):
        dst = staging / obj.path
        for parent in reversed(dst.relative_to(staging).parents[:-1]):
            (staging / parent).mkdir(mode=0o755, exist_ok=True)
        with client.open(source, obj.key) as body:
            copier.stream(body, dst)
        os.chmod(dst, 0o644)


def link_for_job(job_home: Path, cache: DataCache, datasets: Sequence[Dataset]) -> Path:
    """``<job home>/datasets`` with ``<name>`` linked to each dataset's copy; its path (what
    ``ROTA_DATASETS`` holds)."""
    where = job_home / "datasets"
    where.mkdir(parents=True, exist_ok=True)
    os.chmod(where, 0o755)
    for ds in datasets:
        link = where / ds.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(cache.path_of(ds), target_is_directory=True)
    return where


class _Throttled:
    """Copies files at ``bandwidth`` bytes per second at most (None: as fast as it goes)."""

    def __init__(self, bandwidth: int | None, clock: Callable[[], float],
                 sleep: Callable[[float], None]) -> None:
        self.bandwidth, self._clock, self._sleep = bandwidth, clock, sleep
        self.total, self._start = 0, clock()

    def copy(self, src: Path, dst: Path) -> None:
        with open(src, "rb") as fin:
            self.stream(fin, dst)
        shutil.copymode(src, dst)

    def stream(self, fin: IO[bytes], dst: Path) -> None:
        with open(dst, "wb") as fout:
            while chunk := fin.read(CHUNK if self.bandwidth is None
                                    else max(1, min(CHUNK, self.bandwidth))):
                fout.write(chunk)
                self.total += len(chunk)
                self._wait()
            fout.flush()
            os.fsync(fout.fileno())

    def _wait(self) -> None:
        if not self.bandwidth:
            return
        ahead = self.total / self.bandwidth - (self._clock() - self._start)
        if ahead > 0:
            self._sleep(ahead)


def tree_bytes(path: Path) -> int:
    """The bytes of the regular files at or under ``path`` (links not followed)."""
    if not path.is_dir():
        return path.stat().st_size if path.is_file() else 0
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def _write_meta(path: Path, meta: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
