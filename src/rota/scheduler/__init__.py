"""The scheduling core: ``run_cycle(snapshot, policy, now) -> Decisions``.

Pure and synchronous: no I/O, no clock, no unseeded randomness. The control plane and the
simulator are thin callers of it. It imports ``rota.core`` and itself only (pydantic for the
plugins' arguments); ``tests/scheduler/test_purity.py`` holds it to that. Modules:

- its input and output live in ``rota.core`` (``snapshot``: the immutable input;
  ``decisions``: bind, preempt, reserve, wait, reject, with structured reasons) and are
  re-exported here;
- ``Arrivals`` / ``ArrivalMix`` (``plugins.capacity``): what a caller carries from cycle to
  cycle for a placement that plans for the mix of arriving work (``run_cycle(..., mix=)``).

The cycle:

- ``cycle``: ``run_cycle``, the steps of a cycle;
- ``turns``: the order in which a cycle tries its pending jobs (preemptors first, then the
  ordering plugin's sequence, with the rules that keep a cohort from churning);
- ``context``: the working context of one cycle: overlay, quota book, and the moves every step
  shares (start a job, release or re-take what an active job holds);
- ``holds``: the quota a cycle holds for jobs that wait, kept from the other queues;
- ``kinds``: what a cycle knows of each pending job itself: its priority, its kind, what its
  start reads of it;
- ``base``: what the jobs holding resources take, kept between cycles by a caller;
- ``apply``: applying decisions to a snapshot (dry runs, simulations).
- ``forecast``: a start estimate for every pending job, by running the cycle forward over
  walltimes (``squeue --start``), with the jobs that hold what each waits for, or why there is
  no estimate.

Capacity, quota and placement:

- ``state``: the indexed, undoable overlay of free capacity;
- ``placement``: gang and device placement;
- ``quota``: Kueue quota arithmetic, with cohort borrowing and lending;
- ``shares``: a queue's dominant resource share of what its cohort lends;
- ``reasons``: the structured reasons of a placement that failed;
- ``screen``: static feasibility: may a pending job ever run on this cluster as specified.
- ``data``: placement by time to first batch for jobs that read datasets (the policy's
  ``data``): the node caching the data first, a wait for a busy warm node bounded by what a
  cold copy costs, and Fluid-style ``soft`` / ``required`` affinity to compare with.

Elastic capacity (its values in ``rota.core.capacity``):

- ``elastic``: ``plan_capacity``: per job a cycle left waiting for room, wait, attach pool
  GPUs to a node or add nodes, by time to start then cost, within budgets and the cluster cap;
- ``elastic_room``: the room left on each node, what jobs use, and scale-in (detach, remove).

MIG geometries (their values in ``rota.core.mig`` and ``rota.core.migplan``):

- ``migdemand``: ``plan_geometries``: a target geometry per GPU from the queue, the forecast
  of arrivals by hour and the cost of a switch, bounded in how often a GPU may change.

Preemption:

- ``candidates``: who a blocked job may evict, and in which passes (Kueue's classic rules);
- ``victims``: which candidates to evict so that one blocked job starts;
- ``spare``: victims that the cycle's other evictions made unnecessary, spared.

Policies:

- ``plugins``: ordering, admission, placement scoring, preemption and backfill plugins, one
  registry;
- ``policy``: presets and specs that pick plugins;
- ``idle``: idle reclamation decided: a pure function of a running job's policy and what was
  seen of it.
"""

from rota.scheduler.apply import apply_decisions
from rota.scheduler.cycle import run_cycle
from rota.scheduler.plugins.capacity import ArrivalMix, Arrivals
from rota.core.decisions import (
    Bind, Decisions, Preempt, Reason, ReasonCode, Reject, Reserve, Wait,
)
from rota.scheduler.policy import PRESETS, Policy, build_policy
from rota.core.snapshot import Snapshot, Usage

__all__ = [
    "PRESETS", "ArrivalMix", "Arrivals", "Bind", "Decisions", "Policy", "Preempt", "Reason", "ReasonCode", "Reject",
    "Reserve", "Snapshot", "Usage", "Wait", "apply_decisions", "build_policy", "run_cycle",
]
