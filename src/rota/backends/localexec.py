"""Reaching inside a running local replica: ``open_exec`` and ``open_port`` of the local
backend (``rota.backends.base.Interactive``).

A command is run the way the replica's own command was: from the replica's ``spec.json``
(``rota.backends.shim``) it takes the complete environment (the job's variables,
``CUDA_VISIBLE_DEVICES`` and the rest of what rota sets), the working directory, the umask,
the OS account (``run_as``) and the cgroup, so that it runs as the job's owner with the job's
devices and counts against the job's limits; the helper ``rota.backends.execshim`` enters all
of that and executes the command. The command never runs as the control plane's account when
the job has an owner. In a replica that runs in a container image, the command is ``podman
exec`` in its container (``rota.backends.localimage``), with the replica's environment file,
``--user`` and working directory: podman runs as the control plane, the command as the
owner. It lives in the replica's cgroup, which the supervisor empties when the replica ends: a
session does not outlive its job.

A port is reached on this machine's address for jobs (``master_addr``): replicas of the local
backend share this machine's network, so a port a replica listens on is a port here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rota.backends.base import BackendError, Handle, ReplicaHandle
from rota.backends.channels import ProcessChannel, SocketChannel, connect, helper_channel
from rota.backends.localfiles import proc
from rota.backends.localimage import exec_argv
from rota.backends.localstatus import live_child
from rota.backends.procs import read_json


def replica_of(handle: Handle, rank: int) -> ReplicaHandle:
    """Replica ``rank`` of ``handle``; ``BackendError`` ``no_replica`` naming those there are."""
    if not 0 <= rank < len(handle.replicas):
        raise BackendError("no_replica", f"job {handle.job_id} has replicas 0 to "
                                         f"{len(handle.replicas) - 1}, not {rank}")
    return handle.replicas[rank]


def open_exec(handle: Handle, rank: int, argv: Sequence[str], tty: bool) -> ProcessChannel:
    if not argv:
        raise BackendError("no_command", "name the command to run in the job")
    p = proc(replica_of(handle, rank))
    spec = read_json(Path(p.dir) / "spec.json")
    if spec is None or live_child(p) is None:
        raise BackendError("not_running", f"replica {rank} of job {handle.job_id} is not "
                                          "running: rota show ID says how it stands")
    cgroup = spec.get("cgroup") or {}
    if spec.get("container"):  # podman, as the control plane, runs it in the container
        argv = exec_argv(spec["container"], argv, tty)
    instructions = {"argv": list(argv), "env": spec["env"], "workdir": spec["workdir"],
                    "umask": spec.get("umask"), "run_as": spec.get("run_as"), "tty": tty,
                    "cgroups": list((cgroup.get("dirs") or {}).values())}
    return helper_channel(instructions, tty,
                          f"the command in replica {rank} of job {handle.job_id}")


def open_port(handle: Handle, rank: int, port: int, host: str) -> SocketChannel:
    p = proc(replica_of(handle, rank))
    if live_child(p) is None:
        raise BackendError("not_running", f"replica {rank} of job {handle.job_id} is not "
                                          "running: rota show ID says how it stands")
    return connect(host, port, f"port {port} of replica {rank} of job {handle.job_id}")
