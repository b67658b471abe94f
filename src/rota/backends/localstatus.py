"""What a local replica's files and processes say about it: how it stands, how busy its GPUs
are, when it last wrote output; and rota's own notes appended to its log.

Kept apart from ``rota.backends.local`` (which launches, recovers and stops replicas): these
only read a replica's directory, its supervisor and its child, so that an instance of the
backend over the same data directory learns from them all the earlier one knew (see the
``local`` module docstring for what ``status.json``, ``child.json`` and the supervisor mean).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Sequence

from rota.backends.base import Activity, Handle, ReplicaHandle, ReplicaState, ReplicaStatus
from rota.backends.localfiles import Proc, boot_of, proc
from rota.backends.nvml import Nvml
from rota.backends.procs import is_running, read_json, session_of
from rota.core import MILLI, End
from rota.core.mig import is_instance_index

UTIL_WINDOW_S = 10.0  # per-process GPU utilisation samples of the last this many seconds


def replica_status(handle: Handle, r: ReplicaHandle, boot: str) -> ReplicaStatus:
    """Exited (its ``status.json``), running (its supervisor lives, on this boot) or lost."""
    p = proc(r)
    for attempt in range(2):  # re-read: the supervisor may finish between the two checks
        done = read_json(Path(p.dir) / "status.json")
        if done is not None:
            peak = done.get("max_rss_kib")
            return ReplicaStatus(r.rank, ReplicaState.EXITED, done.get("exit_code"),
                                 done.get("signal"), done.get("reason", ""),
                                 done.get("finished_at"),
                                 max_rss_kib=peak if isinstance(peak, int) else None)
        if attempt == 0 and boot_of(handle) == boot and is_running(p.pid, p.start_ticks):
            return ReplicaStatus(r.rank, ReplicaState.RUNNING)
    if boot_of(handle) != boot:
        return ReplicaStatus(r.rank, ReplicaState.LOST, reason="the machine restarted")
    return ReplicaStatus(r.rank, ReplicaState.LOST, reason=(
        f"supervisor (pid {p.pid}) is gone and recorded no exit status"))


def on_sick_gpu(status: ReplicaStatus, r: ReplicaHandle, sick: dict[int, str]) -> ReplicaStatus:
    """A replica still running on an unhealthy GPU is lost to it: it is stopped and
    requeued, as if its node had failed."""
    bad = [s.index for s in r.devices if s.index in sick]
    if not bad or status.state is not ReplicaState.RUNNING:
        return status
    return ReplicaStatus(r.rank, ReplicaState.LOST, cause=End.GPU_UNHEALTHY,
                         reason=f"GPU {bad[0]} is unhealthy: {sick[bad[0]]}")


def activity(nvml: Nvml | None, handles: Sequence[Handle]) -> list[Activity]:
    """Each launch's GPU utilisation (NVML: a whole device's own figure; on a shared
    device, the SM utilisation of the replica's own processes, those of its session) and
    when its log files last grew."""
    util = sharing = None
    if nvml is not None:
        util = nvml.utilization()
        since = int((time.time() - UTIL_WINDOW_S) * 1_000_000)
        sharing = {}
        for sample in nvml.process_utilization(since):
            sid = session_of(sample.pid)
            key = (sid, sample.index)
            sharing[key] = sharing.get(key, 0) + sample.sm_percent
    return [Activity(_gpu_util(h, util, sharing), _last_output(h)) for h in handles]


def _gpu_util(handle: Handle, util: dict[int, int] | None,
              sharing: dict[tuple[int | None, int], int] | None) -> float | None:
    if util is None or sharing is None:
        return None
    figures = []
    for r in handle.replicas:
        child = read_json(Path(proc(r).dir) / "child.json") or {}
        for share in r.devices:
            if share.milli >= MILLI:
                figures.append(util.get(share.index))
            elif is_instance_index(share.index):
                figures.append(None)  # NVML reports no utilization of a MIG instance
            else:
                figures.append(sharing.get((child.get("pid"), share.index), 0))
    known = [f for f in figures if f is not None]
    return sum(known) / len(known) if known else None


def _last_output(handle: Handle) -> float | None:
    times = []
    for r in handle.replicas:
        p = proc(r)
        for path in (p.stdout, p.stderr):
            try:
                times.append(os.stat(path).st_mtime)
            except OSError:
                continue
    return max(times) if times else None


def notify(handle: Handle, message: str) -> None:
    """Append ``[rota] message`` to every replica's stderr log. The log keeps its time of
    change: rota's own line is not the job's output (``activity`` reads that time)."""
    for r in handle.replicas:
        path = proc(r).stderr
        try:
            before = os.stat(path)
            with open(path, "a", opener=_no_follow) as f:
                f.write(f"[rota] {message}\n")
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        except OSError:
            continue


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW, 0o600)


def live_child(p: Proc) -> int | None:
    """The pid of the replica's command while it runs, else None."""
    child = read_json(Path(p.dir) / "child.json")
    if child is None or not is_running(child["pid"], child.get("start_ticks")):
        return None
    return int(child["pid"])
