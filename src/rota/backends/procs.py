"""Process identity and crash-safe files, shared by the local backend and its supervisor.

A process is identified by its pid **and** its start time (clock ticks since boot, field 22 of
``/proc/<pid>/stat``) on a given boot (``/proc/sys/kernel/random/boot_id``): a pid reused by an
unrelated process after ours exited, or after a reboot, does not match. A zombie (exited but
not yet reaped) counts as not running.

Files other processes read are written atomically: to a temporary file in the same directory,
then renamed over the target, so a reader sees the old content or the new one, never a torn
write, even if the writer is killed half-way. What must outlive a crash of the machine (how a
replica ended, who claimed it) is also flushed to disk (``durable``); what only matters while
the machine runs (a replica's spec, a stop request, a handle: after a reboot every replica is
lost anyway) is not, which saves two disk flushes per file.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

_PROC = Path("/proc")


def boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and
    parentheses), so that index 0 is the state (field 3) and index 19 the start time (field 22)."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot; ``None`` if it does not exist."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[19])


def is_running(pid: int, ticks: int | None) -> bool:
    """True when ``pid`` exists, is not a zombie and (when ``ticks`` is given) started at
    ``ticks``. Without ``/proc`` only existence can be checked."""
    if not _PROC.joinpath("self").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return ticks is None or int(fields[19]) == ticks


def session_of(pid: int) -> int | None:
    """The session id of ``pid`` (a replica's processes share their command's); None when
    it is gone or not ours to ask about."""
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def make_dirs(path: Path, mode: int) -> Path:
    """Create ``path`` and its missing parents with exactly ``mode`` (not narrowed by the
    umask); existing directories keep theirs."""
    missing, parent = [], path
    while not parent.is_dir():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:
            continue
        os.chmod(directory, mode)
    return path


def write_json_atomic(path: Path, data: Any, mode: int = 0o644, durable: bool = True) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def claim_json(path: Path, data: Any) -> bool:
    """Create ``path`` holding ``data`` unless it exists (``O_EXCL``): True for the one caller
    that created it, False for every other. The content is written under a temporary name
    and linked into place, so a reader never sees the file half-written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.claim")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails when ``path`` exists
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return True


def read_json(path: Path) -> Any | None:
    """The JSON content of ``path``; ``None`` if it does not exist (yet)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
