"""The local backend's replicas as files and processes: what a handle's ``ref`` holds, the
argv a command becomes, the log files a job owns, the account its supervisor starts it as,
the port a launch found again serves, and a GPU marked unhealthy.

Kept apart from ``rota.backends.local`` (which launches, recovers, observes and stops replicas)
so that each reads on its own.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from rota.backends.base import Handle, ReplicaHandle, RunAs
from rota.backends.procs import read_json
from rota.core import GpuDevice, InvalidSpec

JOB_UMASK = 0o022  # what a job's own files get, whatever the control plane's umask is


@dataclass(frozen=True, slots=True)
class Proc:
    """The local backend's part of a replica handle (its ``ref``), read and checked."""

    pid: int
    start_ticks: int
    dir: str
    stdout: str
    stderr: str

    def ref(self) -> dict[str, Any]:
        return {"pid": self.pid, "start_ticks": self.start_ticks, "dir": self.dir,
                "stdout": self.stdout, "stderr": self.stderr}


def proc(replica: ReplicaHandle, field: str = "handle.replicas[0]") -> Proc:
    """The supervisor and files of a local replica; ``InvalidSpec`` naming the damaged field."""
    ref = replica.ref
    values: dict[str, Any] = {}
    for key, kind in (("pid", int), ("start_ticks", int), ("dir", str), ("stdout", str),
                      ("stderr", str)):
        value = ref.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidSpec(f"{field}.ref.{key}", f"must be {kind.__name__}, got {value!r}")
        values[key] = value
    if values["pid"] <= 0:
        raise InvalidSpec(f"{field}.ref.pid", f"must be positive, got {values['pid']}")
    return Proc(**values)


def boot_of(handle: Handle) -> str:
    value = handle.ref.get("boot_id")
    return value if isinstance(value, str) else ""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def mps_running() -> bool:
    """True when an MPS control daemon listens in the pipe directory clients would use."""
    pipe_dir = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    return Path(pipe_dir, "control").exists()


def argv_of(command: Sequence[str] | str) -> list[str]:
    if isinstance(command, str):
        if not command.strip():
            raise InvalidSpec("command", "must not be empty")
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidSpec("command", "must be a non-empty list of strings")
    return argv


def try_name(attempt: int, k: int) -> str:
    return f"attempt-{attempt}" if k == 0 else f"attempt-{attempt}.{k}"


def account_json(run_as: RunAs | None) -> dict[str, Any] | None:
    if run_as is None:
        return None
    return {"user": run_as.user, "uid": run_as.uid, "gid": run_as.gid,
            "groups": list(run_as.groups)}


def log_file(path: Path, run_as: RunAs | None):
    """``path`` opened for appending, 0600 and owned by the account the job runs as."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    if run_as is not None:
        os.fchown(fd, run_as.uid, run_as.gid)
    return os.fdopen(fd, "ab")


def served_port(attempt_dir: Path) -> int | None:
    """ROTA_PORT as rank 0's launch file gave it (in its container's, for an image), for a
    launch found again by ``recover``."""
    spec = read_json(attempt_dir / "replica-0" / "spec.json") or {}
    port = (spec.get("container") or spec.get("env") or {}).get("ROTA_PORT")
    return int(port) if isinstance(port, str) and port.isdigit() else None


def marked(device: GpuDevice, sick: dict[int, str]) -> GpuDevice:
    """``device`` unhealthy when NVML reports its GPU so (a MIG instance: the GPU it is cut
    from, which NVML knows by the GPU's index)."""
    gpu = device.parent if device.mig and device.parent is not None else device.index
    return replace(device, healthy=False, problem=sick[gpu]) if gpu in sick else device
