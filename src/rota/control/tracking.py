"""``Tracking``: what the parts of ``Reconciler`` (``rota.control.reconcile``) are built on:
what this control process knows of the active jobs beyond the store, the state moves of a pass
written together, and usage billed.

It keeps the handle of every job this process launched or adopted, which jobs were already
sent their checkpoint signal or asked to stop (each is done once), and up to when each running
job was billed; ``forget`` drops all of it once a job no longer runs.

The state moves of a pass are queued (``_move``) and written together (``flush``:
``Store.transition_many``, one transaction, each move checked against the state table on its
own); a move that a concurrent change made illegal is skipped and looked at again next pass,
and a launch whose move cannot be recorded is stopped, so nothing runs unrecorded.

Usage is billed per pass: GPU-seconds (devices x their share x seconds) of every job holding
devices since it was last billed, stored per project together with each job's
``billed_until`` (``Store.bill``, one transaction) every ``FLUSH_S`` seconds, not every pass
(the write touches every running job), and when the loop stops. A job seen for the first time
after a restart is billed from its stored ``billed_until`` (else its ``started_at``), so the
time the control plane was down is billed, and so is what a crash kept from being stored of a
job still running; one that ended meanwhile is billed up to when it ended, as its backend
reports it. A crash loses at most ``FLUSH_S`` seconds of usage of the jobs that ended within
them (fair share's figures, which decay over hours; the exact accounting of ``rota usage``
comes from the attempts and loses nothing).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rota.backends.base import Backend, Handle, RunAs, Status
from rota.control.idle import IdleWatch
from rota.control.launcher import Launcher
from rota.control.runspec import SpecCache
from rota.control.verdict import Verdict
from rota.core import MILLI, End, JobState
from rota.store import JobRecord, Move, Store

log = logging.getLogger("rota.control")
FLUSH_S = 10.0  # seconds between two writes of the usage billed


@dataclass(slots=True)
class PassReport:
    """What one pass did: state moves as (job, from, to, reason), launches, errors."""

    moves: list[tuple[str, str, str, str]] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # jobs requeued for a node or GPU fault, or taken off their node by a preemption (a
    # drain's eviction): the cycle must see their nodes as they are now (cordoned, failed)
    faults: list[str] = field(default_factory=list)
    displaced: list[str] = field(default_factory=list)  # requeued: foreign work took their GPUs

    def moved(self, job: str, old: JobState, new: JobState, reason: str) -> None:
        self.moves.append((job, str(old), str(new), reason))


class Tracking:
    """``account`` names the OS account a job runs as (``rota.control.accounts``); without
    one, jobs run as the control plane's own account. With ``api_url``, each attempt gets
    ``ROTA_URL`` and a token of its own (``Store.issue_job_token``), and with ``api_ca_file``
    (an HTTPS API's certificate, readable by every account) ``ROTA_CA_FILE`` to verify it."""

    def __init__(self, store: Store, backend: Backend, data_dir: Path, since: float,
                 account: Callable[[JobRecord], RunAs | None] = lambda rec: None,
                 api_url: str | None = None, api_ca_file: str | None = None,
                 on_ready: Callable[[], None] = lambda: None) -> None:
        self.store, self.backend, self.data_dir = store, backend, data_dir
        self.specs = SpecCache()  # each job's launch spec, read once
        self.launcher = Launcher(store, backend, data_dir, account, api_url, api_ca_file,
                                 on_ready, self.specs)
        self.idle = IdleWatch(store, backend)
        self._moves: list[tuple[JobRecord, Verdict, float | None, Handle | None]] = []
        self.reclaiming: dict[str, str] = {}  # job -> why it is being reclaimed as idle
        self.since = since  # when this process took over
        self.handles: dict[str, Handle] = {}
        self.signalled: dict[str, set[str]] = {}  # job -> why it got the checkpoint signal
        self.kill_at: dict[str, float] = {}
        self.unseen: frozenset[str] = frozenset()  # jobs whose last poll failed
        self._backend_walltime: bool | None = None  # Capabilities.walltime, once asked
        self._queued: bool | None = None  # Capabilities.queued, once asked
        self.billed_until: dict[str, float] = {}
        # job -> (its record, its status) judged to be left running with nothing due later
        self._steady: dict[str, tuple[JobRecord, Status]] = {}
        self.usage: dict[str, float] = {}  # project -> GPU-seconds not yet stored
        self._flushed: dict[str, float] = {}  # job -> billed_until last stored
        self._flush_at = -math.inf  # when usage was last stored

    # -- moves -------------------------------------------------------------------------------

    def _move(self, rec: JobRecord, verdict: Verdict, report: PassReport,
              now: float | None = None, handle: Handle | None = None) -> None:
        """Queue a move for ``flush`` (``handle``: a launch to record with it)."""
        assert verdict.move is not None
        self._moves.append((rec, verdict, now, handle))

    def flush(self, report: PassReport) -> None:
        """Write the queued moves in one transaction and carry out what follows each."""
        queued, self._moves = self._moves, []
        if not queued:
            return
        moves = []
        for rec, verdict, now, handle in queued:
            eligible_at = None
            if verdict.retry_in_s:
                eligible_at = (now if now is not None else self.store.clock()) + verdict.retry_in_s
            moves.append(Move(rec.id, verdict.move, verdict.exit_code, verdict.reason,  # type: ignore[arg-type]
                              handle.to_dict() if handle is not None else None, verdict.end,
                              verdict.hold, eligible_at, verdict.max_rss_kib))
        for (rec, verdict, _now, handle), after in zip(queued, self.store.transition_many(moves)):
            if isinstance(after, Exception):
                log.info("job %s: skipped %s -> %s: %s", rec.id, rec.state, verdict.move, after)
                if handle is not None:
                    self.backend.cancel(handle, 0.0)  # it cannot be recorded: it must not run
                    self.forget(rec.id)
                continue
            report.moved(rec.id, rec.state, after.state, verdict.reason or "")
            if verdict.end is not None and (verdict.end.fault or verdict.end is End.PREEMPTED):
                report.faults.append(rec.id)
            if verdict.end is End.DISPLACED:
                report.displaced.append(rec.id)
            log.info("job %s: %s -> %s%s", rec.id, rec.state, after.state,
                     f" ({verdict.reason})" if verdict.reason else "")
            if after.state is not JobState.RUNNING:
                self.forget(rec.id)

    def forget(self, job_id: str) -> None:
        for table in (self.handles, self.kill_at, self.billed_until, self.signalled,
                      self.reclaiming, self._steady):
            table.pop(job_id, None)
        self.specs.forget(job_id)
        self.idle.forget(job_id)

    # -- usage -------------------------------------------------------------------------------

    def _bill(self, rec: JobRecord, now: float) -> None:
        since = self.billed_until.get(rec.id)
        placement = rec.job.placement
        if since is None or placement is None or now <= since:
            return
        gpus = sum(d.milli for r in placement.replicas for d in r.devices) / MILLI
        self.billed_until[rec.id] = now
        if gpus:
            self.usage[rec.job.project] = self.usage.get(rec.job.project, 0.0) + gpus * (now - since)

    def flush_usage(self, now: float, force: bool = False) -> None:
        """Store the usage billed since the last flush and each job's ``billed_until``, if
        ``FLUSH_S`` seconds passed since the last (``force``: at once)."""
        if not force and now - self._flush_at < FLUSH_S:
            return
        self._flush_at = now
        pending, self.usage = self.usage, {}
        billed = {j: t for j, t in self.billed_until.items() if t > self._flushed.get(j, 0.0)}
        if not pending and not billed:
            return
        self.store.bill(pending, billed, now)
        self._flushed = dict(self.billed_until)


def billed_from(rec: JobRecord, fallback: float) -> float:
    """Where billing of a job resumes: its ``billed_until`` when that is of this attempt
    (not before it was bound), else when it was bound."""
    started = rec.job.started_at if rec.job.started_at is not None else fallback
    if rec.billed_until is not None and rec.billed_until > started:
        return rec.billed_until
    return started
