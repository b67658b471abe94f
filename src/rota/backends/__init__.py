"""Execution backends: where the jobs the scheduler placed actually run.

Modules are imported on use so that the supervisor process starts quickly. A backend imports
``rota.core`` and ``rota.backends``, never the store, the control loop or the API.

The contract and the values shared by every backend:

- ``base``: the one ``Backend`` protocol with its statuses, capabilities and launch requests;
- ``handles``: the name of one launch (``Handle``), plain data that round-trips through JSON;
- ``env``: the environment one replica sees: what rota sets on top of the job's variables,
  and the little a job inherits from the control plane;
- ``channels``: interactive streams over a process (with a terminal or pipes) or a TCP
  connection, for backends that reach a job through this machine;
- ``execshim``: the helper that enters a job's cgroup, account and working directory and
  executes a command there (``python -m rota.backends.execshim FD``);
- ``logfiles``: log files as backends that write them keep them, read from an offset;
- ``periodic``: a piece of work repeated in a background thread (the disk and GPU-memory
  watchers);
- ``procs``: process identity (pid, start time, boot) and crash-safe JSON files, shared by
  the local backend and its supervisor.

The local backend, replicas as supervised processes on this machine:

- ``local``: the backend: launching, recovering, observing and stopping replicas, and the
  layout of their directories under the data directory;
- ``localstatus``: how a replica stands (status, a lost GPU, GPU activity, last output, its
  running child), read from its files and processes, and rota's notes in its log;
- ``localexec``: a command or a port inside a running replica (``rota exec``, ``forward``);
- ``localimage``: a replica of a job that names a container image, run as ``podman run``,
  and whether podman works here;
- ``localfiles``: what a handle's ``ref`` holds, the argv a command becomes, the log files a
  job owns, the account its supervisor starts it as, the port a launch found again serves;
- ``datacache``: a node's dataset cache: copies made complete before they are visible, at a
  bounded rate, and evictions that never drop what a running job reads;
- ``s3source``: listing and reading an S3-compatible dataset source (AWS Signature
  Version 4 over the standard library), with credentials from the control plane's environment;
- ``localdata``: the datasets of a local launch: its node's cache filled before it starts,
  ``$ROTA_DATASETS``, and the copies running jobs read;
- ``shim``: the supervisor of one replica (``python -m rota.backends.shim REPLICA_DIR``),
  which outlives the control plane and records how the replica ended;
- ``spawner``: one process that has imported the supervisor once and forks one per replica;
- ``exits``: wakes the control loop as soon as a watched supervisor exits (pidfd);
- ``joblimits``: a job's limits at launch and after (CPU, memory, processes, disk), read back
  from each replica's ``spec.json``;
- ``cgroups``: per-replica cgroups (v1 or v2) that enforce CPU, memory and processes;
- ``diskuse``: a job's working directory measured, and the job stopped once it holds more
  than its disk limit.

This machine's GPUs:

- ``gpus``: builds this machine's inventory as a core ``Node``, from NVML or from a declared
  node file or list of virtual GPUs;
- ``nvml``: the only module that touches the NVIDIA library (``pynvml``, imported on use);
- ``migapply``: one GPU brought to a target MIG geometry through NVML, step by step, so
  that a stop at any step and a new call converge;
- ``health``: which devices may not run jobs now (ECC errors, lost devices, critical XIDs);
- ``watcher``: enforces GPU-memory shares, stopping a replica that uses more than it got.

The cluster backends, each a package:

- ``slurm``: Slurm 22.05: one batch job per attempt, one ``srun`` step per replica;
- ``kube``: Kubernetes: rota schedules and binds Pods itself, with HAMi for shared GPUs.

Several backends at once, over the same machines:

- ``several``: one backend made of several members (Slurm and Kubernetes, and local): each
  launch through one member, everything about it routed back to that member;
- ``engines``: the members' reports of the same machines made one inventory, with which
  members reach each node;
- ``holds``: each member told what rota runs through another one on the nodes they share
  (placeholders), kept crash-safe.
"""

from rota.backends.base import (
    Backend, BackendError, Capabilities, Handle, ReplicaHandle, ReplicaState, ReplicaStatus,
    Status,
)

__all__ = [
    "Backend", "BackendError", "Capabilities", "Handle", "ReplicaHandle", "ReplicaState",
    "ReplicaStatus", "Status",
]
