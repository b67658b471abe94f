"""Execution backends: where the jobs the scheduler placed actually run.

``base`` holds the one ``Backend`` protocol with its handles, statuses and capabilities;
``local`` runs replicas as supervised processes on this machine (``shim`` is the supervisor;
``localstatus`` reads how a replica stands, how busy it is, from its files and processes);
``gpus`` builds this machine's inventory, from NVML (``nvml``, the only module that touches the
NVIDIA library) or from a declared list of virtual GPUs; ``watcher`` enforces GPU-memory shares.

Modules are imported on use so that the supervisor process starts quickly.
"""

from rota.backends.base import (
    Backend, BackendError, Capabilities, Handle, ReplicaHandle, ReplicaState, ReplicaStatus,
    Status,
)

__all__ = [
    "Backend", "BackendError", "Capabilities", "Handle", "ReplicaHandle", "ReplicaState",
    "ReplicaStatus", "Status",
]
