"""The datasets of a local backend's launches: its node's cache filled before a job starts,
the job's ``$ROTA_DATASETS``, and which copies its running jobs read (never evicted).

A launch that names datasets on a backend without a cache is refused (``InvalidSpec`` on
``datasets``); one whose datasets cannot be copied (the cache full of what running jobs read,
the source unreadable) fails as a launch (``BackendError``), which the control loop retries.
While a launch is under way, the copies it reads are pinned as a running job's are; once it
runs, its handle's ``ref["datasets"]`` holds them (``pinned`` reads every tracked handle's,
so that an adopted launch pins its copies after a restart too).

``prefetch`` fills the cache ahead of a launch (``rota.control.prefetch``), as a launch would.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rota.backends.base import BackendError, Handle, LaunchSpec
from rota.backends.datacache import CacheFull, DataCache, Held, link_for_job
from rota.core import InvalidSpec, Job
from rota.core.datasets import Dataset
from rota.core.datadir import job_home

DATASETS_ENV = "ROTA_DATASETS"


class Datasets:
    def __init__(self, data_dir: Path, cache: DataCache | None,
                 tracked: Callable[[], list[Handle]]) -> None:
        self.data_dir, self.cache, self._tracked = data_dir, cache, tracked
        self._lock = threading.Lock()
        self._launching: Counter[str] = Counter()

    def pinned(self) -> frozenset[str]:
        """The cache keys running and launching jobs read."""
        with self._lock:
            keys = set(self._launching)
        for handle in self._tracked():
            keys.update(handle.ref.get("datasets") or ())
        return frozenset(keys)

    @contextmanager
    def filled(self, job: Job, spec: LaunchSpec) -> Iterator[tuple[dict[str, str], list[str]]]:
        """Within: every dataset of ``spec`` copied here and pinned; yields the variables the
        job gets (``ROTA_DATASETS``) and the keys its handle keeps."""
        if not spec.datasets:
            yield {}, []
            return
        if self.cache is None:
            raise InvalidSpec("datasets", "this node has no dataset cache (rota up "
                              "--dataset-cache DIR)")
        keys = [d.key for d in spec.datasets]
        running = self.pinned()  # before this launch's own keys join them
        with self._lock:
            self._launching.update(keys)
        try:
            try:
                self.cache.ensure(spec.datasets, running, spec.datasets_wanted)
            except CacheFull as exc:
                raise BackendError("cache_full", exc.reason) from None
            except OSError as exc:  # the source unreadable, the S3 server refusing
                raise BackendError("launch_failed", f"copying datasets of job {job.id}: "
                                                    f"{exc}") from None
            where = link_for_job(job_home(self.data_dir, job.id), self.cache, spec.datasets)
            yield {DATASETS_ENV: str(where)}, keys
        finally:
            with self._lock:
                self._launching.subtract(keys)
                self._launching += Counter()  # drop the keys down to zero

    def prefetch(self, datasets: Sequence[Dataset], wanted: frozenset[str]) -> None:
        """Copy ``datasets`` here ahead of a launch (``rota.control.prefetch``), evicting as
        a launch would, never what running or launching jobs read (``CacheFull``, an
        ``OSError`` when a source cannot be read); a launch that needs a copy under way waits
        for it, one whose copy is complete starts at once."""
        if self.cache is not None and datasets:
            self.cache.ensure(datasets, self.pinned(), wanted)

    def held(self) -> list[Held]:
        """What the cache holds now (nothing without a cache)."""
        return [] if self.cache is None else self.cache.held()
