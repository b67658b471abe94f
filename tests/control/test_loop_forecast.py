"""Start estimates in the control loop (``rota.control.forecasts``): every pending job's wait
tells the forecast's start, the jobs holding what it needs and until when, or why there is
none; a forecast runs once per its period, and sooner for a job it has not seen; in the
background, no pass waits for it. The node has 4 GPUs."""

from __future__ import annotations

from controlkit import drive, state_is, submit
from rota.control import ControlLoop
from rota.control.forecasts import Forecasts
from rota.core import JobState as S
from rota.core.decisions import Holder, ReasonCode
from rota.scheduler import build_policy


def _estimate(store, job):
    rec = store.get_job(job)
    found = [r for r in rec.wait_reasons if r.code is ReasonCode.ESTIMATE]
    return rec.estimated_start, (found[0] if found else None)


def test_a_job_behind_the_reserved_one_gets_a_start_and_the_jobs_it_waits_for(
        store, backend, data_dir, clock):
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       forecasts=Forecasts(every_s=60, soon_s=5))
    try:
        first = submit(store, ["sleep", "600"], gpus=4, walltime_s=3600)
        running = drive(loop, state_is(store, first, S.RUNNING), "the first job to run")
        ends = running.job.started_at + 3600
        reserved = submit(store, ["true"], gpus=4, walltime_s=600)
        behind = submit(store, ["true"], gpus=4, walltime_s=900)
        loop.step()
        assert _estimate(store, behind) == (None, None)  # the forecast is not 5 s old
        clock.advance(5)
        loop.step()
        # the reserved job starts when the first ends; the one behind it 600 s later
        start, why = _estimate(store, reserved)
        assert start == ends and why.holders == (Holder(first, ("n1",), ends, True),)
        start, why = _estimate(store, behind)
        assert start == ends + 600
        assert why.holders == (Holder(reserved, ("n1",), ends + 600, False),)
        assert why.detail == ""

        endless = submit(store, ["true"], gpus=4)        # no walltime: the rest wait for ever
        last = submit(store, ["true"], gpus=4, walltime_s=60)
        clock.advance(5)
        loop.step()
        # endless starts when behind ends, and never ends: the last has no estimate
        start, why = _estimate(store, endless)
        assert start == ends + 600 + 900
        start, why = _estimate(store, last)
        assert (start, why.detail) == (None, "no-walltime")
        assert why.holders == (Holder(endless, ("n1",), None, False),)
    finally:
        loop.stop()


def test_in_the_background_a_pass_does_not_wait_for_the_forecast(store, backend, data_dir,
                                                                  clock):
    from controlkit import wait_until
    forecasts = Forecasts(every_s=60, soon_s=5, background=True)
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       forecasts=forecasts)
    try:
        first = submit(store, ["sleep", "600"], gpus=4, walltime_s=3600)
        running = drive(loop, state_is(store, first, S.RUNNING), "the first job to run")
        behind = submit(store, ["true"], gpus=4, walltime_s=600)
        clock.advance(5)
        loop.step()                   # starts the forecast that sees it, on its own thread
        wait_until(lambda: behind in forecasts.estimates, "the forecast to end")
        clock.advance(5)
        loop.step()                   # tells it
        start, why = _estimate(store, behind)
        assert start == running.job.started_at + 3600 and why.holders[0].job == first
    finally:
        loop.stop()


def test_a_background_forecast_works_on_a_policy_of_its_own(store, backend, data_dir, clock,
                                                            monkeypatch):
    """The loop's next cycle runs while a background forecast does: the forecast must not
    share the plugins (placement keeps what a cycle works on, on itself) with the loop."""
    import rota.control.forecasts as module
    seen = []
    real = module.forecast
    monkeypatch.setattr(module, "forecast", lambda snapshot, policy, now, horizon: (
        seen.append(policy), real(snapshot, policy, now, horizon))[1])
    policy = build_policy("default")
    forecasts = Forecasts(every_s=60, soon_s=5, background=True)
    loop = ControlLoop(store, backend, policy, data_dir, clock=clock, forecasts=forecasts)
    try:
        submit(store, ["sleep", "600"], gpus=4, walltime_s=3600)
        behind = submit(store, ["true"], gpus=4, walltime_s=600)
        loop.step()
        from controlkit import wait_until
        wait_until(lambda: behind in forecasts.estimates, "the forecast to end")
        (used,) = seen
        assert used is not policy and used.placement is not policy.placement
        assert type(used.placement) is type(policy.placement)
    finally:
        loop.stop()
