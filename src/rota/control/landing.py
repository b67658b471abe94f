"""What became of the launches, recorded, for ``Reconciler`` (``rota.control.reconcile``):
``Landing``, the part that hands bound jobs to the launcher and records what landed, on
``tracking.Tracking``.

Launch (``rota.control.launcher``, all bound jobs of a pass at once): attempt ``n`` of a job is
its ``attempts`` column; ``backend.launch(..., attempt=n)`` never starts an attempt twice, so a
job found SCHEDULED after a restart (bound, maybe launched, handle never saved) is launched
through the same steps and adopted if it had started. Launches run while later passes go on:
a job in flight (``in_flight``) keeps its SCHEDULED state, and with it its devices in every
snapshot, and is neither judged nor launched again until ``land`` has recorded what became
of it. The handles that landed since the last pass are recorded together; a launch that
cannot be recorded is stopped, so nothing runs unrecorded. A backend whose launches may
wait in its own queue (``Capabilities.queued``: Slurm) has its handles recorded without a
move (``_starting``): the job stays SCHEDULED, shown *starting* with its backend's reason,
until a poll says it runs, and is billed from then; a restart adopts it by its stored
handle, never launching it again.
"""

from __future__ import annotations

import logging

from rota.backends.base import Handle
from rota.control.tracking import PassReport, Tracking, billed_from
from rota.control.verdict import Verdict
from rota.core import IllegalTransition, JobState
from rota.store import Conflict, JobRecord, NotFound

log = logging.getLogger("rota.control")


class Landing(Tracking):
    """``launch`` and ``land`` (module docstring)."""

    def launch(self, recs: list[JobRecord]) -> None:
        """Start launching SCHEDULED jobs (``rota.control.launcher``) and return at once;
        ``land`` records what became of them."""
        self.launcher.submit(recs)

    @property
    def in_flight(self) -> frozenset[str]:
        """The jobs whose launch is under way, not recorded yet: left alone until it is."""
        return self.launcher.in_flight

    def land(self, now: float, report: PassReport, wait: bool = False) -> None:
        """Record the launches that ended (with ``wait``: every one under way, once it
        ended): handles with their moves to RUNNING in one transaction, failures with theirs.
        A launch that failed unforeseen leaves its job SCHEDULED, to be launched again."""
        if wait:
            self.launcher.settle()
        launched = []
        for outcome in self.launcher.landed():
            if outcome.handle is not None:
                launched.append((outcome.rec, outcome.handle))
            elif outcome.verdict is not None:
                self._move(outcome.rec, outcome.verdict, report, now)
            else:
                report.errors.append(f"launch of job {outcome.rec.id}: {outcome.error}")
        self.flush(report)
        if launched:
            self._launched(launched, now, report)

    def _launched(self, launched: list[tuple[JobRecord, Handle]], now: float,
                  report: PassReport) -> None:
        if self._queued is None:  # Capabilities.queued, asked once: it does not change
            self._queued = self.backend.capabilities.queued
        if self._queued:
            self._starting(launched, report)
            return
        for rec, handle in launched:
            self._move(rec, Verdict(JobState.RUNNING, reason=""), report, now, handle)
            self.handles[rec.id] = handle
            self.billed_until[rec.id] = billed_from(rec, now)
        self.flush(report)
        for rec, handle in launched:
            if self.handles.get(rec.id) is handle:
                report.launched.append(rec.id)
                log.info("job %s: launched (%d replica%s)", rec.id, len(handle.replicas),
                         "" if len(handle.replicas) == 1 else "s")

    def _starting(self, launched: list[tuple[JobRecord, Handle]], report: PassReport) -> None:
        """Launches a backend may hold before they run (``Capabilities.queued``): each handle
        is recorded without a move, the job stays SCHEDULED (starting) until a poll says it
        runs (``verdict`` rule 3), and is billed from then. A handle that cannot be recorded
        is stopped, as in ``flush``."""
        for rec, handle in launched:
            try:
                self.store.record_handle(rec.id, handle.to_dict(), launched=self.backend.name)
            except (IllegalTransition, Conflict, NotFound) as exc:
                log.info("job %s: launch %s not recorded: %s", rec.id, handle.launch_id, exc)
                self.backend.cancel(handle, 0.0)  # it cannot be recorded: it must not run
                continue
            self.handles[rec.id] = handle
            report.launched.append(rec.id)
            log.info("job %s: launched (%d replica%s), starting", rec.id, len(handle.replicas),
                     "" if len(handle.replicas) == 1 else "s")
