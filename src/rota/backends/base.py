"""The protocol every execution backend implements, and the values it exchanges.

Vocabulary:
- A **handle** names one launch of one job (an *attempt*): one ``ReplicaHandle`` per replica,
  in rank order. It is plain data that round-trips through JSON, so the control plane persists
  it before acting and hands it back after a restart (``adopt``).
- An **attempt number** (the job's ``attempts`` in the store) makes a launch idempotent:
  ``launch(..., attempt=n)`` never starts attempt ``n`` of a job twice, and ``recover`` finds
  an attempt that was started but whose handle was never saved (the control plane died in
  between). Only an attempt that provably never started is started again.
- A replica is **running**, **exited** (with an exit code; a replica killed by signal ``s``
  exits with ``128 + s`` and ``signal == s``) or **lost** (nothing runs and nothing recorded
  how it ended: the control plane requeues it).
- **Capabilities** are what a backend can enforce; the control plane and the CLI read them
  instead of guessing from the backend's name.

Backends report outcomes as ``Status`` values; ``BackendError`` is for faults (a handle from
another backend, a process that cannot be started) and carries a stable ``code``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from rota.core import DeviceShare, InvalidSpec, Job, Node, Placement, RotaError


class BackendError(RotaError):
    """A backend could not do what it was asked. ``code`` is stable, e.g. ``foreign_node``."""

    code = "backend_error"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Capabilities:
    fractional_gpu: bool       # several jobs may share one device
    memory_enforcement: bool   # a job over its GPU-memory share is stopped
    compute_enforcement: bool  # a job's compute share is capped (MPS daemon running)
    gang: bool                 # all replicas of a job start together
    signals: bool              # arbitrary signals reach the job (checkpoint on SIGUSR1, ...)


@dataclass(frozen=True, slots=True)
class ReplicaHandle:
    """One replica: its supervisor ``pid`` and that process's start time in clock ticks since
    boot (``start_ticks``, which tells a reused pid apart), its directory and log files, and
    the device shares it was given."""

    rank: int
    node: str
    pid: int
    start_ticks: int
    dir: str
    stdout: str
    stderr: str
    devices: tuple[DeviceShare, ...] = ()


@dataclass(frozen=True, slots=True)
class Handle:
    backend: str
    job_id: str
    attempt_dir: str
    boot_id: str
    replicas: tuple[ReplicaHandle, ...]
    attempt: int | None = None  # the job's attempt number; None: launched without one

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "job_id": self.job_id, "attempt_dir": self.attempt_dir,
            "boot_id": self.boot_id, "attempt": self.attempt,
            "replicas": [_replica_dict(r) for r in self.replicas],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: object, field: str = "handle") -> Handle:
        d = _mapping(data, field)
        reps = d.get("replicas")
        if not isinstance(reps, list) or not reps:
            raise InvalidSpec(f"{field}.replicas", "must be a non-empty list")
        attempt = d.get("attempt")
        if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool)
                                    or attempt < 0):
            raise InvalidSpec(f"{field}.attempt", f"must be a non-negative integer, got {attempt!r}")
        return cls(
            backend=_get(d, "backend", str, field), job_id=_get(d, "job_id", str, field),
            attempt_dir=_get(d, "attempt_dir", str, field), boot_id=_get(d, "boot_id", str, field),
            replicas=tuple(_replica_from(r, f"{field}.replicas[{k}]") for k, r in enumerate(reps)),
            attempt=attempt,
        )

    @classmethod
    def from_json(cls, text: str) -> Handle:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidSpec("handle", f"is not valid JSON: {exc}") from None
        return cls.from_dict(data)


def _replica_dict(r: ReplicaHandle) -> dict[str, Any]:
    return {
        "rank": r.rank, "node": r.node, "pid": r.pid, "start_ticks": r.start_ticks, "dir": r.dir,
        "stdout": r.stdout, "stderr": r.stderr,
        "devices": [{"index": s.index, "milli": s.milli, "memory_mib": s.memory_mib}
                    for s in r.devices],
    }


def _replica_from(data: object, field: str) -> ReplicaHandle:
    d = _mapping(data, field)
    devices = d.get("devices", [])
    if not isinstance(devices, list):
        raise InvalidSpec(f"{field}.devices", "must be a list")
    shares = []
    for k, dev in enumerate(devices):
        df = _mapping(dev, f"{field}.devices[{k}]")
        shares.append(DeviceShare(_get(df, "index", int, f"{field}.devices[{k}]"),
                                  _get(df, "milli", int, f"{field}.devices[{k}]"),
                                  _get(df, "memory_mib", int, f"{field}.devices[{k}]")))
    pid = _get(d, "pid", int, field)
    if pid <= 0:
        raise InvalidSpec(f"{field}.pid", f"must be positive, got {pid}")
    return ReplicaHandle(
        rank=_get(d, "rank", int, field), node=_get(d, "node", str, field), pid=pid,
        start_ticks=_get(d, "start_ticks", int, field), dir=_get(d, "dir", str, field),
        stdout=_get(d, "stdout", str, field), stderr=_get(d, "stderr", str, field),
        devices=tuple(shares),
    )


def _mapping(data: object, field: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidSpec(field, f"must be a mapping, got {type(data).__name__}")
    return data


def _get(d: Mapping[str, Any], key: str, kind: type, field: str) -> Any:
    if key not in d:
        raise InvalidSpec(f"{field}.{key}", "is missing")
    value = d[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidSpec(f"{field}.{key}", f"must be {kind.__name__}, got {value!r}")
    return value


class ReplicaState(enum.StrEnum):
    RUNNING = "running"
    EXITED = "exited"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """``exit_code`` is ``None`` while running, when lost, and for a replica stopped before its
    command started; ``reason`` says why it was stopped (cancelled, over its GPU memory, ...);
    ``finished_at`` is when an exited replica ended (seconds since the epoch), when known."""

    rank: int
    state: ReplicaState
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class Status:
    """What a job's replicas are doing. ``state`` sums them up: lost when any replica is lost,
    exited when all have exited, running otherwise."""

    replicas: tuple[ReplicaStatus, ...]

    @property
    def state(self) -> ReplicaState:
        states = {r.state for r in self.replicas}
        if ReplicaState.LOST in states:
            return ReplicaState.LOST
        if states == {ReplicaState.EXITED}:
            return ReplicaState.EXITED
        return ReplicaState.RUNNING

    @property
    def exit_codes(self) -> tuple[int | None, ...]:
        return tuple(r.exit_code for r in self.replicas)

    @property
    def succeeded(self) -> bool:
        return self.state is ReplicaState.EXITED and all(c == 0 for c in self.exit_codes)

    @property
    def finished_at(self) -> float | None:
        """When the last replica ended, if nothing runs and every end time is known."""
        ends = [r.finished_at for r in self.replicas]
        if self.state is ReplicaState.RUNNING or not ends or None in ends:
            return None
        return max(e for e in ends if e is not None)


class Backend(Protocol):
    """Runs placed jobs. Every method is safe to call again with the same handle."""

    name: str

    @property
    def capabilities(self) -> Capabilities: ...

    def inventory(self) -> list[Node]: ...

    def launch(self, job: Job, placement: Placement, env: Mapping[str, str], workdir: str,
               command: Sequence[str] | str, attempt: int | None = None) -> Handle: ...

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None: ...

    def signal(self, handle: Handle, sig: int) -> None: ...

    def cancel(self, handle: Handle, grace_s: float) -> None: ...

    def poll(self, handle: Handle) -> Status: ...

    def adopt(self, handle: Handle) -> Status: ...
