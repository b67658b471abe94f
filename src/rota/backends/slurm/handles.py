"""A Slurm attempt's handle: what it holds, built at launch (or found again by ``recover``)
and read back checked.

``launch_id`` is the Slurm job id; the handle's ``ref`` holds ``slurm_job`` (that id),
``name`` (``rota-<job>-<attempt>``), ``log`` (the batch shell's output), ``pinned`` (whether
rota chose the nodes) and, for a job that serves, ``endpoint`` (where rota reaches its server);
each replica's ``ref`` holds its ``stdout`` and ``stderr`` files (``attempts.AttemptFiles``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from rota.backends.base import Handle, ReplicaHandle
from rota.backends.slurm.attempts import AttemptFiles
from rota.backends.slurm.states import attempt_name
from rota.backends.slurm.submit import derived_port
from rota.core import InvalidSpec, Placement

BACKEND = "slurm"  # the backend's name, in every handle it makes


def attempt_handle(job_id: str, attempt: int, slurm_id: int, placement: Placement,
                   files: AttemptFiles, pinned: bool) -> Handle:
    """The handle of attempt ``attempt`` of ``job_id``, which is Slurm job ``slurm_id``."""
    replicas = tuple(ReplicaHandle(k, r.node, r.devices, {
        "stdout": str(files.logs / f"rank-{k}.out"),
        "stderr": str(files.logs / f"rank-{k}.err")})
        for k, r in enumerate(placement.replicas))
    return Handle(BACKEND, job_id, str(slurm_id), replicas, attempt, {
        "slurm_job": slurm_id, "name": attempt_name(job_id, attempt),
        "log": str(files.logs / "batch.log"), "pinned": pinned})


def serving(handle: Handle, placement: Placement, addresses: Mapping[str, str],
            port: int) -> Handle:
    """``handle`` with the ``endpoint`` of a job that serves on ``port`` (0: the port derived
    from its Slurm job id), on the address of its first replica's node."""
    first = placement.replicas[0].node
    where = addresses.get(first, first)
    endpoint = f"{where}:{port or derived_port(slurm_job(handle))}"
    return replace(handle, ref={**handle.ref, "endpoint": endpoint})


def slurm_job(handle: Handle) -> int:
    """The Slurm job id a handle names; ``InvalidSpec`` when its ``ref`` is damaged."""
    value = handle.ref.get("slurm_job")
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidSpec("handle.ref.slurm_job", f"must be a Slurm job id, got {value!r}")
    return value
