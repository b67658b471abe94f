"""The environment one replica sees: what rota sets, on top of the job's own variables.

Precedence, lowest first: the control plane's environment without its ``CUDA_*`` and
``ROTA_*`` variables; the job's ``env``; the variables below, which a job cannot override
(device pinning would be meaningless otherwise).

- ``CUDA_VISIBLE_DEVICES``: the replica's devices on this node (indices, or UUIDs), empty for a
  job without GPUs; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA numbers devices like NVML.
- ``ROTA_JOB_ID``, ``ROTA_REPLICA_RANK``, ``ROTA_WORLD_SIZE``, ``ROTA_MASTER_ADDR``,
  ``ROTA_MASTER_PORT`` (rank 0's address and a port free when the job was launched).
- For a fractional GPU: ``ROTA_GPU_SHARE`` (``0.25``), ``ROTA_GPU_MEMORY_MIB``, and the MPS
  client limits ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (share x 100) and
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``0=<MiB>M``: device ordinals as the job sees them,
  after ``CUDA_VISIBLE_DEVICES``, so the one visible device is ``0``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping

from rota.core import MILLI, DeviceShare, InvalidSpec

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DROPPED_PREFIXES = ("CUDA_", "ROTA_")


@dataclass(frozen=True, slots=True)
class ReplicaContext:
    job_id: str
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    devices: tuple[DeviceShare, ...]
    device_ids: tuple[str, ...]  # what goes into CUDA_VISIBLE_DEVICES, one per device


def check_job_env(env: Mapping[str, object]) -> dict[str, str]:
    """The job's variables, validated: names are shell identifiers, values strings."""
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not _NAME.match(key):
            raise InvalidSpec(f"env.{key}", "is not a valid variable name (letters, digits, _)")
        if not isinstance(value, str):
            raise InvalidSpec(f"env.{key}", f"must be a string, got {value!r}")
        if "\0" in value:
            raise InvalidSpec(f"env.{key}", "must not contain a NUL character")
        out[key] = value
    return out


def rota_variables(ctx: ReplicaContext) -> dict[str, str]:
    out = {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(ctx.device_ids),
        "ROTA_JOB_ID": ctx.job_id,
        "ROTA_REPLICA_RANK": str(ctx.rank),
        "ROTA_WORLD_SIZE": str(ctx.world_size),
        "ROTA_MASTER_ADDR": ctx.master_addr,
        "ROTA_MASTER_PORT": str(ctx.master_port),
    }
    fractions = [d for d in ctx.devices if d.milli < MILLI]
    if fractions:
        share = fractions[0]
        out["ROTA_GPU_SHARE"] = f"{share.milli / MILLI:g}"
        out["ROTA_GPU_MEMORY_MIB"] = str(share.memory_mib)
        out["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, math.ceil(share.milli / 10)))
        out["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(
            f"{ordinal}={d.memory_mib}M" for ordinal, d in enumerate(ctx.devices))
    return out


def replica_env(base: Mapping[str, str], job_env: Mapping[str, object],
                ctx: ReplicaContext) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(_DROPPED_PREFIXES)}
    env.update(check_job_env(job_env))
    env.update(rota_variables(ctx))
    return env
