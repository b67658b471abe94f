"""A handle: the name of one launch of one job (an *attempt*), as plain data.

One ``ReplicaHandle`` per replica, in rank order, each with its node, its device shares and an
opaque ``ref`` that only its backend reads (local: supervisor pid, start ticks, directory and
log files; Slurm: the Slurm job and step; Kubernetes: the pod's namespace, name and uid).
``launch_id`` names the launch within its backend (local: the attempt directory; Slurm: the
Slurm job id; Kubernetes: the pods' common name). A handle round-trips through JSON
(``to_dict``/``from_dict``, version 2; a version-1 handle of the local backend is read into
today's shape), so the control plane persists it before acting and hands it back after a
restart (``Backend.adopt``), without looking inside ``ref``; a stored handle that does not
parse is ``InvalidSpec`` naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.core import DeviceShare, InvalidSpec


@dataclass(frozen=True, slots=True)
class ReplicaHandle:
    """One replica: where it runs, the device shares it was given, and its backend's ``ref``."""

    rank: int
    node: str
    devices: tuple[DeviceShare, ...] = ()
    ref: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Handle:
    backend: str
    job_id: str
    launch_id: str
    replicas: tuple[ReplicaHandle, ...]
    attempt: int | None = None  # the job's attempt number; None: launched without one
    ref: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 2, "backend": self.backend, "job_id": self.job_id,
            "launch_id": self.launch_id, "attempt": self.attempt, "ref": dict(self.ref),
            "replicas": [_replica_dict(r) for r in self.replicas],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: object, field: str = "handle") -> Handle:
        d = _mapping(data, field)
        if "version" not in d and "attempt_dir" in d:
            d = _from_version_1(d)
        reps = d.get("replicas")
        if not isinstance(reps, list) or not reps:
            raise InvalidSpec(f"{field}.replicas", "must be a non-empty list")
        attempt = d.get("attempt")
        if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool)
                                    or attempt < 0):
            raise InvalidSpec(f"{field}.attempt", f"must be a non-negative integer, got {attempt!r}")
        return cls(
            backend=_get(d, "backend", str, field), job_id=_get(d, "job_id", str, field),
            launch_id=_get(d, "launch_id", str, field),
            replicas=tuple(_replica_from(r, f"{field}.replicas[{k}]") for k, r in enumerate(reps)),
            attempt=attempt, ref=dict(_mapping(d.get("ref", {}), f"{field}.ref")),
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
        "rank": r.rank, "node": r.node, "ref": dict(r.ref),
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
    return ReplicaHandle(rank=_get(d, "rank", int, field), node=_get(d, "node", str, field),
                         devices=tuple(shares),
                         ref=dict(_mapping(d.get("ref", {}), f"{field}.ref")))


_LOCAL_REPLICA_KEYS = ("pid", "start_ticks", "dir", "stdout", "stderr")


def _from_version_1(d: Mapping[str, Any]) -> dict[str, Any]:
    """A handle saved before version 2, when every handle was the local backend's and its
    process fields sat beside the rank: the same handle in today's shape."""
    replicas = d.get("replicas")
    if isinstance(replicas, list):
        replicas = [
            {"rank": r.get("rank"), "node": r.get("node"), "devices": r.get("devices", []),
             "ref": {k: r[k] for k in _LOCAL_REPLICA_KEYS if k in r}}
            if isinstance(r, Mapping) else r for r in replicas]
    return {"backend": d.get("backend"), "job_id": d.get("job_id"),
            "launch_id": d.get("attempt_dir"), "attempt": d.get("attempt"),
            "ref": {"boot_id": d.get("boot_id")}, "replicas": replicas}


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
