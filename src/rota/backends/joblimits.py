"""The local backend's limits of each job: CPU, memory and processes in a cgroup per replica
(``rota.backends.cgroups``), and the disk its working directory may hold
(``rota.backends.diskuse``).

At launch, ``spec_fields`` adds to each replica's ``spec.json`` the cgroup plan its supervisor
carries out (``cgroup``; null where cgroups are not usable), the job's grace period and its disk
limit (``grace_s``, ``disk_mib``). Everything the limits need later is read back from there, so
a restarted control plane knows what the one before it knew: a running replica's cgroup is
found under its name and keeps its limits (the kernel holds them, not rota), and cgroups whose
replica ended while no control plane ran are removed when the backend starts (``sweep``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable

from rota.backends import cgroups
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.diskuse import DiskWatcher, Watched
from rota.backends.localfiles import proc
from rota.backends.procs import boot_id, is_running, read_json
from rota.core import Job
from rota.core.datadir import jobs_root

CLAIM = "supervisor.json"  # rota.backends.shim.CLAIM, named here without importing the shim


class JobLimits:
    def __init__(self, data_dir: Path, pids: int, disk_mib: int | None,
                 tracked: Callable[[], list[Handle]],
                 stop: Callable[[ReplicaHandle, float, str], None]) -> None:
        self.data_dir = data_dir
        self.hierarchy = cgroups.detect(data_dir, pids)  # a string says why there is none
        self.disk_mib = disk_mib  # a job's working-directory limit when it names none
        self.tracked, self.stop_replica = tracked, stop
        self._disk: dict[str, tuple[str, int, float] | None] = {}
        self.disk = DiskWatcher(self._watched)
        if isinstance(self.hierarchy, cgroups.Hierarchy):
            self.hierarchy.sweep(self._live)  # left by replicas that ended while we were down

    def enforced(self) -> str:
        """How a job's CPU, memory and process limits are enforced, or why they are not."""
        if isinstance(self.hierarchy, cgroups.Hierarchy):
            return self.hierarchy.describe()
        return f"not enforced: {self.hierarchy}"

    def spec_fields(self, replica_dir: Path, job: Job, disk_mib: int | None) -> dict:
        """What a replica's ``spec.json`` holds of its limits."""
        plan = None
        if isinstance(self.hierarchy, cgroups.Hierarchy):
            plan = self.hierarchy.plan(self.hierarchy.leaf(self.data_dir, replica_dir),
                                       job.request.cpu_milli, job.request.memory_mib)
        return {"cgroup": plan, "grace_s": job.grace_s, "disk_mib": disk_mib or self.disk_mib}

    def start(self) -> None:
        self.disk.start()

    def stop(self) -> None:
        self.disk.stop()
        if isinstance(self.hierarchy, cgroups.Hierarchy):
            self.hierarchy.close()

    @staticmethod
    def release(handle: Handle) -> None:
        """Remove the cgroups of a launch that ended, killing what still runs in them (its
        supervisors do it themselves; this covers a supervisor that was killed)."""
        for r in handle.replicas:
            rdir = Path(proc(r).dir)
            plan = (read_json(rdir / "spec.json") or {}).get("cgroup")
            if plan and any(Path(d).is_dir() for d in plan["dirs"].values()):
                cgroups.release(list(plan["dirs"].values()))

    def _live(self, leaf: str) -> bool:
        """Whether the replica a cgroup ``leaf`` is named after may still run: its
        supervisor claimed it, runs on this boot, and has not recorded its end."""
        parts = leaf.split(":")
        if len(parts) != 3:
            return False
        rdir = jobs_root(self.data_dir) / parts[0] / parts[1] / f"replica-{parts[2]}"
        claim = read_json(rdir / CLAIM)
        if claim is None or "fenced" in claim or (rdir / "status.json").exists():
            return False
        return claim.get("boot_id") == boot_id() and is_running(claim["pid"],
                                                                 claim.get("start_ticks"))

    def _watched(self) -> list[Watched]:
        """The running launches with a disk limit, for ``DiskWatcher`` (each spec read once)."""
        out, handles = [], self.tracked()
        for h in handles:
            if h.launch_id not in self._disk:
                spec = read_json(Path(proc(h.replicas[0]).dir) / "spec.json") or {}
                mib, workdir = spec.get("disk_mib"), spec.get("workdir")
                self._disk[h.launch_id] = ((workdir, mib, float(spec.get("grace_s", 30.0)))
                                           if isinstance(mib, int) and isinstance(workdir, str)
                                           else None)
            found = self._disk[h.launch_id]
            if found is not None:
                out.append(Watched(h.launch_id, found[0], found[1],
                                   partial(self._stop_all, h, found[2])))
        live = {h.launch_id for h in handles}
        self._disk = {k: v for k, v in self._disk.items() if k in live}
        return out

    def _stop_all(self, handle: Handle, grace_s: float, reason: str) -> None:
        for r in handle.replicas:
            self.stop_replica(r, grace_s, reason)
