"""A project's storage quota (``fair_use.project.storage``, ``rota.store.records.Cap``).

What a project uses, in bytes:

- *uploads*: the archives kept for it (``rota.api.uploads``; one sent without ``?project=`` is
  charged to every project of its uploader), as their blocks on disk;
- *pending jobs*: a job that names an upload and has no directory yet will unpack it, so it
  counts the upload's unpacked size (known from the archive's index when it was uploaded);
- *job directories*: ``<data_dir>/jobs/<job id>`` (working directory with its unpacked
  upload, what the job wrote there, checkpoints, logs) as their blocks on disk, measured, so a
  running job's growth counts.

Measuring is bounded (``StorageQuota``): a check measures, or while another check of the
project is measuring, adds what was accepted since to the last measurement if it is at most
``FRESH_S`` old; a measurement walks the directories of running jobs, a large one only again
after a time in proportion to its size, and a walk stops
after ``MAX_ENTRIES`` entries, counting what it saw; an ended job's directory is walked once;
the project's jobs and uploads are listed again only now and then, and what was accepted in
between is added as it is accepted (and held while it is being stored), so parallel submits
cannot slip past the cap together. The quota is checked at every submit of a member (a job that
names an upload adds its unpacked size, once per task of an array; one that names none adds
nothing, and is refused only when the project is already over) and at every upload of a
member (refused when a project it is charged to is already at or over its cap). Over it:
``StorageFull`` (HTTP 507, field ``upload``), nothing written. A running job that writes past
the cap is not stopped here; it is counted, so the project's next submits are refused.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from rota.core import JobState, RotaError
from rota.core.datadir import jobs_root, upload_archive

MAX_ENTRIES = 200_000  # files and directories counted under one job directory per walk
WALK_RATE = 20_000.0  # entries per second of age a walk may have: 200,000 entries, 10 s
MIN_WALK_AGE_S = 0.2  # a directory's size is at most this old at a check, if small
SINCE_MAX = 64  # jobs stored since the listing looked for a directory at each check
DEFAULT_TTL_S = 5.0
FRESH_S = MIN_WALK_AGE_S  # a check adds to a measurement at most this old
T = TypeVar("T")


class StorageFull(RotaError):
    code = "storage_full"

    def __init__(self, project: str, used: "Usage", adding: int, cap: int, what: str) -> None:
        super().__init__(
            f"project {project} uses {human(used.total)} of its {human(cap)} storage cap "
            f"({used.total} of its {cap} bytes: uploads {human(used.uploads)}, pending jobs' "
            f"uploads to unpack {human(used.pending)}, job directories {human(used.jobs)}), "
            + (f"and this {what} would add {human(adding)}" if adding else
               f"so it takes no new {what}")
            + ": delete what old jobs left in their directories and uploads no longer needed, "
            "or ask an operator to raise fair_use.project.storage")
        self.field = "upload"


@dataclass(frozen=True, slots=True)
class Usage:
    uploads: int = 0
    pending: int = 0
    jobs: int = 0

    @property
    def total(self) -> int:
        return self.uploads + self.pending + self.jobs


@dataclass
class _Book:
    """One project's last listing, and what was accepted since."""

    lock: threading.Lock = field(default_factory=threading.Lock)  # listing and checks
    listed_at: float = -math.inf
    cost_s: float = 0.0     # what the last listing took
    uploads: int = 0        # archives charged to it, at the listing
    pending: int = 0        # uploads its pending jobs will unpack, at the listing
    ended: int = 0          # ended jobs' directories, at the listing
    live: tuple[str, ...] = ()  # jobs whose directory may grow: measured at every check
    since_uploads: int = 0  # archives kept since the listing
    since_jobs: dict[str, int] = field(default_factory=dict)  # jobs stored since: their
    # upload's unpacked size, until they have a directory (then measured)
    walked: dict[str, tuple[float, int, int]] = field(default_factory=dict)  # a live job's
    # directory at its last walk: (when, bytes, entries)
    # ``tally`` guards ``held`` and ``inbox`` only, never for long: the event loop takes it
    tally: threading.Lock = field(default_factory=threading.Lock)
    held: int = 0           # accepted, not yet stored
    inbox: list[tuple[float, str | None, int]] = field(default_factory=list)  # stored, not
    # yet counted: (when, job id or None for an upload's archive, bytes)
    measured: Usage = Usage()  # the last measurement (without held and inbox), and when
    measured_at: float = -math.inf

    def current(self) -> Usage:
        """The last measurement with what was held and stored since (``tally`` held)."""
        uploads = sum(size for _, job, size in self.inbox if job is None)
        jobs = sum(size for _, job, size in self.inbox if job is not None)
        m = self.measured
        return Usage(m.uploads + uploads, m.pending + self.held + jobs, m.jobs)


class StorageQuota:
    """The storage used by each project of one server, and the check against its cap.

    ``jobs_of(project)`` lists (id, state, upload id) of the project's jobs
    (``Store.storage_rows``); ``uploads()`` every kept upload; ``members()`` each user's
    projects, for uploads sent without a project. Thread-safe: checks run on worker threads;
    ``settle`` may be called on the event loop, as it never waits for a check.

    Cost of a check while another is measuring and the last measurement is at most
    ``FRESH_S`` old: counters added up, under a lock held for no I/O. Cost of a measurement:
    the directories of the project's live jobs are walked (each again only after
    ``max(MIN_WALK_AGE_S, entries / WALK_RATE)`` seconds, so a large tree is walked seldom),
    and jobs stored since the last listing are looked for a directory, at most ``SINCE_MAX``
    of them; past that (once ten times the last listing's duration has passed),
    or every ``ttl_s``, the project's jobs and uploads are listed again."""

    def __init__(self, data_dir: Path,
                 jobs_of: Callable[[str], list[tuple[str, JobState, str | None]]],
                 uploads: Callable[[], Iterable],
                 members: Callable[[], dict[str, frozenset[str]]],
                 ttl_s: float = DEFAULT_TTL_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.data_dir, self._jobs_of, self._uploads = data_dir, jobs_of, uploads
        self._members, self.ttl_s, self._now = members, ttl_s, monotonic
        self._books: dict[str, _Book] = {}
        self._lock = threading.Lock()
        self._ended: dict[str, int] = {}  # an ended job's directory, walked once
        self._jobs_root = os.fspath(jobs_root(data_dir)) + os.sep  # strings: pathlib's joins
        # cost ten times a stat, and a check may look at a hundred directories

    def admit(self, project: str, adding: int, cap: int | None, what: str) -> int:
        """Hold ``adding`` bytes for ``project``; ``StorageFull`` past ``cap`` (and, adding
        nothing, when already over it). Returns the bytes held, for ``settle``."""
        if cap is None:
            return 0
        book = self._book(project)

        def hold(used: Usage) -> int:  # under book.tally
            if used.total + adding > cap or (adding == 0 and used.total > cap):
                raise StorageFull(project, used, adding, cap, what)
            book.held += adding
            return adding
        return self._checked(book, project, hold)

    def refuse_if_full(self, project: str, cap: int | None, what: str) -> None:
        """``StorageFull`` when ``project`` already uses its whole cap."""
        if cap is None:
            return

        def check(used: Usage) -> None:
            if used.total >= cap:
                raise StorageFull(project, used, 0, cap, what)
        self._checked(self._book(project), project, check)

    def _checked(self, book: "_Book", project: str, decide: Callable[[Usage], T]) -> T:
        """``decide(usage)`` under ``book.tally``, on a measurement of this check's own, or,
        while another check is measuring, on the last measurement if it is at most
        ``FRESH_S`` old: in a burst most checks then only add up counters, with no I/O and
        no wait for the lock (checks that each stat files under a lock every thread queues
        on run at the pace of the interpreter's switch interval, not of the disk)."""
        waited = not book.lock.acquire(blocking=False)
        if waited:
            with book.tally:
                if self._now() - book.measured_at < FRESH_S:
                    return decide(book.current())
            book.lock.acquire()
        try:
            with book.tally:  # measured while this one waited: that measurement serves it too
                if waited and self._now() - book.measured_at < FRESH_S:
                    return decide(book.current())
            now = self._now()
            measured = self._usage(project, book, now)
            with book.tally:
                book.measured, book.measured_at = measured, now
                return decide(book.current())
        finally:
            book.lock.release()

    def settle(self, project: str, held: int, stored: dict[str | None, int]) -> None:
        """``held`` bytes are no longer pending; ``stored`` (by job id: its unpacked upload;
        None: an upload's archive) is now in the store or on disk, counted until the next
        listing (a job's directory, once it has one, instead of its upload)."""
        book = self._book(project)
        now = self._now()
        with book.tally:
            book.held -= held
            book.inbox.extend((now, job, size) for job, size in stored.items())

    def _book(self, project: str) -> _Book:
        with self._lock:
            return self._books.setdefault(project, _Book())

    def _usage(self, project: str, book: _Book, now: float) -> Usage:
        """What ``project`` uses now, but for what ``book.held`` holds and its inbox has
        not yet given (its book's lock held)."""
        elapsed = now - book.listed_at
        if elapsed >= self.ttl_s or (len(book.since_jobs) > SINCE_MAX
                                     and elapsed >= 10 * book.cost_s):
            self._list(project, book, now)
        with book.tally:
            inbox, book.inbox = book.inbox, []
        for at, job, size in inbox:
            if at < book.listed_at:
                continue  # the listing has it
            if job is None:
                book.since_uploads += size
            else:
                book.since_jobs[job] = size
        jobs = book.ended + sum(self._walk(book, job_id, now) for job_id in book.live)
        pending = book.pending
        for job, size in list(book.since_jobs.items())[:SINCE_MAX]:
            if os.path.isdir(self._jobs_root + job):
                jobs += self._walk(book, job, now)
            else:
                pending += size
        pending += sum(list(book.since_jobs.values())[SINCE_MAX:])
        return Usage(book.uploads + book.since_uploads, pending, jobs)

    def _list(self, project: str, book: _Book, now: float) -> None:
        kept = {u.id: u for u in self._uploads()}
        members: dict[str, frozenset[str]] | None = None
        book.uploads = 0
        for u in kept.values():
            if u.project is None and members is None:
                members = self._members()
            if (u.project == project if u.project is not None
                    else project in (members or {}).get(u.user, frozenset())):
                book.uploads += _blocks(upload_archive(self.data_dir, u.id))
        book.pending = book.ended = 0
        live = []
        for job_id, state, upload in self._jobs_of(project):
            home = self._jobs_root + job_id
            if state.terminal:
                if os.path.isdir(home):
                    if job_id not in self._ended:
                        self._ended[job_id] = walk_size(Path(home))[0]
                    book.ended += self._ended[job_id]
                else:
                    self._ended.pop(job_id, None)  # removed (rota.server.retention)
            elif state.holds_resources or os.path.isdir(home):
                live.append(job_id)
            elif upload is not None and upload in kept:
                book.pending += kept[upload].unpacked
        book.live = tuple(live)
        book.walked = {job: book.walked[job] for job in live if job in book.walked}
        book.since_uploads, book.since_jobs = 0, {}
        book.listed_at, book.cost_s = now, self._now() - now

    def _walk(self, book: _Book, job_id: str, now: float) -> int:
        """The blocks under a live job's directory, walked again once ``max(MIN_WALK_AGE_S,
        entries / WALK_RATE)`` seconds have passed since the last walk."""
        found = book.walked.get(job_id)
        if found is not None and now - found[0] < max(MIN_WALK_AGE_S, found[2] / WALK_RATE):
            return found[1]
        size, entries = walk_size(Path(self._jobs_root + job_id))
        book.walked[job_id] = (now, size, entries)
        return size


def disk_use(path: Path) -> int:
    """Bytes of the blocks under ``path`` (what ``du`` says; 0 when it does not exist)."""
    return walk_size(path, math.inf)[0]  # type: ignore[arg-type]


def walk_size(path: Path, max_entries: int = MAX_ENTRIES) -> tuple[int, int]:
    """Bytes of the blocks under ``path`` (what ``du`` says; 0 when it does not exist) and
    the entries counted, at most ``max_entries``."""
    total = seen = 0
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            seen += 1
            if seen > max_entries:
                return total, max_entries
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:  # removed while it was counted
                continue
    return total, seen


def _blocks(path: Path) -> int:
    try:
        return path.stat().st_blocks * 512
    except OSError:
        return 0


def human(size: int) -> str:
    """``size`` bytes as ``8.3 GiB`` (or ``512 B``)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}".replace(
                ".0 ", " ")
        value /= 1024
    return f"{size} B"
