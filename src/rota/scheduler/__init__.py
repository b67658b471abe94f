"""The scheduling core: ``run_cycle(snapshot, policy, now) -> Decisions``.

Pure and synchronous: no I/O, no clock, no unseeded randomness. The control plane and the
simulator are thin callers of it. Modules:

- its input and output live in ``rota.core`` (``snapshot``: the immutable input;
  ``decisions``: bind, preempt, reserve, wait, reject, with structured reasons) and are
  re-exported here;
- ``state``: the indexed, undoable overlay of free capacity; ``placement``: gang and device
  placement; ``quota``: Kueue quota arithmetic;
- ``plugins``: ordering, admission, placement scoring, preemption and backfill plugins, one
  registry; ``policy``: presets and specs that pick plugins;
- ``cycle``: the steps of a cycle; ``apply``: applying decisions to a snapshot (dry runs);
- ``context``: one cycle's working context (starting, placing, releasing jobs); ``holds``:
  the quota a cycle holds for jobs that wait, kept from the other queues;
- ``Arrivals`` / ``ArrivalMix`` (``plugins.capacity``): what a caller carries from cycle to
  cycle for a placement that plans for the mix of arriving work (``run_cycle(..., mix=)``).
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
