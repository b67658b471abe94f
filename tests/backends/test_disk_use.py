"""Measuring a working directory (``rota.backends.diskuse.measure``) on real files: what it
holds on disk, each inode once, symbolic links not followed, file systems mounted inside not
entered, and a walk that stops once past the limit it was given."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

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


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here (root is needed): {done.stderr.strip()}")


@pytest.fixture
def overlay(tmp_path: Path) -> Iterator[Path]:
    """A working directory on overlayfs whose upper layer is on another file system (tmpfs) than
    its lower one: there, files report the upper layer's device and directories the overlay's,
    as in a VM or a container whose writable layer is in memory."""
    lower, upper, merged = tmp_path / "lower", tmp_path / "upper", tmp_path / "merged"
    for d in (lower, upper, merged):
        d.mkdir()
    mount("-t", "tmpfs", "tmpfs", str(upper))
    try:
        (upper / "rw").mkdir()
        (upper / "work").mkdir()
        mount("-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper}/rw,"
              f"workdir={upper}/work", str(merged))
        try:
            yield merged
        finally:
            subprocess.run(["umount", str(merged)], check=True)
    finally:
        subprocess.run(["umount", str(upper)], check=True)


def test_files_on_an_overlay_count_though_they_report_another_device(overlay: Path) -> None:
    write(overlay / "job" / "big", 3)
    assert os.stat(overlay / "job" / "big").st_dev != os.stat(overlay / "job").st_dev
    assert 3 * MIB <= measure(str(overlay / "job")) < 4 * MIB


def test_a_file_system_mounted_inside_is_not_entered(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write(work / "own", 1)
    (work / "mnt").mkdir()
    mount("-t", "tmpfs", "tmpfs", str(work / "mnt"))
    try:
        write(work / "mnt" / "other", 4)
        assert 1 * MIB <= measure(str(work)) < 2 * MIB
    finally:
        subprocess.run(["umount", str(work / "mnt")], check=True)
