"""Project budgets through the real control loop and real processes: at its soft limit a
project's live jobs get a warning event, once a month; at its hard limit its new jobs wait with
reason ``budget`` until the next month (their estimated start) while its running job goes on;
a raised limit lets them start."""

from __future__ import annotations

from controlkit import drive, python, state_is, submit
from rota.core import JobState as S, ReasonCode

QUIET = "import time\nwhile True: time.sleep(0.05)"
H = 3600.0
MONTH_END = 31 * 86400.0  # the fake clock is in January 1970


def test_a_project_past_its_limits_is_warned_then_its_new_jobs_wait(store, loop, clock):
    running = submit(store, python(QUIET))
    drive(loop, state_is(store, running, S.RUNNING), "the first job to run")
    store.set_budget("p", soft=1, hard=2)
    clock.advance(H)                            # 1 GPU x 1 h: the soft limit
    loop.step()
    warnings = [e for e in store.events(running) if e.kind == "budget-warning"]
    assert len(warnings) == 1
    assert warnings[0].message.startswith("project p used 1.00 GPU-hours in 1970-01, past its "
                                          "soft limit of 1; beyond its hard limit of 2")
    clock.advance(H)                            # 2 GPU-hours: the hard limit
    loop.step()
    assert [e.kind for e in store.events(running)].count("budget-warning") == 1  # once a month
    waiting = submit(store, python(QUIET))
    loop.step()
    rec = store.get_job(waiting)
    assert rec.state is S.PENDING
    assert [r.code for r in rec.wait_reasons] == [ReasonCode.BUDGET]
    assert "reached its hard limit of 2 GPU-hours for 1970-01" in rec.wait_reasons[0].detail
    assert rec.estimated_start == MONTH_END
    assert store.get_job(running).state is S.RUNNING  # running jobs are never stopped
    store.set_budget("p", soft=None, hard=10)
    drive(loop, state_is(store, waiting, S.RUNNING), "the waiting job to start once raised")
