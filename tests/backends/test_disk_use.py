"""Measuring a working directory (``rota.backends.diskuse.measure``) on real files: what it
holds on disk, each inode once, symbolic links not followed, and a walk that stops once past
the limit it was given."""

from __future__ import annotations

import os
from pathlib import Path

from rota.backends.diskuse import MIB, measure


def write(path: Path, mib: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(mib * MIB))
        f.flush()
        os.fsync(f.fileno())
    return path


def test_files_in_nested_directories_count_once_each_and_links_lead_nowhere(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    write(work / "a" / "b" / "one", 1)
    two = write(work / "two", 2)
    os.link(two, work / "a" / "two-again")             # a hard link: the same blocks
    big = write(outside / "big", 8)
    (work / "to-big").symlink_to(big)                  # not followed
    (work / "to-outside").symlink_to(outside, target_is_directory=True)
    used = measure(str(work))
    assert 3 * MIB <= used < 4 * MIB, used


def test_a_walk_stops_once_past_its_limit(tmp_path: Path) -> None:
    for k in range(20):
        write(tmp_path / f"d{k}" / "f", 1)
    assert measure(str(tmp_path)) >= 20 * MIB
    stopped = measure(str(tmp_path), stop_after=2 * MIB)
    assert 2 * MIB < stopped < 20 * MIB, stopped


def test_a_missing_directory_holds_nothing(tmp_path: Path) -> None:
    assert measure(str(tmp_path / "gone")) == 0
