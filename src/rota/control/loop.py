"""The control loop: the only place in rota with a real loop and side effects.

One pass (``ControlLoop.step``), in order:

0. Accounts: the user -> OS account map is read from the store (``Accounts.refresh``) before
   anything else, so that no launch, recovered or new, resolves an account from a map that a
   restart left empty; a store that cannot answer fails the pass before anything acts.
   Inventory: at most every ``inventory_s``, the backend's nodes as it reports them now (what
   work outside rota holds, which nodes it cannot use) are written where they changed
   (``rota.control.inventory``); at once when the backend saw work outside rota start or
   end (``wake(inventory=True)``); again right after step 1 when it requeued a job for a fault
   of its node or GPU, or one displaced by work outside rota (``End.DISPLACED``), so that
   step 3 does not place work there again.
   Intake: a backend that offers work of its own (``Offering``: Kubernetes Pods created with
   ``schedulerName: rota``) has its new offers submitted as pending jobs, and in step 3 the
   pending jobs whose offers are no longer made are cancelled before the cycle
   (``rota.control.intake``).
1. Reconcile: every job the store says holds resources (SCHEDULED, RUNNING, PREEMPTING; read
   in full only where it changed since the last pass: ``Store.held_jobs``) is
   compared with what its backend reports (all of them in one ``poll``), and moved, signalled
   or stopped accordingly (``rota.control.verdict``); a SCHEDULED job that was never launched
   is launched.
2. Bill: GPU-seconds of running jobs, per project, into the store.
3. Schedule: ``store.snapshot(now)`` -> ``run_cycle(snapshot, policy, now)`` ->
   ``store.apply(decisions, now)``, one transaction, durable before anything is acted on.
   The cycle runs on a base kept from pass to pass (``rota.scheduler.base``, ``Base.sync``):
   what the active jobs hold is taken again only for the jobs whose row changed since the
   last pass (the store's job cache hands back the same object for a row that did not), and
   the base is built afresh when the nodes, queues or flavours changed or a cycle failed; a
   cycle on it decides exactly as one on the whole snapshot.
   For a placement that plans for the mix of arriving work (``capgd``), the loop keeps the
   mix (``rota.scheduler.Arrivals``: each snapshot's new pending jobs are observed into it)
   and passes it to the cycle.
   Pending jobs whose owner's OS account cannot run here (``rota.control.accounts``), or whose
   project reached its hard budget this month (``rota.control.budgets``), are left out of the
   cycle and wait with that reason, holding nothing. With ``forecasts``
   (``rota.control.forecasts``; ``rota up`` gives it), each wait also tells the latest start
   estimate of a forward simulation over walltimes, run at most once per its period. Wait
   explanations that did not change since the last pass are not written again. The pending
   jobs with a reservation or an estimated start that read datasets get them copied into
   their node's cache ahead of their start (``rota.control.prefetch``, on its own thread).
4. Launch: every job bound in step 3 is handed to the launcher, which starts them through
   the backend all at once (``rota.control.launcher``) while the next passes go on; each pass
   first records the launches that ended since the last (their handles with their moves to
   RUNNING, in one transaction; for a backend whose launches may wait in its own queue,
   ``Capabilities.queued``, the handles alone: such a job stays SCHEDULED, *starting*, until
   step 1 of a later pass sees it run). A job in flight stays SCHEDULED and so holds its devices in
   every snapshot meanwhile; it is neither judged nor launched again, nor chosen as a victim
   (a preemption that would evict it is left for a later pass), until its launch is recorded.
   So a Pod created while a pass's Bindings are still being answered is scheduled by the
   next pass, not after all of them. ``step()``, the pass that tests and ``start`` run, ends
   only once its own launches are recorded too.

Passes run on a background thread: after ``wake()`` (a submit or cancel through the API, a
launch that the backend saw end: ``Backend.watch``) and every ``interval_s`` otherwise.
Wake-ups coalesce: many submits in a burst cost one pass, not one each, and after each pass the
loop rests as long as the pass took (at most ``MAX_REST_S``), so that a long pass (many
pending jobs) cannot starve the API sharing its process (a job waiting with its report of its
end, below, cuts the rest short). Work that the backend offers (``wake(arrived=True)``: a Pod
created for rota) came through no API request of this process: it ends the rest too, once
``ARRIVAL_REST_S`` more have let the rest of its burst arrive, and the next pass takes it.
So a Pod created during a pass waits for that pass to end, not for a rest as long again.
A pass that takes offered work less than ``RECONCILE_EVERY_S`` after the end of the last step
1 skips steps 1 and 2 (with thousands of running jobs, step 1 is most of a pass): it records
the launches that ended, takes the offers and places them, and launches. So while Pods keep
coming, they are placed by short passes, and step 1 still runs at least every
``RECONCILE_EVERY_S`` (a job that ended is seen that much later at most, and its devices stay
held in the snapshot until then: nothing is placed on them early). ``step()`` always runs
every step, and so does a pass that takes a job's report of its end.
The first pass after ``start`` adopts every active job's handle (``backend.adopt``): a job
still running is kept, one that finished while the control plane was down has its exit code
recorded, one whose processes vanished is requeued (or failed) per its restart policy. A job
left SCHEDULED (its launch under way when the control plane died) has its attempt looked for
(``backend.recover``) before anything else is decided about it, and new launches of that pass
start only after (the launcher's rounds run one after the other). No accepted job is lost: the
store holds it.

Early ends (``exited``): a job's own report of its end, answered once the pass that took it
has its launches out; every pass stops attempts that still run long after (``handoff``).

With a ``LeaseKeeper`` (``rota.control.lease``), every pass first makes sure this process
still holds the database's ``control-loop`` lease, renewing it when due, and the loop wakes at
least every third of its time to live to do so. A pass that may not act does nothing, and a
pass asks again before step 1 and right before step 4: a pass slowed or frozen past its
lease stops there, and launches nothing. A lease lost to another holder stops the loop for good and calls
``on_lease_lost`` (``rota up`` exits non-zero); ``stop`` releases the lease. A standby
(``rota.control.standby``) calls ``start`` only once it took the lease.

With ``metrics`` (``rota.control.metrics``), each pass hands it what it saw (its snapshot and
why each pending job waits) and how long its parts took.

Time comes from the injected ``clock``; tests call ``step()`` directly with a hand-moved one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection

from rota.backends.base import Backend, EarlyEnding, RunAs, Succeeding
from rota.control.accounts import Accounts
from rota.control.budgets import BudgetWatch
from rota.control import eligibility, handoff
from rota.control.clock import Clock, SystemClock
from rota.control.forecasts import Forecasts
from rota.control.prefetch import Prefetcher
from rota.control.intake import Intake
from rota.control.inventory import InventorySync
from rota.control.lease import LeaseKeeper
from rota.control.passtime import PassTimer, out_of_collector
from rota.control.reconcile import PassReport, Reconciler
from rota.core import Preempt
from rota.scheduler import ArrivalMix, Arrivals, Decisions, Policy, Snapshot, run_cycle
from rota.scheduler.base import Base
from rota.store import JobRecord, Store

if TYPE_CHECKING:  # the metrics are composed in only by ``rota up``
    from rota.control.metrics import Metrics

log = logging.getLogger("rota.control")
MAX_REST_S = 1.0
ARRIVAL_REST_S = 0.05  # after work the backend offered: its burst's time to arrive
RECONCILE_EVERY_S = 1.0  # while offered work keeps arriving: the most between two step 1s
HANDOFF_WAIT_S = 5.0  # the longest the API keeps a job's report of its end waiting (``exited``)


class ControlLoop:
    """``accounts`` says as whom each owner's jobs run (``rota up`` always gives it); without
    it every job runs as the control plane's own account, as in an embedded single-user use."""

    def __init__(self, store: Store, backend: Backend, policy: Policy, data_dir: str | Path,
                 clock: Clock | None = None, interval_s: float = 2.0,
                 lease: LeaseKeeper | None = None,
                 on_lease_lost: Callable[[], None] = lambda: None,
                 accounts: Accounts | None = None, inventory_s: float = 10.0,
                 api_url: str | None = None, api_ca_file: str | None = None,
                 metrics: Metrics | None = None, forecasts: Forecasts | None = None) -> None:
        self.store, self.backend, self.policy = store, backend, policy
        self.forecasts = forecasts
        self.prefetch = Prefetcher(store, backend)  # datasets copied before a job starts
        # None: the backend takes no early ends, and its launches are out when they return
        self.early = backend if isinstance(backend, EarlyEnding) else None
        self._arrivals = Arrivals.of(policy)
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.interval_s = interval_s
        self.lease, self.on_lease_lost = lease, on_lease_lost
        self.accounts = accounts
        self.inventory = InventorySync(store, backend, inventory_s)
        self.intake = Intake(store, backend)
        self.budgets = BudgetWatch(store)
        self.reconciler = Reconciler(store, backend, Path(data_dir).resolve(), self.clock.now(),
                                     account=self._run_as, api_url=api_url,
                                     api_ca_file=api_ca_file, on_ready=lambda: self.wake())
        self.passes = 0
        self._seen: tuple[Snapshot, dict[str, str]] | None = None  # for metrics
        self.last_error: str | None = None
        self._written_waits: dict[str, int] = {}  # job -> hash of (reasons, estimate) applied
        self._base: Base | None = None  # what the active jobs hold, kept between cycles
        self._wakeup = threading.Event()
        self._halt = threading.Event()
        self._urgent = threading.Event()  # a report waits: cut the rest after a pass short
        self._arrived = False  # the backend offered work since the last pass began
        self._foreign = threading.Event()  # work outside rota changed: read the inventory
        self._reconciled_at = -math.inf  # when step 1 last ended (``time.monotonic``)
        self._thread: threading.Thread | None = None
        self._step_lock = threading.Lock()
        self._handoffs: list[Future[None]] = []  # reports waiting for the pass that takes them
        self._handoff_lock = threading.Lock()

    # -- running in the background ---------------------------------------------------------

    def start(self, taking_over: bool = False) -> PassReport:
        """Adopt what the store says is active (one pass, in this thread), then keep going in
        the background. Returns the report of that first pass. ``taking_over``: another
        control plane, with a data directory of its own, led before this one (a standby's
        promotion): a backend that must know (``Succeeding``) is told so for that pass."""
        succeeding = self.backend if taking_over and isinstance(self.backend, Succeeding) \
            else None
        self.backend.watch(self.wake)
        if succeeding is not None:
            succeeding.taking_over(True)
        first = self.step()
        if succeeding is not None:  # its launches are recorded: the rest are this plane's own
            succeeding.taking_over(False)
        self._thread = threading.Thread(target=self._run, name="rota-control", daemon=True)
        self._thread.start()
        return first

    def wake(self, arrived: bool = False, inventory: bool = False) -> None:
        """Ask for a pass as soon as possible (coalesced with other requests). ``arrived``:
        the backend offers new work (``Offering``), which ends the rest after the pass under
        way (module docstring); ``inventory``: work outside rota started or ended, so the
        pass reads the inventory whenever it was last read."""
        if inventory:
            self._foreign.set()
        if arrived:
            with self._handoff_lock:
                self._arrived = True
                self._urgent.set()
        self._wakeup.set()

    def exited(self, job_id: str, attempt: int, exit_code: int,
               replicas: tuple[int, ...] | None = None) -> Future[None] | None:
        """Attempt ``attempt`` of job ``job_id`` says it ended with ``exit_code``, and each
        replica with its code in ``replicas`` where it knows them (``rota.control.handoff``).
        Returns at once: a future done once the pass that took the report has its launches
        out, or None when the report is not taken (the attempt is not the job's current
        launch, the backend takes no such word, or this loop stopped: the backend's own
        report of the end counts then, as always)."""
        if self._halt.is_set() or (self.lease is not None and self.lease.lost):
            return None  # stopped, or its lease lost: the leader's API takes it
        if not handoff.taken(self.store, self.early, job_id, attempt, exit_code, replicas):
            return None
        taken: Future[None] = Future()
        with self._handoff_lock:
            self._handoffs.append(taken)
            self._urgent.set()
        self.wake()
        return taken

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the current pass and the launches under way, record them while this process
        may still act, and stop; release the lease. Jobs keep running: the next start adopts
        them (and launches again, finding its attempt, a job whose launch was not recorded)."""
        self._halt.set()
        self._wakeup.set()
        self._urgent.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            self._thread = None
        self.backend.unwatch()
        self._land_all()
        self.reconciler.launcher.close()
        if self.lease is not None:
            with self._step_lock:
                self.lease.release()

    def _land_all(self) -> None:
        with self._step_lock:
            now = self.clock.now()
            if self.lease is not None and not self.lease.ensure(now):
                return
            try:
                self.reconciler.land(now, PassReport(), wait=True)
            except Exception:  # the next start launches them again, finding their attempts
                log.exception("recording the last launches failed")
            try:
                self.reconciler.flush_usage(now, force=True)
            except Exception:  # the next start bills again from what was stored
                log.exception("storing the last usage failed")

    def _run(self) -> None:
        period = self.interval_s
        if self.lease is not None:
            period = min(period, self.lease.ttl_s / 3)
        while not self._halt.is_set():
            self._wakeup.wait(period)
            self._wakeup.clear()
            if self._halt.is_set():
                break
            began = time.monotonic()
            try:
                self._pass(settle=False)
                self.last_error = None
            except Exception as exc:  # a bad pass must not end the loop: the next one retries
                self.last_error = repr(exc)
                log.exception("control pass failed; retrying in the next pass")
            self._rest(time.monotonic() - began)

    def _rest(self, pass_s: float) -> None:
        """Rest after a pass of ``pass_s`` seconds: as long as it took, at most
        ``MAX_REST_S`` (during a burst of submits the loop takes at most half of the process,
        and the API the other half). A job waiting with its report (``exited``) or a stop
        ends it at once; work the backend offered, once ``ARRIVAL_REST_S`` more have let
        the rest of its burst arrive (module docstring)."""
        rest = min(pass_s, MAX_REST_S)
        if self._urgent.wait(rest) and self._arrived and not self._handoffs:
            self._halt.wait(min(rest, ARRIVAL_REST_S))

    # -- one pass ----------------------------------------------------------------------------

    def step(self) -> PassReport:
        """One pass (see the module docstring), at ``clock.now()``, ended once the launches
        it started are recorded."""
        return self._pass(settle=True)

    def _pass(self, settle: bool) -> PassReport:
        with self._step_lock:
            began = time.perf_counter()
            now = self.clock.now()
            report = PassReport()
            if self.lease is not None and not self.lease.ensure(now):
                if self.lease.lost and not self._halt.is_set():
                    self._halt.set()
                    self.on_lease_lost()
                return report
            with self._handoff_lock:  # the reports this pass takes (the backend has them)
                handoffs, self._handoffs = self._handoffs, []
                if not self._halt.is_set():
                    self._urgent.clear()
            # offered work arriving soon after a step 1: placed without another (docstring)
            quick = (not settle and not handoffs and self._arrived
                     and time.monotonic() - self._reconciled_at < RECONCILE_EVERY_S)
            try:
                return self._steps(now, report, settle, began, quick)
            finally:
                handoff.answer_after(self.reconciler.launcher, self.early,
                                     self.backend.name, handoffs)

    def _steps(self, now: float, report: PassReport, settle: bool, began: float,
               quick: bool = False) -> PassReport:
        """The steps of a pass (module docstring) that may act; ``quick``: without steps 1
        and 2."""
        if self.accounts is not None:  # before any launch: a store that cannot answer
            self.accounts.refresh()    # fails the pass, never a guess of the account
        self._land(now, report, wait=False)                     # 4, of earlier passes
        self._sync_inventory(now, report)                                       # 0
        self._take_offers(now, report)                                          # 0
        if not self._may_act():  # slowed or frozen past the lease since the pass began
            return report
        if not quick:
            self._reconcile(now, report)                                       # 1, 2
        bound = self._schedule(now)                                             # 3
        if bound and self._may_act():                                           # 4
            self.reconciler.launch(self.store.get_jobs(list(bound)))
        if settle:
            self._land(now, report, wait=True)
        self.passes += 1
        self._measured(began, report)
        return report

    def _reconcile(self, now: float, report: PassReport) -> None:
        """Steps 1 and 2 (module docstring)."""
        self.reconciler.reconcile(self.store.held_jobs(), now, report)          # 1
        handoff.stop_overdue(self.early, self.backend, self.store, report)
        if report.faults or report.displaced:  # a node or GPU failed or was drained, or
            # work outside rota took a job's GPUs: the cycle must see it before placing
            self._sync_inventory(now, report, force=True)
        self.reconciler.flush_usage(now)                                        # 2
        self._reconciled_at = time.monotonic()

    def _take_offers(self, now: float, report: PassReport) -> None:
        """Intake (module docstring, step 0): the work offered until now becomes jobs."""
        with self._handoff_lock:  # what arrives from here on is for the next pass
            self._arrived = False
            if not (self._handoffs or self._halt.is_set()):
                self._urgent.clear()
        try:
            self.intake.take(now)
        except Exception as exc:  # the offers wait for the next pass
            report.errors.append(f"intake: {exc!r}")
            log.exception("intake of %s's offers failed", self.backend.name)

    def _may_act(self) -> bool:
        """Whether this process may still act, asked again before step 1 and right before
        launching: a pass that began in time but was slowed or frozen past its lease stops
        there (the jobs it bound stay SCHEDULED, and whoever leads launches them)."""
        return self.lease is None or self.lease.ensure(self.clock.now())

    def _land(self, now: float, report: PassReport, wait: bool) -> None:
        try:
            self.reconciler.land(now, report, wait)
        except Exception as exc:  # their jobs are still SCHEDULED without a handle: the
            report.errors.append(f"launch: {exc!r}")  # next pass launches them again, which
            log.exception("recording launches failed")  # finds the attempts that started

    def _measured(self, began: float, report: PassReport) -> None:
        if self.metrics is None or self._seen is None:
            return
        try:
            self.metrics.passed(*self._seen, time.perf_counter() - began, len(report.errors))
        except Exception:  # metrics must never cost a pass
            log.exception("recording the pass's metrics failed")

    def _sync_inventory(self, now: float, report: PassReport, force: bool = False) -> None:
        if self._foreign.is_set():  # what work outside rota holds changed (``wake``)
            self._foreign.clear()
            force = True
        try:
            self.inventory.sync(now, force)
        except Exception as exc:  # schedule on the last known inventory meanwhile
            report.errors.append(f"inventory: {exc!r}")
            log.exception("inventory of %s failed", self.backend.name)

    def _run_as(self, rec: JobRecord) -> RunAs | None:
        """The account a launch of ``rec`` names; ``NoAccount`` when it may not start now
        (the launcher then puts it back in the queue, held with that reason)."""
        if self.accounts is None:
            return None
        return self.accounts.launch_account(rec.job.user)

    def _held(self, snapshot: Snapshot, now: float) -> tuple[Snapshot, eligibility.Outcome]:
        """The snapshot without the pending jobs that may not start now, and what becomes of
        them (``rota.control.eligibility``); budgets are reviewed (and warned of) first."""
        over_budget = self.budgets.review(now)
        pending = snapshot.pending
        if not pending:
            return snapshot, eligibility.Outcome()
        account_hold = lambda user: None  # noqa: E731 - without accounts: every owner runs
        if self.accounts is not None:  # read from the store at the start of this pass
            account_hold = self.accounts.hold
        held = eligibility.decide(pending, eligibility.Facts(self.store.eligibility_facts(now),
                                                             account_hold, over_budget), now)
        out = held.kept
        if not out:
            return snapshot, held
        return _without(snapshot, out), held

    def _schedule(self, now: float) -> tuple[str, ...]:
        timer = PassTimer(self.metrics)
        with timer("snapshot"):
            whole = self.store.snapshot(now)
        gone = self.intake.withdraw(whole.pending)
        if gone:  # offered work that no longer waits: cancelled, not placed
            whole = _without(whole, gone)
        pending = {j.id for j in whole.pending}
        snapshot, held = self._held(whole, now)
        mix = None if self._arrivals is None else self._arrivals.update(whole)
        with out_of_collector(), timer("cycle"):
            decisions = self._cycle(snapshot, now, mix)
        if self.metrics is not None:
            self._seen = (whole, {w.job: str(w.reasons[0].code) for w in
                                  (*decisions.waits, *held.waits) if w.reasons})
        self._written_waits = {j: w for j, w in self._written_waits.items() if j in pending}
        told = decisions.waits
        if self.forecasts is not None:
            if self.forecasts.due(snapshot, now):
                self.forecasts.refresh(snapshot, self.policy, now)
            told = self.forecasts.explain(told)
        self.prefetch.consider(decisions.reservations, told)
        waits = [w for w in (*told, *held.waits)
                 if self._written_waits.get(w.job) != hash((w.reasons, w.estimated_start))]
        todo = Decisions(binds=decisions.binds,
                         preemptions=_sparing(decisions.preemptions, self.reconciler.in_flight),
                         rejects=[*decisions.rejects, *held.rejects], waits=waits)
        if not (todo.changes_anything or todo.waits):
            return ()
        with timer("apply"):
            result = self.store.apply(todo, now)
        for w in waits:
            if w.job in result.waiting:
                self._written_waits[w.job] = hash((w.reasons, w.estimated_start))
        for job_id in (*result.bound, *result.rejected):
            self._written_waits.pop(job_id, None)
        if result.stale:
            log.info("dropped stale decisions: %s", dict(result.stale))
        return result.bound


    def _cycle(self, snapshot: Snapshot, now: float, mix: ArrivalMix | None) -> Decisions:
        """``run_cycle`` on the base kept from the last pass (``rota.scheduler.base``), brought
        to ``snapshot``'s active jobs (only those that changed are taken again); a new base
        when the nodes, queues or flavours changed, or when the last cycle failed."""
        base = self._base
        if base is None or not base.stands_on(snapshot):
            base = Base(snapshot.nodes, snapshot.queues, snapshot.flavors)
        self._base = None  # kept again only once this cycle ran to its end
        decisions = run_cycle(base.sync(snapshot), self.policy, now, base=base, mix=mix)
        self._base = base
        return decisions


def _without(snapshot: Snapshot, job_ids: Collection[str]) -> Snapshot:
    """``snapshot`` without the jobs ``job_ids``."""
    return replace(snapshot, jobs=tuple(j for j in snapshot.jobs if j.id not in job_ids))


def _sparing(preemptions: list[Preempt], flying: frozenset[str]) -> list[Preempt]:
    """The preemptions but those of a preemptor that would evict a job whose launch is in
    flight: its victims are chosen again by a later pass, once that launch is recorded."""
    if not flying:
        return preemptions
    spared = {p.by for p in preemptions if p.job in flying}
    return [p for p in preemptions if p.by not in spared]
