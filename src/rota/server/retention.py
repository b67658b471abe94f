"""Retention: what the control plane removes from its data directory, and when.

Vocabulary: a job has *ended* when it is in a terminal state; its end time is its record's
``updated_at`` (its last move). Under ``<data_dir>/jobs/<id>``, its *working directories* are
``work`` (the unpacked upload and what the job wrote there) and ``checkpoints``; its *logs* are
everything else (each attempt's replica directories with ``stdout.log`` and ``stderr.log``).

``sweep`` (run by ``Sweeper`` every ``interval_s`` while ``rota up`` serves), in order:

1. the working directories of jobs that ended more than ``Retention.workdirs_s`` ago;
2. the whole directory of jobs that ended more than ``Retention.logs_s`` ago (never less than
   ``workdirs_s``: logs are kept at least as long);
3. uploads older than ``Retention.uploads_s`` that no job still to run names;
4. idempotency keys past their day (``Store.forget_keys``).

A job still pending, scheduled or running is never touched. ``disk_use`` is what ``rota up``
reports of its data directory (``rota.api.storage``, which counts projects' quotas the same
way).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rota.api.storage import disk_use
from rota.core import InvalidSpec, JobState
from rota.core.datadir import JOB_OWN_DIRS, RECORD, job_home, upload_archive, uploads_root
from rota.store import JobFilter, JobRecord, Store

log = logging.getLogger("rota.retention")
DAY_S = 86400.0
ENDED = frozenset(s for s in JobState if s.terminal)
ACTIVE = frozenset(s for s in JobState if not s.terminal)


@dataclass(frozen=True, slots=True)
class Retention:
    workdirs_s: float = 7 * DAY_S
    logs_s: float = 30 * DAY_S
    uploads_s: float = 7 * DAY_S

    def __post_init__(self) -> None:
        for name in ("workdirs_s", "logs_s", "uploads_s"):
            if getattr(self, name) <= 0:
                raise InvalidSpec(f"keep-{name[:-2]}", "must be a positive duration")
        if self.logs_s < self.workdirs_s:
            raise InvalidSpec("keep-logs", "must be at least --keep-workdirs: a job's logs are "
                              "kept at least as long as its working directory")


@dataclass(frozen=True, slots=True)
class Swept:
    workdirs: int = 0
    jobs: int = 0
    uploads: int = 0
    keys: int = 0


def sweep(store: Store, data_dir: Path, keep: Retention, now: float) -> Swept:
    """Remove what ``keep`` no longer keeps (see the module docstring); what was removed."""
    workdirs = whole = 0
    for rec in _jobs(store, ENDED):
        home = job_home(data_dir, rec.id)
        age = now - rec.updated_at
        if age > keep.logs_s and home.is_dir():
            shutil.rmtree(home, ignore_errors=True)
            whole += 1
        elif age > keep.workdirs_s:
            gone = [_remove(home / name) for name in JOB_OWN_DIRS]
            workdirs += any(gone)
    in_use = {str(rec.run.get("upload")) for rec in _jobs(store, ACTIVE)}
    uploads = 0
    for meta in sorted(uploads_root(data_dir).glob("*" + RECORD)):
        upload = meta.stem
        if upload not in in_use and now - _created_at(meta) > keep.uploads_s:
            upload_archive(data_dir, upload).unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
            uploads += 1
    return Swept(workdirs, whole, uploads, store.forget_keys(now))


def _created_at(meta: Path) -> float:
    """When an upload was received (its record's ``created_at``; the file's time otherwise)."""
    try:
        return float(json.loads(meta.read_text())["created_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return meta.stat().st_mtime


def _jobs(store: Store, states: frozenset[JobState]) -> Iterator[JobRecord]:
    after = None
    while True:
        page = store.list_jobs(JobFilter(states=states), limit=500, after=after)
        yield from page.items
        if page.next_after is None:
            return
        after = page.next_after


def _remove(path: Path) -> bool:
    if not path.is_dir():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


class Sweeper:
    """``sweep`` on a thread of its own every ``interval_s``, until ``stop``."""

    def __init__(self, store: Store, data_dir: Path, keep: Retention,
                 clock: Callable[[], float], interval_s: float = 600.0) -> None:
        self.store, self.data_dir, self.keep, self.clock = store, data_dir, keep, clock
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rota-retention", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                swept = sweep(self.store, self.data_dir, self.keep, self.clock())
            except Exception:  # a failed sweep must not stop the control plane
                log.exception("retention sweep failed")
                continue
            if swept != Swept():
                log.info("retention: removed %d working directories, %d job directories, %d "
                         "uploads, %d idempotency keys", swept.workdirs, swept.jobs,
                         swept.uploads, swept.keys)
