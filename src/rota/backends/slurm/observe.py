"""What one rota attempt on Slurm is doing, from what Slurm reports: a pure function.

``attempt_status(handle, seen)`` turns the Slurm job of an attempt (``Seen``: as ``squeue``
lists it, as ``sacct`` recorded it, the nodes a running job must leave, whether the cluster
keeps accounting, and the time) into the backend's ``Status``:

- **Not ended** (pending or running in Slurm): every replica runs, except one whose node must
  be left (down or in error: ``states.losing_reason``), which is *lost* with the node's
  reason, so that the control loop stops the job and requeues it. A pending job counts only
  where it is pinned to the node; Slurm places an unpinned one elsewhere by itself. A job
  Slurm still holds pending is *waiting* (``Status.waiting``: "Slurm job N is pending
  (Resources)", with Slurm's reason), and *displaced* (``Status.displaced``) when it is
  pinned, Slurm's reason says it waits for resources ("Resources", "Priority"), and work
  outside rota holds a GPU that rota placed it on (``Seen.foreign``: the GPUs such work holds
  per node, from the whole queue). A job pending behind another rota job (one that reported
  its end and still runs: its GPUs are the ones this job was placed on) is not displaced.
- **Ended**: every replica is lost when Slurm's state of the job says the node or Slurm itself
  ended it (``JobPhase.LOST``: preempted, node failure...), whatever its steps say (Slurm
  cancels them with the job). Otherwise each replica is its ``srun`` step (``rank-<r>``, from
  ``sacct``): exited with the step's exit code (``128 + signal`` when a signal ended it), or
  lost when the step's own state says so. A job Slurm lists ``COMPLETED``
  needs no step: its batch script exits 0 only when every replica did, so each replica
  exited 0 (``squeue`` says so; ``sacct`` is not asked). Without a step (accounting off, the
  step never started, a job of one replica), the job's own exit code stands for the replica;
  a job that never started ended before its command ran (no exit code). A job Slurm ended
  ``TIMEOUT`` (it enforces rota's walltime: ``--time`` and ``--signal``) has its exited
  replicas marked with the cause ``End.WALLTIME``, so that rota ends it as the local backend
  ends a job past its walltime, whatever its steps' states say. Right after a job
  ends, ``sacct`` may not have its steps yet: a gang's replicas are reported running for up
  to ``ACCOUNTING_WAIT_S`` after the end rather than all given the job's one exit code.
- **Unknown to Slurm** (in neither ``squeue`` nor ``sacct``): lost.
- **Landed**: once the job runs, where each replica is (``landed``): its node (pinned: the
  placement's; otherwise node ``r // ranks_per_node`` of the job's, in Slurm's order, as the
  batch script runs them) and the devices Slurm gave the job there (``squeue``'s per-node
  GRES indices, split among the node's replicas in rank order: Slurm reports devices per
  node, not per step). Shares keep the placement's memory; a whole GPU has the memory of the
  device it landed on, and a fraction the share its shards hold (0.3 of a GPU cut in 4
  shards runs on 2 of them: half of it, which is what Slurm counts as taken).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from rota.backends.base import Handle, ReplicaState, ReplicaStatus, Status
from rota.backends.slurm.nodes import GPU, SHARD, NodeReport, shards_for
from rota.backends.slurm.records import SlurmJob, SlurmStep
from rota.backends.slurm.states import JobPhase, end_reason, job_phase
from rota.core import MILLI, DeviceShare, End, Placement, ReplicaPlacement

ACCOUNTING_WAIT_S = 30.0
COMPLETED = "COMPLETED"  # Slurm's state of a job whose batch script exited 0
TIMEOUT = "TIMEOUT"      # Slurm's state of a job it stopped at its --time
RUNNING, EXITED, LOST = ReplicaState.RUNNING, ReplicaState.EXITED, ReplicaState.LOST


@dataclass(frozen=True, slots=True)
class Seen:
    """What Slurm says about one attempt's job at ``now``."""

    queued: SlurmJob | None                  # squeue's record (None once slurmctld forgot it)
    accounted: SlurmJob | None = None        # sacct's, with steps and exit codes
    losing: Mapping[str, str] = field(default_factory=dict)  # node -> why jobs must leave it
    reports: Mapping[str, NodeReport] = field(default_factory=dict)
    accounting: bool = True
    now: float = 0.0
    landed: Placement | None = None          # where it landed, when known from an earlier look
    foreign: Mapping[str, frozenset[int]] | None = None  # GPUs work outside rota holds,
                                                         # per node (None: not looked at)


def pinned(handle: Handle) -> bool:
    return handle.ref.get("pinned", True) is not False


def attempt_status(handle: Handle, seen: Seen) -> Status:
    job = seen.queued or seen.accounted
    ranks = range(len(handle.replicas))
    if job is None:
        why = (f"Slurm has no record of job {handle.launch_id}" if seen.accounting else
               f"Slurm no longer lists job {handle.launch_id} and keeps no accounting of it")
        return Status(tuple(ReplicaStatus(r, LOST, reason=why) for r in ranks))
    if not job.phase.ended:
        if seen.queued is None:
            why = f"Slurm lost job {job.id}: sacct says {job.state}, slurmctld has no such job"
            return Status(tuple(ReplicaStatus(r, LOST, reason=why) for r in ranks))
        return _live(handle, job, seen)
    ended = tuple(_ended(handle, r, seen) for r in ranks)
    if job.state == TIMEOUT:  # Slurm enforced the walltime (``Capabilities.walltime``)
        ended = tuple(replace(r, cause=End.WALLTIME) if r.state is EXITED else r for r in ended)
    return Status(ended)


def _live(handle: Handle, job: SlurmJob, seen: Seen) -> Status:
    placement = None
    if job.phase.started:  # squeue in brief has no allocations: then what was seen before
        placement = landed(handle, job, seen.reports) if job.allocations else seen.landed
    nodes = [r.node for r in (placement or _given(handle)).replicas]
    watch = job.phase.started or pinned(handle)
    out = []
    for rank, node in enumerate(nodes):
        why = seen.losing.get(node) if watch else None
        out.append(ReplicaStatus(rank, LOST, reason=f"{node} is {why}") if why
                   else ReplicaStatus(rank, RUNNING))
    if job.phase.started:
        return Status(tuple(out), placement)
    why = f"Slurm job {job.id} is pending ({job.reason or 'no reason given'})"
    return Status(tuple(out), placement, waiting=why,
                  displaced=displaced(handle, job, seen.foreign))


WAITS_FOR_GPUS = ("Resources", "Priority")  # Slurm's reasons of a job whose nodes are busy


def displaced(handle: Handle, job: SlurmJob,
              foreign: Mapping[str, frozenset[int]] | None) -> str | None:
    """Why a pending pinned job will not start where rota placed it (module docstring);
    None when it is not displaced."""
    if not foreign or not pinned(handle) or job.reason not in WAITS_FOR_GPUS:
        return None
    taken: dict[str, set[int]] = {}
    for r in handle.replicas:
        held = foreign.get(r.node, frozenset()) & {d.index for d in r.devices}
        taken.setdefault(r.node, set()).update(held)
    busy = {n: sorted(gpus) for n, gpus in taken.items() if gpus}
    if not busy:
        return None
    return (f"Slurm job {job.id} waits ({job.reason}) for GPUs that work outside rota holds: "
            + "; ".join(f"{n} GPU {','.join(map(str, gpus))}" for n, gpus in busy.items()))


def _ended(handle: Handle, rank: int, seen: Seen) -> ReplicaStatus:
    job = seen.accounted if seen.accounted is not None and seen.accounted.phase.ended \
        else seen.queued
    assert job is not None
    if job.phase is JobPhase.LOST:  # its steps were cancelled with it: not their end
        return ReplicaStatus(rank, LOST, reason=end_reason(job.state))
    step = _step(seen.accounted, rank)
    if step is not None:
        return _from_step(rank, step)
    if job.state == COMPLETED:  # the batch script exits 0 only when every replica did
        return ReplicaStatus(rank, EXITED, 0, finished_at=job.end_time)
    if job.start_time is None or not job.nodes:  # a job cancelled while pending has no nodes
        why = end_reason(job.state) or job.state.lower()
        return ReplicaStatus(rank, EXITED, reason=f"{why} before it started",
                             finished_at=job.end_time)
    gang = len(handle.replicas) > 1
    if gang and seen.accounting and job.end_time is not None \
            and seen.now - job.end_time < ACCOUNTING_WAIT_S:
        return ReplicaStatus(rank, RUNNING)  # sacct has not recorded the steps yet
    exit = job.exit
    return ReplicaStatus(rank, EXITED, exit.exit_code if exit else None,
                         (exit.signal or None) if exit else None, end_reason(job.state),
                         job.end_time)


def _step(accounted: SlurmJob | None, rank: int) -> SlurmStep | None:
    if accounted is None:
        return None
    step = next((s for s in accounted.steps if s.name == f"rank-{rank}"), None)
    return step if step is not None and step.end_time is not None and step.exit else None


def _from_step(rank: int, step: SlurmStep) -> ReplicaStatus:
    state = step.state.split()[0]  # "CANCELLED by 0" where Slurm says who did it
    if job_phase(state, f"step {step.id}") is JobPhase.LOST:
        return ReplicaStatus(rank, LOST, reason=end_reason(state), finished_at=step.end_time)
    assert step.exit is not None
    return ReplicaStatus(rank, EXITED, step.exit.exit_code, step.exit.signal or None,
                         end_reason(state), step.end_time)


def _given(handle: Handle) -> Placement:
    return Placement(tuple(ReplicaPlacement(r.node, r.devices) for r in handle.replicas))


def landed(handle: Handle, job: SlurmJob, reports: Mapping[str, NodeReport]) -> Placement | None:
    """Where the replicas of a running job are (module docstring); None when Slurm's record
    does not say (no per-node allocation yet) or it is where they were placed."""
    allocs = {a.node: a for a in job.allocations}
    count = len(handle.replicas)
    if pinned(handle):
        nodes = [r.node for r in handle.replicas]
    elif job.nodes and count % len(job.nodes) == 0:
        per_node = count // len(job.nodes)
        nodes = [job.nodes[k // per_node] for k in range(count)]
    else:
        return None
    if any(n not in allocs for n in nodes):
        return None
    taken: dict[str, int] = {}
    replicas = []
    for rep, node in zip(handle.replicas, nodes):
        k = taken.get(node, 0)
        taken[node] = k + 1
        replicas.append(ReplicaPlacement(node, _devices(rep.devices, allocs[node].gres, k,
                                                        reports.get(node))))
    placement = Placement(tuple(replicas))
    return None if placement == _given(handle) else placement


def _devices(planned: tuple[DeviceShare, ...], gres, k: int,
             report: NodeReport | None) -> tuple[DeviceShare, ...]:
    """The ``k``-th share of a node's GRES indices for a replica planned as ``planned``."""
    if not planned:
        return ()
    whole = sorted(i for g in gres if g.name == GPU for i in g.indices)
    if all(d.milli >= MILLI for d in planned):
        picked = whole[k * len(planned):(k + 1) * len(planned)]
        if len(picked) != len(planned):
            return planned
        memory = {d.index: d.memory_mib for d in report.node.devices} if report else {}
        return tuple(DeviceShare(i, d.milli, memory.get(i, d.memory_mib))
                     for i, d in zip(picked, planned))
    shards = sorted({i for g in gres if g.name == SHARD for i in g.indices})
    if not shards:
        return planned
    gpu = shards[min(k, len(shards) - 1)]
    per_gpu = report.shards_per_gpu if report is not None else 0
    return tuple(DeviceShare(gpu, _held_milli(d.milli, per_gpu), d.memory_mib) for d in planned)


def _held_milli(milli: int, shards_per_gpu: int) -> int:
    """The share of a GPU that the shards of a ``milli`` fraction hold: ``shards_for`` rounds
    up (0.3 of a GPU cut in 4 is 2 shards, half of it), and Slurm counts the shards."""
    if shards_per_gpu <= 0:
        return milli
    return min(MILLI, math.ceil(shards_for(milli, shards_per_gpu) * MILLI / shards_per_gpu))
