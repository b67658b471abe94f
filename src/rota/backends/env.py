"""The environment one replica sees: what rota sets, on top of the job's own variables.

Precedence, lowest first: what a job inherits from the control plane (``inherited``: only
``INHERITED`` and the locale's ``LC_*``, never the rest of the control plane's environment,
which may hold its secrets); the account it runs as (``account_env``: ``HOME``, ``USER``,
``LOGNAME``, ``SHELL``); torchrun's variables (``torch_variables``); the job's ``env`` (which
``rota run`` fills with the caller's environment, ``rota.cli.environ``); the variables below,
which a job cannot override (device pinning would be meaningless otherwise).

- ``CUDA_VISIBLE_DEVICES``: the replica's devices on this node (indices, or UUIDs), empty for a
  job without GPUs; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA numbers devices like NVML.
  A MIG instance is named by its UUID (``MIG-...``), always, as NVIDIA's container toolkit
  names it; it is no fraction (none of the variables below), though its share is its
  compute slices' part of its GPU.
- ``ROTA_JOB_ID``, ``ROTA_REPLICA_RANK``, ``ROTA_WORLD_SIZE``, ``ROTA_MASTER_ADDR``,
  ``ROTA_MASTER_PORT`` (rank 0's address and a port free when the job was launched);
  ``ROTA_PORT`` for a job that serves (a service's replica): the port its server listens on.
- For a fractional GPU: ``ROTA_GPU_SHARE`` (``0.25``), ``ROTA_GPU_MEMORY_MIB``, and the MPS
  client limits ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (share x 100) and
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``0=<MiB>M``: device ordinals as the job sees them,
  after ``CUDA_VISIBLE_DEVICES``, so the one visible device is ``0``).

torchrun's variables (``TORCH_NAMES``), for every replica of every job, so that a script
written for ``torchrun`` (``init_process_group`` from the environment) runs as a gang unchanged:
``MASTER_ADDR`` and ``MASTER_PORT`` (``ROTA_MASTER_ADDR`` and ``ROTA_MASTER_PORT``), ``RANK``
(``ROTA_REPLICA_RANK``), ``WORLD_SIZE`` (``ROTA_WORLD_SIZE``), and ``LOCAL_RANK=0``,
``LOCAL_WORLD_SIZE=1``, ``NODE_RANK`` (= ``RANK``). Each replica sees only its own GPUs
(``CUDA_VISIBLE_DEVICES``) wherever it is placed, even beside other replicas of its job on one
node, so to torch each replica is a node of one process: ``torch.cuda.set_device(LOCAL_RANK)``
picks the replica's first GPU, where a per-node count would name a device it cannot see. A job
may set these names itself in its ``env`` (a script that starts ``torchrun`` in each replica
may want its own); it cannot set rota's ``ROTA_*`` ones above.
"""

from __future__ import annotations

import math
import os
import pwd
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from rota.core import MILLI, DeviceShare, InvalidSpec
from rota.core.mig import is_instance_index

if TYPE_CHECKING:
    from rota.backends.base import RunAs

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DROPPED_PREFIXES = ("CUDA_", "ROTA_")
# What a job inherits from the control plane: where programs are, the locale and time zone,
# the site's proxies, and where the MPS daemon's pipes and logs are (a job outside them would
# not reach the daemon, so its compute and memory limits would not hold).
INHERITED = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM",
             "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
             "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
TORCH_NAMES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
               "LOCAL_WORLD_SIZE", "NODE_RANK")


@dataclass(frozen=True, slots=True)
class ReplicaContext:
    job_id: str
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    devices: tuple[DeviceShare, ...]
    device_ids: tuple[str, ...]  # what goes into CUDA_VISIBLE_DEVICES, one per device
    port: int | None = None      # ROTA_PORT: where a server the job runs listens


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
    if ctx.port is not None:
        out["ROTA_PORT"] = str(ctx.port)
    fractions = [d for d in ctx.devices if d.milli < MILLI and not is_instance_index(d.index)]
    if fractions:
        share = fractions[0]
        out["ROTA_GPU_SHARE"] = f"{share.milli / MILLI:g}"
        out["ROTA_GPU_MEMORY_MIB"] = str(share.memory_mib)
        out["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, math.ceil(share.milli / 10)))
        out["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(
            f"{ordinal}={d.memory_mib}M" for ordinal, d in enumerate(ctx.devices))
    return out


def torch_variables(rank: int, world_size: int, master_addr: str,
                    master_port: str) -> dict[str, str]:
    """torchrun's variables of one replica (``TORCH_NAMES``): each replica is a node of one
    process, since it sees only its own GPUs."""
    return {"MASTER_ADDR": master_addr, "MASTER_PORT": master_port, "RANK": str(rank),
            "WORLD_SIZE": str(world_size), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "NODE_RANK": str(rank)}


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of the control plane's environment a job inherits (``INHERITED``, ``LC_*``)."""
    out = {k: environ[k] for k in INHERITED if k in environ}
    out.update((k, v) for k, v in environ.items() if k.startswith("LC_"))
    out.setdefault("PATH", DEFAULT_PATH)
    return out


def account_env(run_as: RunAs | None) -> dict[str, str]:
    """``HOME``, ``USER``, ``LOGNAME`` and ``SHELL`` of the account a job runs as (None: the
    control plane's own, as the password database names it)."""
    if run_as is not None:
        user, home, shell = run_as.user, run_as.home, run_as.shell
    else:
        try:
            entry = pwd.getpwuid(os.geteuid())
        except KeyError:
            return {}
        user, home, shell = entry.pw_name, entry.pw_dir, entry.pw_shell or "/bin/sh"
    return {"HOME": home, "USER": user, "LOGNAME": user, "SHELL": shell}


def replica_env(base: Mapping[str, str], job_env: Mapping[str, object],
                ctx: ReplicaContext) -> dict[str, str]:
    """``base`` (what the job inherits; rota's own ``CUDA_*`` and ``ROTA_*`` variables are
    left out of it, except the MPS directories), then torchrun's, the job's ``env``, rota's."""
    env = {k: v for k, v in base.items()
           if not k.startswith(_DROPPED_PREFIXES) or k in INHERITED}
    env.update(torch_variables(ctx.rank, ctx.world_size, ctx.master_addr, str(ctx.master_port)))
    env.update(check_job_env(job_env))
    env.update(rota_variables(ctx))
    return env
