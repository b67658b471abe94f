"""Work a backend offers (``rota.backends.base.Offer``), submitted as jobs, each offer once.

A backend that holds work of its own waiting for rota (Kubernetes: Pods created with
``schedulerName: rota``) implements ``Offering``. Every pass, ``Intake.take`` asks it for its
offers and submits those not submitted yet, as pending jobs labelled ``OFFER_LABEL: <key>``,
all in one group commit; they then wait in their queue like any job, and the backend's
``launch`` starts the work that was offered. An offer is known by its key: the keys of the
jobs submitted by this process, and, on the first pass, of every job that is not finished
yet (read once from the store), so that a restart between a submit and the launch never
submits an offer twice. An offer the store refuses (an unknown queue or project) is not
submitted: the backend is told why (``Offering.decline``, to tell whoever made it), and it is
tried again ``RETRY_S`` later (the operator may have created the queue meanwhile).

An offered job that is pending while its offer is no longer made (``Intake.withdraw``: its
Pods were deleted, or evicted or preempted, which they do not come back from, or another
scheduler bound them) is cancelled, saying so, before the cycle could place it: placing it
would take GPUs, perhaps by preempting others, for a launch that can only fail. Whoever made
the work makes it again, and that is a new offer and a new job. An offer no longer made whose
job is not pending is forgotten: the work it named never waits for rota again.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Iterable

from rota.backends.base import OFFER_LABEL, Backend, Offering, offer_key
from rota.core import Job, JobState, RotaError
from rota.store import JobFilter, Move, Store, Submission

log = logging.getLogger("rota.control")
UNFINISHED = frozenset({JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING,
                        JobState.PREEMPTING})
PAGE = 1000
RETRY_S = 60.0


class Intake:
    def __init__(self, store: Store, backend: Backend) -> None:
        self.store, self.backend = store, backend
        self._known: dict[str, str] | None = None  # offer key -> job id
        self._declined: dict[str, float] = {}  # offer key -> when to try it again
        self._offered: set[str] | None = None  # the keys made in this pass's ``take``

    def take(self, now: float) -> list[str]:
        """Submit the new offers; the ids of the jobs submitted."""
        self._offered = None
        if not isinstance(self.backend, Offering):
            return []
        offers = self.backend.offers()
        self._offered = {o.key for o in offers}
        if not offers:
            return []
        known = self._known if self._known is not None else self._read_known()
        self._known = known
        new = [o for o in offers
               if o.key not in known and self._declined.get(o.key, now) <= now]
        futures = [self.store.submit_future(Submission.from_job(
            replace(o.job, labels=(*o.job.labels, (OFFER_LABEL, o.key))), name=o.name,
            run=o.run)) for o in new]
        submitted = []
        for offer, future in zip(new, futures):
            try:
                job_id = future.result().id
            except RotaError as exc:
                log.warning("offer %s of %s not submitted: %s", offer.key, self.backend.name,
                            exc)
                self._declined[offer.key] = now + RETRY_S
                self.backend.decline(offer, str(exc))
                continue
            self._declined.pop(offer.key, None)
            known[offer.key] = job_id
            submitted.append(job_id)
        if submitted:
            log.info("%d job(s) submitted for work %s offered", len(submitted),
                     self.backend.name)
        return submitted

    def withdraw(self, pending: Iterable[Job]) -> set[str]:
        """Cancel the ``pending`` jobs whose offer this pass's ``take`` no longer saw made;
        their ids. Nothing when ``take`` did not complete in this pass."""
        offered = self._offered
        if offered is None:
            return set()
        gone: dict[str, str] = {}
        pending_keys: set[str] = set()
        for job in pending:
            key = offer_key(job)
            if key is None:
                continue
            pending_keys.add(key)
            if key not in offered:
                gone[job.id] = key
        if self._known is not None:
            self._known = {k: j for k, j in self._known.items()
                           if k in offered or k in pending_keys}
        if not gone:
            return set()
        moves = [Move(job_id, JobState.CANCELLED, reason=(
            f"the work offered as this job ({key}) no longer waits for rota: it was deleted, "
            f"evicted or preempted (which it does not come back from), or bound by another "
            f"scheduler; whoever made it makes it again, as a new job"))
            for job_id, key in sorted(gone.items())]
        done = set()
        for move, outcome in zip(moves, self.store.transition_many(moves)):
            if isinstance(outcome, RotaError):  # moved meanwhile: judged as it is now
                log.info("withdrawn offer of job %s not cancelled: %s", move.job, outcome)
                continue
            done.add(move.job)
        if done:
            log.info("%d job(s) cancelled: the work %s offered for them is gone", len(done),
                     self.backend.name)
        return done

    def _read_known(self) -> dict[str, str]:
        known: dict[str, str] = {}
        after = None
        while True:
            page = self.store.list_jobs(JobFilter(states=UNFINISHED), limit=PAGE, after=after)
            for rec in page.items:
                key = offer_key(rec.job)
                if key is not None:
                    known[key] = rec.id
            if page.next_after is None:
                return known
            after = page.next_after
