"""Each launched job's handle and status, for ``Reconciler`` (``rota.control.reconcile``):
``Observing``, the part that adopts and polls, on ``tracking.Tracking``.

A job seen for the first time (e.g. after a restart) is adopted through ``backend.adopt``;
later passes ask ``backend.poll`` about all of them at once. Not knowing is never taken for a
lost job: a poll that fails (the backend cannot answer, or one job's record cannot be read) is
asked again of each half of its jobs, down to the jobs it fails for, at most ``MAX_POLLS``
polls a pass; a job whose poll still fails is left as it is for the pass (not judged, not
launched), with an error in the pass's report, and every other job is judged and the pass
goes on to schedule.
"""

from __future__ import annotations

import logging
from typing import Any

from rota.backends.base import BackendError, Handle, ReplicaState, ReplicaStatus, Status
from rota.control.tracking import PassReport, Tracking, billed_from
from rota.core import InvalidSpec, JobState
from rota.store import JobRecord

log = logging.getLogger("rota.control")
MAX_POLLS = 32  # polls a pass makes to find the jobs a failing poll fails for


class Observing(Tracking):
    """``_observe``: the handle and status of each launched job (module docstring)."""

    def _observe(self, recs: list[JobRecord], report: PassReport
                 ) -> dict[str, tuple[Handle, Status]]:
        """Each launched job's handle and status: handles seen for the first time (after a
        restart) are adopted, the others polled together (``_poll``: those whose poll failed
        are left out, in ``unseen``)."""
        out: dict[str, tuple[Handle, Status]] = {}
        known: list[tuple[str, Handle]] = []
        for rec in recs:
            handle = self.handles.get(rec.id)
            stored = rec.backend_handle or {}
            if handle is not None and handle.launch_id == _launch_id(stored):
                known.append((rec.id, handle))
                continue
            try:
                handle = Handle.from_dict(stored)
                out[rec.id] = handle, self.backend.adopt(handle)
            except (InvalidSpec, BackendError) as exc:
                lost = ReplicaStatus(0, ReplicaState.LOST, reason=f"cannot adopt its handle: {exc}")
                out[rec.id] = _placeholder(rec), Status((lost,))
                continue
            self.handles[rec.id] = handle
            if rec.state is not JobState.SCHEDULED:  # a starting job is billed once it runs
                self.billed_until.setdefault(rec.id, billed_from(rec, self.since))
        polled = self._poll(known, report)
        for job_id, handle in known:
            if job_id in polled:
                out[job_id] = handle, polled[job_id]
        return out

    def _poll(self, known: list[tuple[str, Handle]], report: PassReport) -> dict[str, Status]:
        """``backend.poll`` of every handle in one call; where it fails, of each half again,
        down to the jobs it fails for (module docstring), which become ``unseen``."""
        statuses: dict[str, Status] = {}
        unseen: set[str] = set()
        groups, polls = [known] if known else [], 0
        while groups:
            group = groups.pop()
            polls += 1
            try:
                found = self.backend.poll([h for _, h in group])
            except Exception as exc:
                if len(group) > 1 and polls + 2 <= MAX_POLLS:
                    half = len(group) // 2
                    groups += [group[half:], group[:half]]
                    continue
                if any(job_id not in self.unseen for job_id, _ in group):  # once, not each pass
                    log.warning("%s: cannot be observed: %s",
                                ", ".join(f"job {job_id}" for job_id, _ in group), exc)
                report.errors.extend(f"job {job_id}: poll failed: {exc!r}" for job_id, _ in group)
                unseen.update(job_id for job_id, _ in group)
                continue
            statuses.update((job_id, status)
                            for (job_id, _), status in zip(group, found, strict=True))
        self.unseen = frozenset(unseen)
        return statuses


def _launch_id(stored: dict[str, Any]) -> object:
    """The launch a stored handle names (a handle saved before version 2: its directory)."""
    return stored.get("launch_id", stored.get("attempt_dir"))


def _placeholder(rec: JobRecord) -> Handle:
    """A handle that names nothing, for a job whose stored handle cannot be read."""
    return Handle("none", rec.id, "", ())
