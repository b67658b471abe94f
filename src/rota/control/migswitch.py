"""Carrying out a MIG plan's calendar on the local backend's GPUs (``rota.core.migplan``).

``MigSwitcher.step(now)`` runs before each pass's inventory (``install(loop, switcher)``). For
this machine's node it reads the calendar entry in effect and the next switch, and for each
GPU rota knows the MIG table of, the diff from its instances as NVML reports them now
(``rota.backends.migapply.geometry_of``) to the geometry in effect:

1. *due*: the diff is not empty. The instances it destroys (and a whole GPU it cuts) are
   *affected*:
   a. no active job holds an affected device: the GPU is brought to the target
      (``apply_geometry``: destroy, then create, only what changes) and the node's devices
      are read again from NVML, so the next pass places on the new instances;
   b. jobs hold some, and each may be evicted (it is preemptible, so it gets its checkpoint
      signal and grace, or the plan says ``evict: true``): they are requeued through their
      grace (``Store.requeue``, by ``MIG switch to <geometry>``), once each; the switch is
      done by a later pass, once they are gone;
   c. otherwise the switch is *deferred*: it waits for those jobs to end, and says so.
   Meanwhile the affected devices that no job holds are held by the switch (the node's
   ``foreign``, holder ``MIG switch to <geometry>``, with the jobs it waits for), so that
   nothing new lands on what is about to go; ``rota nodes`` shows it. All affected devices
   also carry the switch's time (``GpuDevice.switch_at``, unless the plan evicts), so that
   one freed within a pass, after this step, takes no job that may not be evicted.
2. *next*: for the next switch of the calendar, the devices it will destroy carry its time
   (``GpuDevice.switch_at``) unless the plan evicts, so that the scheduler does not place a
   job that may not be evicted there if it would still run then (reason ``mig-switch``).

Crash safety: nothing of a switch's progress is kept but the GPUs themselves. The target is a
function of the plan and the time, and ``apply_geometry`` does only the steps left, so a
control plane killed between a drain, a destroy, a create and the inventory read finds, on
restart, the same target and the steps still to do; a requeue already made is not made again
(the job is no longer active there). An instance that a process outside rota uses (NVML
``IN_USE``) defers the switch like a job that may not be evicted; any other NVML refusal (a
GPU whose MIG mode needs a reset) defers it too, tried again each pass; either way the
node's devices are read again from NVML, so the inventory never names an instance that is
gone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from rota.backends.gpus import devices_from_nvml, model_name
from rota.backends.migapply import apply_geometry, geometry_of, in_use
from rota.backends.nvml import Nvml
from rota.control.migcalendar import zoned_times
from rota.core import DeviceShare, IllegalTransition, Job, JobState, Node
from rota.core.mig import MigTable, table_for
from rota.core.migplan import GeometryDiff, MigPlan, Times, diff, doomed, resolve, target_at
from rota.core.nodes import Foreign
from rota.store import Store

log = logging.getLogger("rota.control")
HOLDER = "MIG switch to {geometry}"


@dataclass(slots=True)
class SwitchReport:
    """What one step did: GPUs switched, jobs requeued, and why a due switch waits."""

    switched: list[int] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    deferred: dict[int, str] = field(default_factory=dict)  # GPU index -> why


class MigSwitcher:
    def __init__(self, plan: MigPlan, nvml: Nvml, backend, store: Store,
                 times: Times = zoned_times) -> None:
        self.plan, self.nvml, self.backend, self.store, self.times = (plan, nvml, backend,
                                                                      store, times)

    def step(self, now: float) -> SwitchReport:
        report = SwitchReport()
        node: Node = self.backend.node
        when = target_at(self.plan, node.name, now, self.times)
        if when.entry is None:
            return report
        name = when.entry.geometry
        held = self._held(node.name, now)
        due: dict[int, GeometryDiff] = {}
        upcoming: dict[int, GeometryDiff] = {}
        for index, table in self._tables():
            target = resolve(self.plan.geometries[name], table, f"mig.geometries.{name}")
            change = diff(geometry_of(self.nvml, index, table, usable=True), target)
            if not change.empty and not self._switch(index, table, target, change, held,
                                                     name, report):
                due[index] = change
            if when.next_entry is not None and not self.plan.evict:
                upcoming[index] = diff(target, resolve(
                    self.plan.geometries[when.next_entry.geometry], table,
                    f"mig.geometries.{when.next_entry.geometry}"))
        ends = {} if self.plan.evict else {d: when.since for d in doomed(due)}
        if when.next_at is not None:
            ends = {**{d: when.next_at for d in doomed(upcoming)}, **ends}
        self.backend.node = self._facts(node, due, ends, held, name, report)
        return report

    def _switch(self, index: int, table: MigTable, target, change: GeometryDiff,
                held: dict[int, list[Job]], name: str, report: SwitchReport) -> bool:
        """Step 1 for GPU ``index`` (module docstring); whether it was switched."""
        jobs = {j.id: j for d in doomed({index: change}) for j in held.get(d, [])}
        if not jobs:
            try:
                apply_geometry(self.nvml, index, table, target)
            except self.nvml.lib.NVMLError as exc:  # the node is read again from NVML below
                report.deferred[index] = (
                    "a process outside rota uses an instance it removes" if in_use(exc)
                    else f"NVML refused a step ({exc}); tried again next pass")
                return False
            report.switched.append(index)
            log.info("GPU %d switched to MIG geometry %s", index, name)
            return True
        stuck = [j for j in jobs.values() if not (j.preemptible or self.plan.evict)]
        if stuck:
            report.deferred[index] = ("waiting for " + ", ".join(sorted(j.id for j in stuck))
                                      + ", which may not be evicted")
            return False
        for job in jobs.values():
            if job.state is not JobState.PREEMPTING:
                try:
                    self.store.requeue(job.id, by=HOLDER.format(geometry=name))
                except IllegalTransition:
                    continue  # leaving already (its cancel asked): it goes all the same
                report.requeued.append(job.id)
        report.deferred[index] = "draining " + ", ".join(sorted(jobs))
        return False

    def _tables(self) -> list[tuple[int, MigTable]]:
        out = []
        for d in self.nvml.devices():
            table = table_for(model_name(d.name), d.memory_mib)
            if table is not None:
                out.append((d.index, table))
        return out

    def _held(self, node: str, now: float) -> dict[int, list[Job]]:
        """Device index of ``node`` -> the active jobs that hold it."""
        out: dict[int, list[Job]] = {}
        for job in self.store.snapshot(now).active:
            for rep in job.placement.replicas:  # type: ignore[union-attr]
                if rep.node == node:
                    for share in rep.devices:
                        out.setdefault(share.index, []).append(job)
        return out

    def _facts(self, node: Node, due: dict[int, GeometryDiff], ends: dict[int, float | None],
               held: dict[int, list[Job]], name: str, report: SwitchReport) -> Node:
        """The node as NVML has it now, with the switches' facts (module docstring): each
        device a switch removes with its time (``ends``), the free ones of a due switch held."""
        devices = tuple(replace(d, switch_at=ends[d.index]) if d.index in ends else d
                        for d in devices_from_nvml(self.nvml.devices()))
        mine = [f for f in node.foreign if not f.holder.startswith(HOLDER.format(geometry=""))]
        free = [d for d in devices if d.index in doomed(due) and d.index not in held]
        if free:
            why = "; ".join(report.deferred.values())
            mine.append(Foreign(devices=tuple(DeviceShare(d.index, d.milli, d.memory_mib)
                                              for d in free),
                                holder=HOLDER.format(geometry=name) + (f" ({why})" if why
                                                                        else "")))
        return replace(node, devices=devices, foreign=tuple(mine))


class SwitchingInventory:
    """A control loop's inventory sync (``rota.control.inventory.InventorySync``) with a MIG
    plan's switches carried out first, and the inventory written at once after a switch, so
    that the pass places on the new instances (``install``)."""

    def __init__(self, inner, switcher: MigSwitcher) -> None:
        self.inner, self.switcher = inner, switcher
        self.last: SwitchReport | None = None
        self._said: dict[int, str] = {}  # the deferrals last logged

    def sync(self, now: float, force: bool = False) -> list[str]:
        try:
            self.last = self.switcher.step(now)
        except Exception:  # the pass reports it; the inventory is still written
            self.inner.sync(now, force)
            raise
        if self.last.deferred != self._said:
            self._said = dict(self.last.deferred)
            for index, why in self._said.items():
                log.info("MIG switch of GPU %d deferred: %s", index, why)
        return self.inner.sync(now, force or bool(self.last.switched))


def install(loop, switcher: MigSwitcher) -> SwitchingInventory:
    """Have ``loop`` carry out ``switcher``'s plan in step 0 of each pass, before its
    inventory (a failure is the pass's inventory error: the last inventory stays)."""
    loop.inventory = SwitchingInventory(loop.inventory, switcher)
    return loop.inventory
