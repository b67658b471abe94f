"""Enforcement of GPU-memory shares: stop a replica that uses more device memory than it got.

Each check reads the memory every compute process uses on every device (NVML), attributes a
process to the replica whose cgroup holds it (the replica's leaf or a cgroup below it, where a
container's processes run: ``rota.backends.cgroups``) or, where replicas get no cgroup, whose
session it belongs to (a replica's command leads its own session, and its children stay in it
unless they deliberately leave), sums per replica and device, and stops every replica over its
limit on some device: SIGTERM, then SIGKILL after ``grace_s``,
with the reason ``gpu-memory-exceeded: used U MiB > limit L MiB on GPU i`` recorded as how the
replica ended.

A check that fails (NVML stops answering) leaves shares unenforced until one succeeds again:
that is logged as an error when it starts (and once it recovers), and ``enforcing`` says it,
never only kept in a field.

The watcher reacts within its polling period: a process may exceed its share between two checks,
and memory it allocates faster than that is not prevented (MPS pinned memory limits do that,
when an MPS daemon runs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from rota.backends import cgroups
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import LocalBackend, proc
from rota.backends.nvml import Nvml
from rota.backends.periodic import Periodic
from rota.backends.procs import is_running, read_json, session_of

log = logging.getLogger("rota.backends.watcher")


@dataclass(frozen=True, slots=True)
class Violation:
    job_id: str
    rank: int
    index: int
    used_mib: int
    limit_mib: int

    @property
    def reason(self) -> str:
        return (f"gpu-memory-exceeded: used {self.used_mib} MiB > limit {self.limit_mib} MiB "
                f"on GPU {self.index}")


class MemoryWatcher:
    def __init__(self, backend: LocalBackend, nvml: Nvml, grace_s: float = 5.0,
                 period_s: float = 1.0) -> None:
        self.backend, self.nvml = backend, nvml
        self.grace_s, self.period_s = grace_s, period_s
        self._stopped: set[tuple[str, int]] = set()
        self._checks = Periodic("rota-memory-watcher", period_s, self._check, self._failed)
        self.last_error: Exception | None = None  # of the background loop, which keeps going
        backend.memory_watcher = self  # the backend says when shares are not enforced

    @property
    def enforcing(self) -> bool:
        """False while the last check failed: shares are not being enforced."""
        return self.last_error is None

    def check_once(self) -> list[Violation]:
        """One pass: find the replicas over their share and stop them. Returns what it found
        this pass (a replica already being stopped is not reported again)."""
        watched = self._watched()
        usage: dict[tuple[tuple[str, int], int], int] = {}  # (replica key, device) -> MiB
        for used in self.nvml.process_memory():
            owner = _owner(watched, used.pid)
            if owner is not None:
                usage[(owner, used.index)] = usage.get((owner, used.index), 0) + used.used_mib
        found = []
        for key, (handle, r, _, _) in watched.items():
            for share in r.devices:
                used_mib = usage.get((key, share.index), 0)
                if used_mib > share.memory_mib:
                    v = Violation(handle.job_id, r.rank, share.index, used_mib, share.memory_mib)
                    self.backend.stop_replica(r, self.grace_s, v.reason)
                    self._stopped.add(key)
                    found.append(v)
                    break
        return found

    def _watched(self) -> dict[tuple[str, int], tuple[Handle, ReplicaHandle, int, dict | None]]:
        """(launch id, rank) -> (handle, replica, its command's pid, its cgroup plan) for
        every running replica with GPU shares not already being stopped."""
        out = {}
        for handle in self.backend.tracked():
            for r in handle.replicas:
                key = (handle.launch_id, r.rank)
                if key in self._stopped or not r.devices:
                    continue
                child = read_json(Path(proc(r).dir) / "child.json")
                if child is None or not is_running(child["pid"], child.get("start_ticks")):
                    continue
                spec = read_json(Path(proc(r).dir) / "spec.json") or {}
                out[key] = (handle, r, child["pid"], spec.get("cgroup"))
        return out

    def start(self) -> None:
        """Check every ``period_s`` in a background thread until ``stop``."""
        self._checks.start()

    def stop(self) -> None:
        self._checks.stop()

    def _check(self) -> None:
        self.check_once()
        if self.last_error is not None:
            log.warning("GPU memory shares are enforced again")
        self.last_error = None

    def _failed(self, exc: Exception) -> None:
        """An NVML hiccup must not end enforcement: said once, when the checks start failing."""
        if self.last_error is None:
            log.error("GPU memory shares are not enforced: the check failed (%r); "
                      "trying again every %g s", exc, self.period_s)
        self.last_error = exc


def _owner(watched: dict, pid: int) -> tuple[str, int] | None:
    """The replica ``pid`` belongs to: by cgroup where the replica has one, else by session."""
    sid = session_of(pid)
    for key, (_, _, leader, plan) in watched.items():
        if cgroups.holds(plan, pid) if plan else sid == leader:
            return key
    return None
