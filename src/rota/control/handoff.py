"""Early ends: a job's own report that its attempt ended, taken by the control loop.

A job's own report that its attempt ended (``POST /v1/jobs/{id}/exited``, sent by a Slurm batch
script before it exits) is handed to the backend (``EarlyEnding.reported``, where the backend
implements it: ``taken``), which reports the attempt exited from then on; the loop is woken,
and the future ``ControlLoop.exited`` returns is done once the pass that took the report has
launched what it placed and the backend has those launches out (``answer_after``:
``EarlyEnding.flush_launches``; Slurm: submitted and released); the API answers the report
then, or after ``rota.control.loop.HANDOFF_WAIT_S``. So the job that takes the freed GPUs is
queued in Slurm before the reporting job lets them go. Every pass also stops the attempts the
backend still runs long after they reported their end (``stop_overdue``:
``EarlyEnding.overdue``), and says so in the job's events.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING

from rota.backends.base import REPORT_TRUST_S, Backend, EarlyEnding, Handle
from rota.control.reconcile import current_handle
from rota.core import InvalidSpec
from rota.store import NotFound, Store

if TYPE_CHECKING:
    from rota.control.launcher import Launcher
    from rota.control.reconcile import PassReport

log = logging.getLogger("rota.control")


def taken(store: Store, early: EarlyEnding | None, job_id: str, attempt: int, exit_code: int,
          replicas: tuple[int, ...] | None) -> bool:
    """Whether the backend takes attempt ``attempt`` of job ``job_id``'s report that it ended
    with ``exit_code`` (and each replica with its code in ``replicas``): not when the attempt
    is not the job's current launch, or the backend takes no such word."""
    try:
        rec = store.get_job(job_id)
        stored = current_handle(rec)
        if stored is None or rec.attempts != attempt or not rec.state.holds_resources:
            return False
        handle = Handle.from_dict(stored)
    except (NotFound, InvalidSpec):
        return False
    if replicas is not None and len(replicas) != len(handle.replicas):
        replicas = None  # not this attempt's ranks: the batch's status stands for each
    if early is None or not early.reported(handle, exit_code, replicas):
        return False
    log.info("job %s: attempt %d reported its end (status %d)", job_id, attempt, exit_code)
    return True


def answer_after(launcher: Launcher, early: EarlyEnding | None, backend: str,
                 handoffs: list[Future[None]]) -> None:
    """Answer the reports a pass took once its launches are out in the backend."""
    if not handoffs:
        return

    def answer() -> None:
        try:
            if early is not None:
                early.flush_launches()
        except Exception:  # the launches are released later (Slurm: by ``poll``)
            log.exception("flushing the launches of %s failed", backend)
        for report in handoffs:
            try:
                report.set_result(None)
            except InvalidStateError:  # given up on (cancelled) meanwhile
                pass
    launcher.then(answer)


def stop_overdue(early: EarlyEnding | None, backend: Backend, store: Store,
                 report: PassReport) -> None:
    """Stop the attempts that reported their end but still run in the backend."""
    try:
        for handle in early.overdue() if early is not None else []:
            log.warning("job %s: attempt %s reported its end, but %s still runs it: "
                        "stopped", handle.job_id, handle.attempt, backend.name)
            backend.cancel(handle, 0.0)
            store.note(handle.job_id, "stopped-after-report", (
                f"attempt {handle.attempt} reported its end, but the {backend.name} "
                f"backend still ran it {REPORT_TRUST_S:.0f} s later: stopped there"))
    except Exception as exc:  # the next pass asks again
        report.errors.append(f"overdue: {exc!r}")
        log.exception("stopping attempts that reported their end failed")
