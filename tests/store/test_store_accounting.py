"""Exact accounting from the attempts the store recorded: GPU-hours per project, user, queue
and GPU model over a range, fractions by their share, a range clipping what it cuts, running
attempts counted up to now, idle spans apart, prices, and budgets per calendar month (UTC).
Every figure below is worked out by hand in the comment beside it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine, update

from rota.core import DeviceShare, GpuDevice, InvalidSpec, JobState, Node, Placement
from rota.core import Queue, ReplicaPlacement
from rota.core.accounting import BudgetState
from rota.scheduler import Bind, Decisions
from rota.store import NotFound, Store
from rota.store.accounting import month_bounds
from rota.store.schema import attempts
from storekit import GiB, seed, submission

S = JobState
H = 3600.0
T0 = datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp()


def two_models(store: Store) -> Store:
    """Projects p (alice) and q (bob); queues q and big; n1: 8 H100s, n2: 4 A100s."""
    seed(store)
    store.put_queue(Queue("big"))
    a100 = tuple(GpuDevice(i, "A100-40GB", 40 * GiB, uuid=f"GPU-n2-{i}") for i in range(4))
    store.upsert_nodes([Node("n2", 64_000, 512 * GiB, a100)], backend="local")
    return store


def run(store: Store, clock, sub, where: list[tuple[str, list[tuple[int, int]]]]) -> str:
    """Submit ``sub``, bind it at the clock's time to ``where`` (per replica: node and
    (index, milli) devices) and start it."""
    job = store.submit(sub)
    placement = Placement(tuple(ReplicaPlacement(node, tuple(DeviceShare(i, m, GiB)
                                                             for i, m in devices))
                                for node, devices in where))
    assert store.apply(Decisions(binds=[Bind(job, placement, "any")]), clock.t).bound == (job,)
    store.transition(job, S.RUNNING)
    return job


def end(store: Store, job: str) -> None:
    store.transition(job, S.SUCCEEDED, exit_code=0)


def rows(report) -> dict[tuple[str, ...], float]:
    return {line.key: round(line.gpu_hours, 9) for line in report.lines}


def week(store: Store, clock) -> dict[str, str]:
    """From T0: job a (alice, p, queue q) holds 2 H100s for 2 h; job b (bob, q, queue big)
    two replicas of half an A100 from T0 + 1 h, still running; job c (alice, p, big) 1 H100
    from T0 + 3 h for 1 h, requeued, then 1 A100 for 30 min from T0 + 5 h."""
    clock.t = T0
    a = run(store, clock, submission(2), [("n1", [(0, 1000), (1, 1000)])])
    clock.t = T0 + H
    b = run(store, clock, submission(0.5, user="bob", project="q", queue="big", replicas=2),
            [("n2", [(0, 500)]), ("n2", [(1, 500)])])
    clock.t = T0 + 2 * H
    end(store, a)
    clock.t = T0 + 3 * H
    c = run(store, clock, submission(1, queue="big"), [("n1", [(2, 1000)])])
    clock.t = T0 + 4 * H
    store.transition(c, S.PENDING)
    clock.t = T0 + 5 * H
    assert store.apply(Decisions(binds=[Bind(c, Placement((ReplicaPlacement(
        "n2", (DeviceShare(3, 1000, GiB),)),)), "any")]), clock.t).bound == (c,)
    clock.t = T0 + 5.5 * H
    store.transition(c, S.RUNNING)
    end(store, c)  # bound at 5 h, ended at 5.5 h: half an hour
    clock.t = T0 + 6 * H
    return {"a": a, "b": b, "c": c}


def test_gpu_hours_by_project_and_model_are_exact_with_fractions_and_running_jobs(store, clock):
    week(two_models(store), clock)
    report, currency = store.report(T0, T0 + 24 * H, ["project", "model"], now=T0 + 6 * H)
    assert rows(report) == {
        ("p", "A100-40GB"): 0.5,   # c's second attempt: 1 GPU x 0.5 h
        ("p", "H100-80GB"): 5.0,   # a: 2 GPUs x 2 h; c's first attempt: 1 GPU x 1 h
        ("q", "A100-40GB"): 5.0,   # b: 2 x 0.5 GPU x (6 h - 1 h), running: counted up to now
    }
    assert report.total.gpu_hours == pytest.approx(10.5)
    assert currency is None and report.total.cost == 0
    assert report.unpriced_models == ("A100-40GB", "H100-80GB")


def test_a_range_counts_only_what_falls_inside_it(store, clock):
    week(two_models(store), clock)
    # [T0 + 1.5 h, T0 + 5.25 h): a 0.5 h x 2 = 1; c 1 h x 1 + 0.25 h x 1; b 3.75 h x 1
    report, _ = store.report(T0 + 1.5 * H, T0 + 5.25 * H, ["project"], now=T0 + 6 * H)
    assert rows(report) == {("p",): 2.25, ("q",): 3.75}
    # the months of a year add up to the year: two halves of the day equal the day
    halves = [store.report(s, u, ["user"], now=T0 + 6 * H)[0].total.gpu_hours
              for s, u in ((T0, T0 + 3.2 * H), (T0 + 3.2 * H, T0 + 24 * H))]
    assert sum(halves) == pytest.approx(10.5)
    # a range wholly before anything ran, or in the future of a finished job, counts nothing
    assert store.report(T0 - 10 * H, T0, ["project"], now=T0 + 6 * H)[0].lines == ()


def test_by_user_and_queue_and_several_keys(store, clock):
    week(two_models(store), clock)
    now = T0 + 6 * H
    assert rows(store.report(T0, now, ["user"], now)[0]) == {("alice",): 5.5, ("bob",): 5.0}
    assert rows(store.report(T0, now, ["queue"], now)[0]) == {("big",): 6.5, ("q",): 4.0}
    assert rows(store.report(T0, now, ["queue", "user", "model"], now)[0]) == {
        ("big", "alice", "A100-40GB"): 0.5, ("big", "alice", "H100-80GB"): 1.0,
        ("big", "bob", "A100-40GB"): 5.0, ("q", "alice", "H100-80GB"): 4.0}


def test_a_running_job_counts_up_to_now_and_no_further(store, clock):
    week(two_models(store), clock)
    later = T0 + 11 * H
    # b: 2 x 0.5 GPU from T0 + 1 h; at T0 + 11 h that is 10 GPU-hours, whatever the range's end
    assert rows(store.report(T0, T0 + 30 * 24 * H, ["project"], later)[0])[("q",)] == 10.0


def test_costs_come_from_the_prices_of_each_model(store, clock):
    week(two_models(store), clock)
    store.put_prices("EUR", {"H100-80GB": 2.5, "A100-40GB": 1.2})
    report, currency = store.report(T0, T0 + 24 * H, ["project"], now=T0 + 6 * H)
    by = {line.key: line for line in report.lines}
    assert currency == "EUR"
    assert by[("p",)].cost == pytest.approx(5.0 * 2.5 + 0.5 * 1.2)  # 13.1
    assert by[("q",)].cost == pytest.approx(5.0 * 1.2)               # 6.0
    assert report.unpriced_models == () and report.total.cost == pytest.approx(19.1)
    store.put_prices("EUR", {"H100-80GB": 2.5})  # A100s without a price: counted apart
    report, _ = store.report(T0, T0 + 24 * H, ["project"], now=T0 + 6 * H)
    assert report.unpriced_models == ("A100-40GB",)
    assert report.total.unpriced_gpu_hours == pytest.approx(5.5)
    assert store.prices() == ("EUR", {"H100-80GB": 2.5})
    store.put_prices(None, {})
    assert store.prices() == (None, {})


def test_only_the_projects_asked_for_are_counted(store, clock):
    week(two_models(store), clock)
    report, _ = store.report(T0, T0 + 24 * H, ["project", "user"], T0 + 6 * H, projects=["q"])
    assert rows(report) == {("q", "bob"): 5.0}
    assert store.report(T0, T0 + 24 * H, ["project"], T0 + 6 * H, projects=[])[0].lines == ()


def test_idle_spans_are_shown_apart_clipped_like_the_rest(store, clock):
    jobs = week(two_models(store), clock)
    # b's GPUs (2 x 0.5) were idle from T0 + 2 h, extended pass after pass to T0 + 4 h
    store.note_idle({(jobs["b"], 0, T0 + 2 * H): T0 + 3 * H})
    store.note_idle({(jobs["b"], 0, T0 + 2 * H): T0 + 4 * H})
    store.note_idle({(jobs["b"], 0, T0 + 2 * H): T0 + 3.5 * H})  # never moves back
    store.note_idle({("999999", 0, T0): T0 + H})                  # a job gone: ignored
    report, _ = store.report(T0, T0 + 24 * H, ["project"], now=T0 + 6 * H)
    line = {line.key: line for line in report.lines}[("q",)]
    assert (line.gpu_hours, line.idle_gpu_hours) == pytest.approx((5.0, 2.0))
    clipped, _ = store.report(T0 + 3.5 * H, T0 + 24 * H, ["project"], now=T0 + 6 * H)
    assert clipped.lines[-1].idle_gpu_hours == pytest.approx(0.5)  # 0.5 h x 1 GPU


def test_a_placement_the_backend_chose_is_what_is_counted(store, clock):
    two_models(store)
    clock.t = T0
    job = run(store, clock, submission(1), [("n1", [(0, 1000)])])
    store.record_placement(job, Placement((ReplicaPlacement("n2", (DeviceShare(1, 1000, GiB),)),)))
    clock.t = T0 + H
    end(store, job)
    assert rows(store.report(T0, T0 + H, ["model"], T0 + H)[0]) == {("A100-40GB",): 1.0}


def test_attempts_recorded_before_models_were_stored_read_them_from_the_inventory(
        store, clock, db_url):
    two_models(store)
    clock.t = T0
    run(store, clock, submission(1), [("n2", [(2, 1000)])])
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(attempts).values(gpus=None))
    finally:
        engine.dispose()
    assert rows(store.report(T0, T0 + H, ["model"], T0 + H)[0]) == {("A100-40GB",): 1.0}


def test_a_budget_counts_ended_attempts_once_and_running_ones_up_to_now_as_the_report_does(
        store, clock):
    week(two_models(store), clock)  # in November 2026: p 5.5 GPU-hours, q 5.0 (b still runs)
    store.set_budget("p", soft=100, hard=None)
    store.set_budget("q", soft=100, hard=None)
    for now in (T0 + 6 * H, T0 + 11 * H):
        report, _ = store.report(*month_bounds(now)[:2], ["project"], now=now)
        used = {p: s.used_gpu_hours for p, s in store.budget_status(now).items()}
        assert used == pytest.approx({key[0]: v for key, v in rows(report).items()})
    assert used == pytest.approx({"p": 5.5, "q": 10.0})  # b: 2 x 0.5 GPU x 10 h by then


def test_an_attempt_over_a_months_end_counts_in_each_month_for_its_part(store, clock):
    two_models(store)
    december = datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp()
    clock.t = december - 3 * H
    job = run(store, clock, submission(2), [("n1", [(0, 1000), (1, 1000)])])
    store.set_budget("p", soft=100, hard=None)
    assert store.budget_status(december + H)["p"].used_gpu_hours == pytest.approx(2.0)  # runs
    clock.t = december + 2 * H
    end(store, job)
    assert store.budget_status(december - H / 2)["p"].used_gpu_hours == pytest.approx(6.0)
    assert store.budget_status(december + 5 * H)["p"].used_gpu_hours == pytest.approx(4.0)


def test_month_bounds_are_calendar_months_in_utc():
    start, end, name = month_bounds(datetime(2026, 12, 31, 23, 59, tzinfo=timezone.utc)
                                    .timestamp())
    assert name == "2026-12"
    assert start == datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp()
    assert end == datetime(2027, 1, 1, tzinfo=timezone.utc).timestamp()


def test_a_budget_counts_the_month_so_far_and_says_which_limit_is_reached(store, clock):
    two_models(store)
    month = datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp()
    clock.t = month - 2 * H  # 2 GPUs from two hours before the month: only November counts
    run(store, clock, submission(2), [("n1", [(0, 1000), (1, 1000)])])
    store.set_budget("p", soft=4, hard=6)
    status = store.budget_status(month + H)["p"]
    assert (status.month, status.used_gpu_hours, status.state) == ("2026-11", 2.0, BudgetState.OK)
    assert store.budget_status(month + 2 * H)["p"].state is BudgetState.SOFT   # 4 GPU-hours
    assert store.budget_status(month + 3 * H)["p"].state is BudgetState.HARD   # 6 GPU-hours
    assert store.budget_status(month + 3 * H, projects=["q"]) == {}
    store.mark_budget_warned(["p"], "2026-11")
    assert store.budgets_warned() == {"p": "2026-11"}
    store.set_budget("p", soft=None, hard=None)  # no limit at all: no budget
    assert store.budget_status(month + 3 * H) == {}


@pytest.mark.parametrize("soft, hard, field", [
    (10, 5, "soft"), (-1, None, "soft"), (None, float("nan"), "hard"),
    (None, float("inf"), "hard")])
def test_a_budget_that_makes_no_sense_is_refused_naming_the_figure(store, soft, hard, field):
    seed(store)
    with pytest.raises(InvalidSpec) as err:
        store.set_budget("p", soft, hard)
    assert err.value.field == field


def test_a_budget_of_an_unknown_project_is_not_found(store):
    with pytest.raises(NotFound):
        store.set_budget("nope", 1, 2)


def test_a_deleted_project_takes_its_budget_with_it(store):
    seed(store)
    store.set_budget("p", 1, 2)
    store.delete_project("p")
    store.create_project("p")
    assert store.budget_status(T0) == {}
