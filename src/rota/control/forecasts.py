"""The control loop's start estimates for pending jobs (``rota.scheduler.forecast``), kept
between passes and told in each pending job's wait.

A forecast costs one cycle per step, each with its backfill reservation, over at most
``Horizon.max_jobs`` pending jobs (``bench/forecast.py``: seconds of CPU on a large
cluster), far more than a pass: it runs once per ``every_s`` (300 s by default), and sooner,
at most once per ``soon_s`` (60 s), while a pending job waits that the latest forecast did
not see (submitted since), on the snapshot the pass's cycle saw (the jobs the eligibility
rules hold back are not in it: their waits say why). With ``background`` (as ``rota up``
runs it) it runs on a thread of its own, so that no pass waits for it (the snapshot is
immutable, and a cycle changes neither the policy nor its plugins), one at a time; its
estimates stand until the next one is done.

``explain`` adds to each wait of a pass an ``estimate`` reason (``rota.core.decisions``): the
jobs that hold what the job needs and until when, or why there is no estimate; and the
forecast's start where the cycle gave none (the cycle's own, a backfill reservation's or a
time the job may not start before, stands). A job waiting for its victims to exit
(``preempting``) is left as the cycle says: it starts once they have.
"""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import replace
from typing import Sequence

from rota.core.decisions import Reason, ReasonCode, Wait
from rota.core.snapshot import Snapshot
from rota.scheduler.forecast import Estimate, Horizon, forecast
from rota.scheduler.policy import Policy


log = logging.getLogger("rota.control")


class Forecasts:
    def __init__(self, every_s: float = 300.0, horizon: Horizon = Horizon(),
                 soon_s: float = 60.0, background: bool = False) -> None:
        self.every_s, self.horizon, self.soon_s = every_s, horizon, min(soon_s, every_s)
        self.background = background
        self.at: float | None = None
        self.estimates: dict[str, Estimate] = {}
        self._running: threading.Thread | None = None

    def due(self, snapshot: Snapshot, now: float) -> bool:
        """No forecast yet, the last one is ``every_s`` old, or the clock went back; or a
        pending job it did not see waits and it is ``soon_s`` old."""
        if self.at is None or not self.at <= now < self.at + self.every_s:
            return True
        return now >= self.at + self.soon_s and any(
            j.id not in self.estimates for j in snapshot.pending)

    def refresh(self, snapshot: Snapshot, policy: Policy, now: float) -> None:
        """Forecast from ``snapshot`` at ``now``: at once, or with ``background`` on a thread
        (none is started while one runs)."""
        if self._running is not None and self._running.is_alive():
            return
        self.at = now
        if not self.background:
            self._forecast(snapshot, policy, now)
            return
        # a copy of its own: placement plugins keep what a cycle works on (packing's state and
        # draws, capgd's mix) on themselves, and the loop's next cycle runs meanwhile
        own = copy.deepcopy(policy)
        self._running = threading.Thread(target=self._forecast, args=(snapshot, own, now),
                                         name="rota-forecast", daemon=True)
        self._running.start()

    def _forecast(self, snapshot: Snapshot, policy: Policy, now: float) -> None:
        try:
            found = forecast(snapshot, policy, now, self.horizon) if snapshot.pending else {}
        except Exception:  # estimates are for display: the last ones stand
            log.exception("the start forecast failed")
            return
        self.estimates = found  # one assignment: a pass reads the old or the new, whole

    def explain(self, waits: Sequence[Wait]) -> list[Wait]:
        """The waits with the latest forecast told in them (module docstring)."""
        out = []
        for w in waits:
            est = self.estimates.get(w.job)
            if est is None or (w.reasons and w.reasons[0].code is ReasonCode.PREEMPTING):
                out.append(w)
                continue
            start = w.estimated_start if w.estimated_start is not None else est.start
            out.append(replace(w, reasons=(*w.reasons, self.reason(est)), estimated_start=start))
        return out

    def reason(self, est: Estimate) -> Reason:
        bound = {"window": self.horizon.window_s, "steps": self.horizon.steps,
                 "depth": self.horizon.max_jobs}.get(est.why)
        return Reason(ReasonCode.ESTIMATE, detail=est.why, capacity=bound,
                      holders=est.holders)
