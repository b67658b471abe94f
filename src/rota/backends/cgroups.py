"""Per-replica cgroups of the local backend: what a job asked for in CPU, memory and
processes is what it gets, enforced by the kernel.

Vocabulary:

- the *base* is this control plane's own directory in each hierarchy: ``rota/<digest of the
  data directory>`` below the cgroup the control plane runs in (cgroup v1: in each of the
  memory, pids and cpu hierarchies, and cpuacct for statistics where it is mounted apart);
  on cgroup v2 below the parent of that cgroup, because a v2 cgroup that holds processes
  cannot hand its controllers to children. No limit is ever written to the base or above it.
- a *leaf* is one replica's cgroup in the base, named after the replica's directory
  (``<job id, quoted>:<attempt directory>:<rank>``), so that a restarted control plane finds
  it again by name (``Hierarchy.sweep``).
- a *plan* is what the backend writes into the replica's ``spec.json`` under ``cgroup``: the
  leaf's directories, the mount points, and the limits. The supervisor carries it out
  (``enter``) before it starts the command, and undoes it (``Joined.finish``) after.

Limits, per replica: memory (cgroup v1 ``memory.limit_in_bytes`` and, where swap accounting
exists, ``memory.memsw.limit_in_bytes`` at the same value; v2 ``memory.max`` and
``memory.swap.max`` 0), CPU (a CFS quota of the requested CPUs per 100 ms period, and a weight
in proportion: v1 ``cpu.cfs_quota_us`` and ``cpu.shares``, v2 ``cpu.max`` and ``cpu.weight``),
processes and threads (``pids.max``). A command the OOM killer hit is recognised from
``memory.oom_control`` (v1) or ``memory.events`` (v2), field ``oom_kill``.

How the command enters its leaf: the supervisor moves itself into the leaf, starts the command
(which is born there: nothing of the command ever runs outside it), and moves itself back to
where it was. The supervisor is never limited, so it outlives a command the kernel stops.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from rota.core.datadir import jobs_root

CPU_PERIOD_US = 100_000
DEFAULT_PIDS = 4096   # processes and threads of one replica (``rota up --job-pids``)
CONTROLLERS = ("memory", "pids", "cpu")
ENABLE = " ".join(f"+{c}" for c in CONTROLLERS)  # v2: what a parent hands its children
V1_STATS = "cpuacct"  # joined for its usage figures where mounted apart from cpu; no limit
MOUNTINFO = Path("/proc/self/mountinfo")


class CgroupError(OSError):
    """A cgroup could not be created, limited, joined or removed."""


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """Where this control plane's job cgroups live, in cgroup ``version`` 1 or 2."""

    version: int
    mounts: Mapping[str, str]  # controller (v2: "") -> its hierarchy's mount point
    bases: Mapping[str, str]   # controller (v2: "") -> this control plane's base directory
    pids: int = DEFAULT_PIDS

    def describe(self) -> str:
        return f"cpu/memory/pids: cgroup v{self.version}"

    def leaf(self, data_dir: Path, replica_dir: Path) -> str:
        quoted, attempt, replica = replica_dir.relative_to(jobs_root(data_dir)).parts
        return f"{quoted}:{attempt}:{replica.removeprefix('replica-')}"

    def plan(self, leaf: str, cpu_milli: int, memory_mib: int) -> dict[str, Any]:
        """What the supervisor of ``leaf`` creates and joins (``enter``)."""
        return {"version": self.version, "mounts": dict(self.mounts),
                "dirs": {c: f"{base}/{leaf}" for c, base in self.bases.items()},
                "cpu_milli": cpu_milli, "memory_mib": memory_mib, "pids": self.pids}

    def sweep(self, live: Callable[[str], bool]) -> list[str]:
        """Remove every leaf in the base whose replica is not ``live`` (ended, lost, or never
        started), killing what still runs in it; the leaves removed."""
        names: set[str] = set()
        for base in self.bases.values():
            try:
                names |= {e.name for e in os.scandir(base) if e.is_dir()}
            except OSError:
                continue
        gone = []
        for name in sorted(names):
            if not live(name):
                release([f"{base}/{name}" for base in self.bases.values()])
                gone.append(name)
        return gone


    def close(self) -> None:
        """Remove the base where it holds no leaf (a later replica makes it again)."""
        for base in self.bases.values():
            try:
                os.rmdir(base)
            except OSError:
                pass


def detect(data_dir: Path, pids: int = DEFAULT_PIDS) -> Hierarchy | str:
    """The hierarchy this control plane can place jobs in, checked by a probe; else why not,
    in words (cgroups absent, or not writable by this account)."""
    digest = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    v1, v2 = _mounts()
    own = _own_cgroups()
    try:
        if all(c in v1 for c in CONTROLLERS):
            return _v1(v1, own, digest, pids)
        if v2 is not None and set(CONTROLLERS) <= _controllers(v2):
            return _v2(v2, own.get("", "/"), digest, pids)
    except OSError as exc:
        return f"cannot create this control plane's cgroups: {exc.strerror or exc}" + (
            f" ({exc.filename})" if exc.filename else "")
    missing = [c for c in CONTROLLERS if c not in v1]
    if v2 is None and not v1:
        return "no cgroup file system is mounted"
    return (f"the {', '.join(missing)} controller(s) are mounted neither as cgroup v1 nor "
            "on cgroup v2")


def _v1(mounts: dict[str, str], own: dict[str, str], digest: str, pids: int) -> Hierarchy:
    used = {c: mounts[c] for c in CONTROLLERS}
    if V1_STATS in mounts and mounts[V1_STATS] != mounts["cpu"]:
        used[V1_STATS] = mounts[V1_STATS]
    bases = {c: str(Path(mount + own.get(c, "/").rstrip("/")) / "rota" / digest)
             for c, mount in used.items()}
    for base in bases.values():
        _probe(Path(base).parent, version=1)
    return Hierarchy(1, used, bases, pids)


def _v2(mount: str, own: str, digest: str, pids: int) -> Hierarchy:
    parent = Path(mount + own.rstrip("/"))
    if own not in ("", "/"):
        parent = parent.parent  # a sibling of our own cgroup, which holds processes
    _write(parent / "cgroup.subtree_control", ENABLE)
    _probe(parent / "rota", version=2)
    return Hierarchy(2, {"": mount}, {"": str(parent / "rota" / digest)}, pids)


def _probe(rota: Path, version: int) -> None:
    """Create ``rota`` (shared by the control planes of this cgroup) and in it a base that
    hands its controllers on (v2), then remove the probe: a directory we may create but not
    use is found out now. A base itself is made by the first replica that needs it."""
    rota.mkdir(exist_ok=True)
    if version == 2:
        _write(rota / "cgroup.subtree_control", ENABLE)
    probe = rota / f"probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        if version == 2:
            _write(probe / "cgroup.subtree_control", ENABLE)
    finally:
        probe.rmdir()


# -- the supervisor's side ---------------------------------------------------------------------


@dataclass(slots=True)
class Joined:
    """A replica's leaf, which the supervisor has created and limited and is in now."""

    plan: Mapping[str, Any]
    previous: dict[str, str] = field(default_factory=dict)  # controller -> where it was

    @property
    def dirs(self) -> list[str]:
        return list(self.plan["dirs"].values())

    def leave(self) -> None:
        """Move the supervisor back where it was (its command stays in the leaf). Never
        fails: a supervisor left in the leaf is one more process there, nothing worse."""
        for where in self.previous.values():
            try:
                _write(Path(where) / "cgroup.procs", str(os.getpid()))
            except OSError:
                pass

    def oom_kills(self) -> int:
        """How many processes of the replica the kernel's OOM killer killed."""
        if self.plan["version"] == 2:
            text = _read(Path(self.plan["dirs"][""]) / "memory.events")
        else:
            text = _read(Path(self.plan["dirs"]["memory"]) / "memory.oom_control")
        return _field(text, "oom_kill")

    def out_of_memory(self) -> str:
        """The reason a replica the OOM killer hit ended with ("": it was not hit)."""
        kills = self.oom_kills()
        if not kills:
            return ""
        return (f"out of memory: used more than its {_size(self.plan['memory_mib'])} memory "
                f"request (the kernel's OOM killer killed {kills} of its processes)")

    def finish(self) -> None:
        """Kill whatever the command left in its leaf, and remove the leaf."""
        self.leave()  # again: a supervisor still inside would keep the leaf busy
        release(self.dirs)


def enter(plan: Mapping[str, Any]) -> Joined:
    """Create the leaf of ``plan``, write its limits, and move this process into it."""
    joined = Joined(plan)
    try:
        for c, d in plan["dirs"].items():
            leaf = Path(d)
            leaf.parent.mkdir(parents=True, exist_ok=True)  # the base, by its first replica
            if plan["version"] == 2:
                _write(leaf.parent / "cgroup.subtree_control", ENABLE)
            leaf.mkdir(exist_ok=True)
            _limit(leaf, c, plan)
        own = _own_cgroups()
        for c, d in plan["dirs"].items():
            joined.previous[c] = plan["mounts"][c] + own.get(c, "/").rstrip("/")
            _write(Path(d) / "cgroup.procs", str(os.getpid()))
    except OSError as exc:
        joined.leave()
        release(joined.dirs, patience_s=1.0)
        where = f" ({exc.filename})" if exc.filename else ""
        raise CgroupError(f"cannot set up the job's cgroup{where}: {exc.strerror or exc}") \
            from exc
    return joined


def _limit(leaf: Path, controller: str, plan: Mapping[str, Any]) -> None:
    """Write the limits of ``plan`` that ``controller`` owns (v2: all) into ``leaf``. A
    request of 0 CPUs or 0 memory (possible only through the API's own models) is not
    limited."""
    memory = int(plan["memory_mib"]) * 1024 * 1024
    cpus = int(plan["cpu_milli"]) / 1000
    quota = max(1000, round(cpus * CPU_PERIOD_US))
    v2 = plan["version"] == 2
    if (v2 or controller == "memory") and memory:
        if v2:
            _write(leaf / "memory.max", str(memory))
            _write_if_exists(leaf / "memory.swap.max", "0")
        else:
            _write(leaf / "memory.limit_in_bytes", str(memory))
            _write_if_exists(leaf / "memory.memsw.limit_in_bytes", str(memory))
    if v2 or controller == "pids":
        _write(leaf / "pids.max", str(plan["pids"]))
    if (v2 or controller == "cpu") and cpus:
        if v2:
            _write(leaf / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            _write(leaf / "cpu.weight", str(min(10_000, max(1, round(cpus * 100)))))
        else:
            _write(leaf / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(leaf / "cpu.cfs_quota_us", str(quota))
            _write(leaf / "cpu.shares", str(max(2, round(cpus * 1024))))


def release(dirs: list[str], patience_s: float = 10.0) -> bool:
    """Kill every process in ``dirs`` and remove them; True when none is left. Only the
    processes these leaves list are signalled."""
    deadline = time.monotonic() + patience_s
    while True:
        left = [d for d in dirs if os.path.isdir(d)]
        for d in left:
            _kill_all(Path(d))
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                continue  # EBUSY: processes are still leaving; try again
        if not any(os.path.isdir(d) for d in dirs):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _kill_all(leaf: Path) -> None:
    pids = _read(leaf / "cgroup.procs").split()
    me = str(os.getpid())
    if me not in pids and (leaf / "cgroup.kill").exists():
        _write_if_exists(leaf / "cgroup.kill", "1")
        return
    for pid in pids:
        if pid == me:
            continue  # a supervisor that could not leave: it is the one cleaning up
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def usage_s(plan: Mapping[str, Any]) -> float | None:
    """CPU seconds the replica's leaf has used (None: no figure)."""
    if plan["version"] == 2:
        return _field(_read(Path(plan["dirs"][""]) / "cpu.stat"), "usage_usec") / 1e6
    stats = plan["dirs"].get(V1_STATS) or plan["dirs"]["cpu"]  # or mounted with cpu
    text = _read(Path(stats) / "cpuacct.usage")
    return int(text) / 1e9 if text.strip().isdigit() else None


def holds(plan: Mapping[str, Any], pid: int) -> bool:
    """Whether process ``pid`` is in the replica's leaf of ``plan`` or below it (a
    container's cgroup is made inside the leaf). Read from the memory hierarchy (v2: the one
    hierarchy); False for a process that is gone."""
    controller = "" if plan["version"] == 2 else "memory"
    mount, leaf = plan["mounts"].get(controller), plan["dirs"].get(controller)
    if not mount or not leaf:
        return False
    inside = "/" + leaf[len(mount):].strip("/") if leaf.startswith(mount) else None
    where = _cgroups_of(f"/proc/{pid}/cgroup").get(controller)
    return inside is not None and where is not None and (
        where == inside or where.startswith(inside + "/"))


# -- small helpers -----------------------------------------------------------------------------


def _mounts() -> tuple[dict[str, str], str | None]:
    """cgroup v1 mount points by controller, and cgroup v2's mount point (None: none)."""
    v1: dict[str, str] = {}
    v2 = None
    for line in _read(MOUNTINFO).splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2" and v2 is None:
            v2 = fields[4]
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                v1.setdefault(option, fields[4])
    return v1, v2


def _own_cgroups() -> dict[str, str]:
    """controller -> this process's cgroup path (v2: key "")."""
    return _cgroups_of("/proc/self/cgroup")


def _cgroups_of(proc_file: str) -> dict[str, str]:
    """controller -> cgroup path (v2: key "") from a ``/proc/PID/cgroup`` file ({} when it
    cannot be read: the process is gone)."""
    out = {}
    for line in _read(Path(proc_file)).splitlines():
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _controllers(mount: str) -> set[str]:
    return set(_read(Path(mount) / "cgroup.controllers").split())


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _size(mib: int) -> str:
    return f"{mib / 1024:g} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib} MiB"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _write_if_exists(path: Path, text: str) -> None:
    try:
        _write(path, text)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # an optional setting the kernel refuses (memsw without swap accounting)
