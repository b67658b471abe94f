"""Reaching inside a running Slurm attempt: ``open_exec`` (a step of its own, ``srun --jobid
--overlap``) and ``open_port`` (a connection to the node's address).

At launch the backend keeps, in the attempt's private directory, what a command inside the
job needs that Slurm does not keep: ``session.json``, with the job's own variables, its
working directory and the OS account it runs as (``save_session``). A command is then

    srun --jobid=<slurm job> --overlap --nodes=1 --ntasks=1 --nodelist=<the replica's node>
         --chdir=<workdir> --quiet [--pty] CMD...

started as the job's owner (munge vouches for that user, so Slurm runs the step as them:
never as the control plane's account) through ``rota.backends.execshim``, with what a replica
sees: what a job inherits from the control plane, the owner's ``HOME``/``USER``/``SHELL``, the
job's variables and ``ROTA_JOB_ID``, ``ROTA_REPLICA_RANK`` and ``ROTA_WORLD_SIZE``. The step
overlaps the job's own and gets its devices on that node (``CUDA_VISIBLE_DEVICES`` is Slurm's:
all of the job's GPUs on the node), and ends with the job. ``srun`` adds a line of its own
(``srun: error: node1: task 0: Exited with exit code 3``) when the command fails.

A port is reached at the Slurm node's address (``NodeAddr``): a server in the job must listen
on an address the control plane can reach (``0.0.0.0``, not only ``127.0.0.1``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from rota.backends.base import BackendError, Handle, LaunchSpec
from rota.backends.channels import ProcessChannel, SocketChannel, connect, helper_channel
from rota.backends.env import account_env, inherited
from rota.backends.procs import read_json, write_json_atomic
from rota.backends.slurm.commands import SlurmCommands

SESSION = "session.json"
RUNNING = "RUNNING"


def save_session(private: Path, spec: LaunchSpec) -> None:
    """What ``open_exec`` needs of a launch, beside its handle (0600: the control plane's)."""
    run_as = spec.run_as
    write_json_atomic(private / SESSION, {
        "env": dict(spec.env), "workdir": spec.workdir,
        "run_as": None if run_as is None else {
            "user": run_as.user, "uid": run_as.uid, "gid": run_as.gid,
            "groups": list(run_as.groups), "home": run_as.home, "shell": run_as.shell}},
        mode=0o600)


def node_of(handle: Handle, rank: int) -> tuple[str | None, int]:
    """The node replica ``rank`` runs on, as ``srun --nodelist`` names it (None: Slurm chose
    the nodes, found by its index among them, the second value, as the batch script does)."""
    if not 0 <= rank < len(handle.replicas):
        raise BackendError("no_replica", f"job {handle.job_id} has replicas 0 to "
                                         f"{len(handle.replicas) - 1}, not {rank}")
    if handle.ref.get("pinned", True):
        return handle.replicas[rank].node, 0
    nodes = len({r.node for r in handle.replicas}) or 1
    return None, rank // max(1, len(handle.replicas) // nodes)


def open_exec(commands: SlurmCommands, private: Path, handle: Handle, slurm_id: int,
              rank: int, argv: Sequence[str], tty: bool) -> ProcessChannel:
    if not argv:
        raise BackendError("no_command", "name the command to run in the job")
    node, relative = node_of(handle, rank)
    saved = read_json(private / SESSION)
    if saved is None:
        raise BackendError("unsupported", f"job {handle.job_id} was launched before rota kept "
                                          "what a command inside it needs: run it again")
    run_as: Mapping[str, Any] | None = saved.get("run_as")
    where = [f"--nodelist={node}"] if node is not None else [f"--relative={relative}"]
    srun = ["srun", f"--jobid={slurm_id}", "--overlap", "--nodes=1", "--ntasks=1", *where,
            f"--chdir={saved['workdir']}", "--quiet", *(["--pty"] if tty else []), *argv]
    account = account_env(None) if run_as is None else {
        "HOME": run_as["home"], "USER": run_as["user"], "LOGNAME": run_as["user"],
        "SHELL": run_as["shell"]}
    env = commands.environment({**inherited(os.environ), **account}, {
        **saved["env"], "ROTA_JOB_ID": handle.job_id, "ROTA_REPLICA_RANK": str(rank),
        "ROTA_WORLD_SIZE": str(len(handle.replicas))})
    instructions = {"argv": srun, "env": env, "workdir": "/", "tty": tty, "run_as": run_as}
    return helper_channel(instructions, tty,
                          f"the command in replica {rank} of job {handle.job_id}")


def open_port(address: str, handle: Handle, rank: int, port: int) -> SocketChannel:
    return connect(address, port, f"port {port} of replica {rank} of job {handle.job_id}")


def not_running(handle: Handle, state: str | None) -> BackendError:
    now = "no longer in Slurm's queue" if state is None else f"{state.lower()} in Slurm"
    return BackendError("not_running", f"job {handle.job_id} is {now}, not running: rota show "
                                       "ID says how it stands")
