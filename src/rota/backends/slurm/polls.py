"""What rota's attempts are doing in Slurm: ``Polls``, the part of ``SlurmBackend`` that reads
their status (on ``view.SlurmView``).

Status (``poll``): one ``squeue`` of the handles' names in brief (``records.squeue_named``),
the node states (``sinfo`` and the reservations, at most ``node_refresh_s`` old), one
``sacct`` for the attempts that ended (exit codes, a gang's per replica; not for those
``squeue`` lists ``COMPLETED``: every replica exited 0) or that slurmctld forgot, and the
whole queue (``squeue --all --json``) only when a job started and where it
landed is not known yet, or ended and ``sacct`` has no exit code for it, or waits pinned
for resources (is it displaced by work outside rota? ``observe.displaced``); ``observe``
reads them. A job still pending in Slurm is *waiting* (``Status.waiting``): rota says it is
starting until Slurm runs it (``Capabilities.queued``). An attempt whose batch script
reported its end (``early``) is said to have exited while Slurm still runs it. A second
Slurm job of a polled attempt is cancelled (``launches``).
"""

from __future__ import annotations

from typing import Sequence

from rota.backends.base import BackendError, Handle, ReplicaState, Status
from rota.backends.slurm.handles import slurm_job
from rota.backends.slurm.nodes import inventory
from rota.backends.slurm.observe import COMPLETED, WAITS_FOR_GPUS, Seen, attempt_status, pinned
from rota.backends.slurm.records import SlurmJob
from rota.backends.slurm.states import owner
from rota.backends.slurm.view import SlurmView


class Polls(SlurmView):
    """``adopt`` and ``poll``: the status of attempts, in bulk (module docstring)."""

    def adopt(self, handle: Handle) -> Status:
        if handle.backend != self.name:
            raise BackendError("foreign_handle", f"handle of backend {handle.backend!r}, "
                                                 f"not {self.name!r}")
        slurm_job(handle)
        self._track(handle)
        return self.poll([handle])[0]

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        """The status of every handle (module docstring): ``squeue`` of their names, the node
        states, ``sacct`` for the attempts that ended, and the whole queue (``--json``) only
        when a job started (where did it land?) or ended beyond what ``sacct`` knows yet."""
        if not handles:
            return []
        ids = [slurm_job(h) for h in handles]
        named = self._named([str(h.ref.get("name")) for h in handles])
        self._cancel_duplicates(handles, named)
        brief = {j.id: j for j in named if j.id in set(ids)}
        self._release_held(list(brief.values()))
        losing = self._losing()
        # a job squeue lists COMPLETED says enough by itself (``observe``)
        asked = [i for i in ids if i not in brief or brief[i].state != COMPLETED]
        accounted = self.accounting.jobs(tuple(sorted(
            i for i in asked if i not in brief or brief[i].phase.ended)))
        full = self._in_full(asked, brief, accounted)
        foreign = self._foreign(handles, brief)
        now, out = self.clock(), []
        for handle, slurm_id in zip(handles, ids):
            queued = full.get(slurm_id) or brief.get(slurm_id)
            status = attempt_status(handle, Seen(
                queued, accounted.get(slurm_id), losing, self._reports, self.accounting.enabled,
                now, self._landed.get(slurm_id), foreign))
            if queued is not None and queued.allocations:
                self._landed[slurm_id] = status.placement
            early = self.early.get(slurm_id)
            if early is not None and status.state is ReplicaState.RUNNING:
                out.append(early.status())  # reported ended; still tracked until Slurm agrees
                continue
            if status.state is not ReplicaState.RUNNING:
                self._untrack([slurm_id])
                self.early.forget(slurm_id)
            out.append(status)
        return out

    def _foreign(self, handles: Sequence[Handle],
                 brief: dict[int, SlurmJob]) -> dict[str, frozenset[int]] | None:
        """The GPUs work outside rota holds, per node, from the whole queue (``squeue --all
        --json``), read only when a pinned attempt waits in Slurm for resources (whether it is
        displaced: ``observe.displaced``); None when none does."""
        if not any(pinned(h) and (j := brief.get(slurm_job(h))) is not None
                   and not j.phase.started and j.reason in WAITS_FOR_GPUS for h in handles):
            return None
        found = inventory(self._slurm_nodes.values(), self._queue(), self.config.gpu_types,
                          self.config.resource_group, self._blocked, self.instance)
        held: dict[str, set[int]] = {}
        for f in found.foreign:
            held.setdefault(f.node, set()).update(d.index for d in f.devices)
        return {node: frozenset(gpus) for node, gpus in held.items()}

    def _in_full(self, ids: list[int], brief: dict[int, SlurmJob],
                 accounted: dict[int, SlurmJob]) -> dict[int, SlurmJob]:
        """The full records, when a job began running and where it landed is not known yet,
        or ended and ``sacct`` has no exit code for it (yet, or at all)."""
        def needs(i: int) -> bool:
            job = brief.get(i)
            if job is None or not job.phase.started:
                return False
            if not job.phase.ended:
                return i not in self._landed
            done = accounted.get(i)
            return done is None or not done.phase.ended or done.exit is None
        if not any(needs(i) for i in ids):
            return {}
        return {j.id: j for j in self._queue() if j.id in set(ids)}

    def _cancel_duplicates(self, handles: Sequence[Handle], queue: tuple[SlurmJob, ...]) -> None:
        """Cancel every live Slurm job of a polled attempt (its name, this control plane's
        comment) but the handle's own."""
        own = {h.ref.get("name"): slurm_job(h) for h in handles}
        for j in queue:
            if j.name in own and j.id != own[j.name] and not j.phase.ended \
                    and owner(j.name, j.comment, self.instance) and j.comment:
                self._duplicate(j.id, j.name)
