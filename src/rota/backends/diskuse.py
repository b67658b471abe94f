"""The disk limit of a job's working directory on the local backend: measured, and enforced by
stopping the job.

A job that names ``resources.disk`` (or runs under ``rota up --job-disk``) has its working
directory measured now and then: the blocks its files hold (``st_blocks``), each inode once,
symbolic links not followed, other file systems mounted inside it not entered. Once it holds
more than the limit, every replica of the job is stopped (SIGTERM, SIGKILL after the job's
grace period) with the reason ``wrote more than its 1 GiB disk limit: ...``.

The measurement is bounded: a walk stops as soon as it has counted past the limit, and a job
is measured again only after ``period_s`` or 20 times as long as its last walk took, whichever
is longer, so that measuring costs at most about 5 % of one CPU however large the tree. A job
can therefore write past its limit between two walks; it is stopped at the next one.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from rota.backends.periodic import Periodic

log = logging.getLogger("rota.backends.diskuse")

MIB = 1024 * 1024
SPACING = 20.0  # a job is walked again after at least this many times its last walk


@dataclass(frozen=True, slots=True)
class Watched:
    """One launch to measure: its working directory, limit, and how to stop it."""

    key: str
    workdir: str
    limit_mib: int
    stop: Callable[[str], None]


def measure(root: str, stop_after: int | None = None) -> int:
    """Bytes of disk the tree at ``root`` holds; counting stops once past ``stop_after``."""
    try:
        device = os.lstat(root).st_dev
    except OSError:
        return 0
    seen: set[tuple[int, int]] = set()
    total, stack = 0, [root]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue  # gone, or not ours to read: what we cannot see is not counted
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                is_dir = stat.S_ISDIR(st.st_mode)
                if is_dir and st.st_dev != device:
                    continue  # another file system mounted here
                # (a file may report another device than its directory and still be in the
                # tree: overlayfs gives files their layer's device, directories its own)
                if st.st_nlink > 1:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
                if is_dir:
                    stack.append(entry.path)
        if stop_after is not None and total > stop_after:
            break
    return total


def size(mib: float) -> str:
    return f"{mib / 1024:.3g} GiB" if mib >= 1024 else f"{mib:.3g} MiB"


class DiskWatcher:
    """Measures each launch ``watched()`` returns, in a thread of its own, and stops the
    launches over their limit."""

    def __init__(self, watched: Callable[[], Sequence[Watched]], period_s: float = 2.0) -> None:
        self.watched, self.period_s = watched, period_s
        self._due: dict[str, float] = {}
        self._stopped: set[str] = set()
        self._checks = Periodic("rota-disk", min(1.0, period_s), self.check_once, _failed)

    def check_once(self, now: float | None = None) -> list[str]:
        """Measure the launches that are due; the reasons of those stopped this pass."""
        now = time.monotonic() if now is None else now
        found = []
        current = self.watched()
        for w in current:
            if w.key in self._stopped or self._due.get(w.key, 0.0) > now:
                continue
            started = time.monotonic()
            used = measure(w.workdir, w.limit_mib * MIB)
            took = time.monotonic() - started
            self._due[w.key] = now + max(self.period_s, SPACING * took)
            if used > w.limit_mib * MIB:
                reason = (f"wrote more than its {size(w.limit_mib)} disk limit: its working "
                          f"directory {w.workdir} holds {size(used / MIB)} or more")
                w.stop(reason)
                self._stopped.add(w.key)
                found.append(reason)
        keys = {w.key for w in current}
        self._due = {k: v for k, v in self._due.items() if k in keys}
        self._stopped &= keys
        return found

    def start(self) -> None:
        self._checks.start()

    def stop(self) -> None:
        self._checks.stop()


def _failed(_exc: Exception) -> None:
    # a bug must not end the control plane; say it loudly
    log.exception("measuring jobs' working directories failed")
