"""Bringing one GPU to a target geometry (``rota.core.migplan``) through NVML, so that a stop
at any step (kill -9 included) and a new call converge on the target.

``apply_geometry(nvml, index, table, target)`` reads the GPU as it is (``Nvml.gpu_instances``:
half-made instances, without their compute instance, included) and does what the diff from
there to ``target`` (None: a whole GPU) still needs, in this order:

1. turn MIG mode on, where the target has instances and it is off;
2. destroy each instance the target does not keep (its compute instance, then it);
3. give each instance the target keeps but that has no compute instance its compute instance;
4. create each instance the target lacks, at its start, with its compute instance;
5. turn MIG mode off, where the target is a whole GPU.

No progress is kept anywhere else: the GPU is its own record, and a caller's target is a
function of the plan and the time, so a new call after a crash finds the steps left and no
step is done twice. Instances that stay (same profile at the same start) are never touched.
An instance a process uses stops the call with NVML's ``IN_USE`` error before it is touched
(``in_use``); the caller drains it first.
"""

from __future__ import annotations

from typing import Any

from rota.backends.nvml import Nvml, NvmlGpuInstance
from rota.core.mig import MigTable
from rota.core.migplan import GeometryDiff, Instance, diff

NVML_ERROR_IN_USE = 19


def in_use(exc: BaseException) -> bool:
    """Whether an NVML error says that a process uses what was to change."""
    return getattr(exc, "value", None) == NVML_ERROR_IN_USE


def geometry_of(nvml: Nvml, index: int, table: MigTable,
                usable: bool = False) -> tuple[Instance, ...] | None:
    """GPU ``index``'s instances as (profile, start), half-made ones too unless ``usable``
    (then a GPU with one is not yet at a target that keeps it); None: MIG is off."""
    found = nvml.gpu_instances(index)
    return None if found is None else tuple((_name(table, g), g.start) for g in found
                                            if g.usable or not usable)


def _name(table: MigTable, gi: NvmlGpuInstance) -> str:
    profile = table.by_slices(gi.compute, gi.size)
    return profile.name if profile is not None else f"{gi.compute}g.?"


def apply_geometry(nvml: Nvml, index: int, table: MigTable,
                   target: tuple[Instance, ...] | None) -> GeometryDiff:
    """Bring GPU ``index`` to ``target`` (module docstring); the diff it found to do."""
    found = nvml.gpu_instances(index)
    current = None if found is None else tuple((_name(table, g), g.start) for g in found)
    change = diff(current, target)
    if found is None and target is not None:                                         # 1
        nvml.set_mig_mode(index, True)
        found = []
    keep = set(target or ())
    for gi in found or []:                                                            # 2
        if (_name(table, gi), gi.start) not in keep:
            nvml.destroy_instance(index, gi.id)
    for gi in found or []:                                                            # 3
        if (_name(table, gi), gi.start) in keep and not gi.usable:
            nvml.complete_instance(index, gi.id)
    if change.create:                                                                 # 4
        ids = _profile_ids(nvml, index)
        for name, start in change.create:
            profile = table.profile(name)
            assert profile is not None, f"{name} was resolved against {table.gpu}"
            nvml.create_instance(index, ids[(profile.compute, profile.memory)], start,
                                 profile.memory)
    if found is not None and target is None:                                          # 5
        nvml.set_mig_mode(index, False)
    return change


def _profile_ids(nvml: Nvml, index: int) -> dict[tuple[int, int], Any]:
    """NVML's GPU instance profile id by (compute slices, memory slices)."""
    return {(p.compute, p.placements[0][1]): p.id for p in nvml.mig_profiles(index)
            if p.placements}
