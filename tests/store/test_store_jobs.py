"""Jobs in the store: submit (durable, validated), list with filters and keyset pagination,
cancel, backend-reported transitions through the state table, and events."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rota.core import (
    DeviceShare, GpuRequest, IllegalTransition, InvalidSpec, JobState, Placement,
    Queue, ReplicaPlacement, ReplicaRequest,
)
from rota.scheduler import Bind, Decisions
from rota.store import Conflict, JobFilter, NotFound, Store, Submission
from storekit import seed, submission

S = JobState


def bind(store: Store, job_id: str, now: float = 5.0) -> None:
    placement = Placement((ReplicaPlacement("n1", (DeviceShare(0, 1000, 80 * 1024),)),))
    result = store.apply(Decisions(binds=[Bind(job_id, placement, "any")]), now)
    assert result.bound == (job_id,)


def running(store: Store) -> str:
    job_id = store.submit(submission(1))
    bind(store, job_id)
    store.transition(job_id, S.RUNNING, backend_handle={"pid": 4242})
    return job_id


def test_a_submitted_job_is_durable_pending_and_explained(store, db_url, clock):
    seed(store)
    sub = Submission("p", "q", "alice", ReplicaRequest(4000, 16_384, GpuRequest(1, 500, 20_480, ("*H100*",))),
                     name="train", replicas=1, priority=7, walltime_s=3600, preemptible=False,
                     grace_s=60, resource_group="a", selector={"zone": "a"}, labels={"team": "x"},
                     run={"entrypoint": ["python", "train.py"], "env": {"SEED": "1"}})
    job_id = store.submit(sub)
    with Store.open(db_url) as other:  # a second process sees it: it was committed
        rec = other.get_job(job_id)
    assert rec.state is S.PENDING and rec.name == "train" and rec.version == 1
    assert rec.job.request == sub.request and rec.job.priority == 7
    assert (rec.job.walltime_s, rec.job.preemptible, rec.job.grace_s) == (3600, False, 60)
    assert rec.job.selector == (("zone", "a"),) and rec.job.resource_group == "a"
    assert rec.job.submit_time == clock.t and rec.run == dict(sub.run)
    assert Submission.from_job(rec.job, name="train", run=rec.run) == sub
    [event] = store.events(job_id)
    assert event.kind == "submitted" and event.time == clock.t


@pytest.mark.parametrize("change, field", [
    ({"project": "nope"}, "project"),
    ({"queue": "nope"}, "queue"),
    ({"user": "nobody"}, "user"),
    ({"name": "bad name!"}, "name"),
    ({"replicas": 0}, "replicas"),
    ({"walltime_s": -5.0}, "walltime"),
    ({"run": {"when": object()}}, "run"),
], ids=["project", "queue", "user", "name", "replicas", "walltime", "run-not-json"])
def test_bad_submissions_are_refused_naming_the_field(store, change, field):
    seed(store)
    with pytest.raises(InvalidSpec) as err:
        store.submit(replace(submission(1), **change))
    assert err.value.field == field
    assert store.list_jobs().items == ()


def _ids(page) -> list[str]:
    return [r.id for r in page.items]


def test_listing_filters_by_project_state_user_and_queue(store):
    seed(store, members={"alice": ["p"], "bob": ["q", "p"]})
    store.put_queue(Queue("other"))
    a1 = store.submit(submission(1))
    b1 = store.submit(submission(1, user="bob", project="q"))
    b2 = store.submit(Submission("p", "other", "bob"))
    store.request_cancel(a1, by="alice")
    cases = {
        "everything": (JobFilter(), [a1, b1, b2]),
        "project p": (JobFilter(projects=frozenset({"p"})), [a1, b2]),
        "projects p,q": (JobFilter(projects=frozenset({"p", "q"})), [a1, b1, b2]),
        "pending": (JobFilter(states=frozenset({S.PENDING})), [b1, b2]),
        "cancelled or failed": (JobFilter(states=frozenset({S.CANCELLED, S.FAILED})), [a1]),
        "user bob": (JobFilter(user="bob"), [b1, b2]),
        "queue other": (JobFilter(queue="other"), [b2]),
        "bob, pending, in p": (JobFilter(projects=frozenset({"p"}), states=frozenset({S.PENDING}),
                                         user="bob"), [b2]),
        "no project": (JobFilter(projects=frozenset()), []),
    }
    for name, (where, expected) in cases.items():
        assert _ids(store.list_jobs(where)) == expected, name


def test_keyset_pagination_visits_every_job_once_in_both_orders(store):
    seed(store)
    ids = [store.submit(submission(1)) for _ in range(25)]
    for newest_first, expected in ((False, ids), (True, ids[::-1])):
        seen, after, pages = [], None, 0
        while True:
            page = store.list_jobs(limit=10, after=after, newest_first=newest_first)
            seen += _ids(page)
            pages += 1
            if page.next_after is None:
                break
            after = page.next_after
        assert seen == expected and pages == 3  # 10 + 10 + 5


def test_a_page_is_stable_when_jobs_arrive_between_pages(store):
    seed(store)
    first = [store.submit(submission(1)) for _ in range(3)]
    page = store.list_jobs(limit=2)
    late = store.submit(submission(1))
    assert _ids(store.list_jobs(limit=2, after=page.next_after)) == [first[2], late]


@pytest.mark.parametrize("kwargs, field", [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"after": "abc"}, "after"),
])
def test_bad_list_arguments_name_the_field(store, kwargs, field):
    with pytest.raises(InvalidSpec) as err:
        store.list_jobs(**kwargs)
    assert err.value.field == field


def test_cancelling_a_pending_job_ends_it_at_once(store):
    seed(store)
    job_id = store.submit(submission(1))
    rec = store.request_cancel(job_id, by="alice")
    assert rec.state is S.CANCELLED and rec.finished_at is not None
    assert "alice" in rec.reason
    with pytest.raises(IllegalTransition):
        store.request_cancel(job_id, by="alice")


def test_cancelling_a_running_job_flags_it_for_the_control_loop(store):
    seed(store)
    job_id = running(store)
    rec = store.request_cancel(job_id, by="alice")
    assert rec.state is S.RUNNING and rec.cancel_requested
    assert store.request_cancel(job_id, by="alice").version == rec.version  # asked once
    assert store.transition(job_id, S.CANCELLED, exit_code=-15).state is S.CANCELLED


def test_a_requeue_of_a_job_whose_cancel_was_requested_cancels_it(store):
    seed(store)
    job_id = running(store)
    store.request_cancel(job_id, by="alice")
    assert store.transition(job_id, S.PENDING).state is S.CANCELLED


def test_backend_transitions_record_exit_codes_handles_and_requeues(store, clock):
    seed(store)
    job_id = running(store)
    rec = store.get_job(job_id)
    assert rec.state is S.RUNNING and rec.backend_handle == {"pid": 4242}
    clock.advance(10)
    rec = store.transition(job_id, S.PENDING, reason="node lost")
    assert rec.state is S.PENDING and rec.attempts == 1
    assert rec.job.placement is None and rec.job.flavor is None and rec.job.started_at is None
    bind(store, job_id)
    store.transition(job_id, S.RUNNING)
    rec = store.transition(job_id, S.FAILED, exit_code=3, reason="exit 3")
    assert (rec.state, rec.exit_code, rec.reason, rec.finished_at) == (S.FAILED, 3, "exit 3", clock.t)
    kinds = [(e.data.get("from"), e.data.get("to")) for e in store.events(job_id)]
    assert kinds == [(None, None), ("pending", "scheduled"), ("scheduled", "running"),
                     ("running", "pending"), ("pending", "scheduled"), ("scheduled", "running"),
                     ("running", "failed")]
    assert rec.version == len(kinds)


def test_where_the_backend_put_a_job_replaces_its_placement_and_is_counted(store, clock):
    seed(store, gpus=4)
    job_id = running(store)                      # placed on GPU 0 of n1
    landed = Placement((ReplicaPlacement("n1", (DeviceShare(2, 1000, 80 * 1024),)),))
    clock.advance(3)
    rec = store.record_placement(job_id, landed)
    assert rec.job.placement == landed and rec.state is S.RUNNING
    [event] = store.events(job_id)[-1:]
    assert (event.kind, event.message) == ("placed", "runs on n1 GPU 2")
    assert rec.version == len(store.events(job_id))
    [held] = [j for j in store.snapshot(clock.t).jobs if j.id == job_id]
    assert held.placement == landed              # the scheduler counts GPU 2, not GPU 0


def test_a_placement_is_recorded_only_for_a_job_holding_resources_and_whole(store):
    seed(store)
    job_id = running(store)
    two = Placement(tuple(ReplicaPlacement("n1", (DeviceShare(i, 1000, 1),)) for i in (1, 2)))
    with pytest.raises(InvalidSpec, match="has 2 replicas"):
        store.record_placement(job_id, two)
    store.transition(job_id, S.SUCCEEDED)
    one = Placement((ReplicaPlacement("n1", (DeviceShare(1, 1000, 1),)),))
    with pytest.raises(IllegalTransition, match="holds no resources"):
        store.record_placement(job_id, one)
    with pytest.raises(NotFound):
        store.record_placement("999", one)


@pytest.mark.parametrize("path, illegal", [
    ([], S.RUNNING),                          # pending cannot run before it is bound
    ([], S.SUCCEEDED),
    ([], S.PREEMPTING),
    (["bind", S.RUNNING, S.SUCCEEDED], S.RUNNING),   # terminal stays terminal
    (["bind", S.RUNNING, S.FAILED], S.PENDING),
    (["bind", S.RUNNING], S.SCHEDULED),
], ids=["pending-running", "pending-succeeded", "pending-preempting", "succeeded-running",
        "failed-pending", "running-scheduled"])
def test_illegal_transitions_are_refused_and_change_nothing(store, path, illegal):
    seed(store)
    job_id = store.submit(submission(1))
    for step in path:
        bind(store, job_id) if step == "bind" else store.transition(job_id, step)
    before = store.get_job(job_id)
    with pytest.raises(IllegalTransition):
        store.transition(job_id, illegal)
    after = store.get_job(job_id)
    assert after == before and len(store.events(job_id)) == before.version


def test_a_stale_expected_version_is_a_conflict(store):
    seed(store)
    job_id = running(store)
    version = store.get_job(job_id).version
    store.request_cancel(job_id, by="alice")
    with pytest.raises(Conflict):
        store.transition(job_id, S.SUCCEEDED, expected_version=version)
    assert store.transition(job_id, S.SUCCEEDED, expected_version=version + 1).state is S.SUCCEEDED


@pytest.mark.parametrize("job_id", ["999", "abc", "-1", ""])
def test_unknown_jobs_are_not_found(store, job_id):
    for call in (lambda: store.get_job(job_id), lambda: store.events(job_id),
                 lambda: store.request_cancel(job_id, by="x"),
                 lambda: store.transition(job_id, S.RUNNING)):
        with pytest.raises(NotFound):
            call()


def test_events_page_after_an_id(store):
    seed(store)
    job_id = running(store)
    first, *rest = store.events(job_id)
    assert store.events(job_id, after=first.id) == rest
    assert store.events(job_id, after=first.id, limit=1) == rest[:1]


def brief_of(rec, store: Store | None = None) -> list:
    """A job's brief view as it was made in Python before the database wrote it: the values
    of ``JobRecord`` in the order of ``BRIEF_COLUMNS``; its GPU-seconds from its attempts in
    ``store`` as ``rota.store.accounting`` counts them (held milli-GPUs from bound to ended,
    or to the store's now)."""
    request, gpu = rec.job.request, rec.job.request.gpu
    placement = None if rec.job.placement is None else [
        {"node": r.node, "devices": [{"index": d.index, "milli": d.milli,
                                      "memory_mib": d.memory_mib} for d in r.devices]}
        for r in rec.job.placement.replicas]
    return [rec.id, rec.name, rec.job.project, rec.job.user, rec.job.queue, str(rec.job.state),
            rec.job.priority, rec.job.replicas, request.cpu_milli, request.memory_mib, gpu.count,
            gpu.share, gpu.memory_mib, placement, rec.job.submit_time, rec.exit_code, rec.reason,
            [str(r.code) for r in rec.wait_reasons], rec.array_id, rec.array_index,
            rec.array_limit, rec.job.started_at, rec.finished_at, rec.job.walltime_s,
            rec.estimated_start, None if store is None else _gpu_seconds(store, rec.id),
            None if store is None else _max_rss(store, rec.id)]


def _max_rss(store: Store, job_id: str) -> int | None:
    known = [a.max_rss_kib for a in store.attempts(job_id) if a.max_rss_kib is not None]
    return known[-1] if known else None


def _gpu_seconds(store: Store, job_id: str) -> float | None:
    from rota.store.accounting import held_milli
    tried = store.attempts(job_id)
    if not tried:
        return None
    return sum(held_milli(None, a.placement) * max((a.ended_at if a.ended_at is not None
                                                     else store.clock()) - a.bound_at, 0)
               for a in tried) / 1000


def briefs_of(store: Store, **asked) -> tuple[list[list], str | None]:
    text, after = store.brief_page(**asked)
    return json.loads(text), after


def test_brief_views_are_written_by_either_database_as_python_made_them(store, clock):
    """``brief_page``: the values ``rota ps`` shows, as JSON the database writes (the request's
    numbers from the spec, a placement's devices named, the wait reasons' codes; exact times,
    any text), newest first, filtered and paged as ``list_jobs`` is."""
    from builders import job
    from rota.core import Reason, ReasonCode
    from rota.scheduler import Wait
    from rota.store.briefs import BRIEF_COLUMNS
    seed(store)
    clock.t = 1_764_230_400.123_456_7  # seventeen significant digits
    half = store.submit(Submission.from_job(job("x").gpus(0.5, memory_gib=20).cpu(2)
                                            .user("alice").project("p").build(), name="half"))
    clock.advance(0.1)
    placed = running(store)
    gang = store.submit(submission(0, replicas=2, name="gang"))
    store.apply(Decisions(binds=[Bind(gang, Placement((
        ReplicaPlacement("n1", ()), ReplicaPlacement("n1", (DeviceShare(3, 250, None),)))),
        "any")]), 6.0)
    waiting = store.submit(submission(1, name="waits"))
    store.apply(Decisions(waits=[Wait(waiting, (
        Reason(ReasonCode("resources"), "gpu", 1, 0, 8),
        Reason(ReasonCode("quota"), detail='"quoted" \\ ünïcode ✓')), 1_764_230_500.5)]), 7.0)
    failed = store.submit(submission(0, name="failed"))
    store.transition(failed, S.CANCELLED, reason='stopped: "why" \\ ünïcode ✓\ttab')
    ended = store.submit(submission(0, name="ended"))  # two attempts: the last's peak memory
    for peak, end in ((2048, S.PENDING), (None, S.PENDING), (3 * 1024 * 1024, S.FAILED)):
        bind(store, ended)
        store.transition(ended, S.RUNNING)
        store.transition(ended, end, max_rss_kib=peak)
    tasks = store.submit_array([submission(0, name="arr") for _ in range(3)])
    other = store.submit(submission(0, user="bob", project="q"))
    items, after = briefs_of(store, where=JobFilter(projects=frozenset({"p"})), limit=20)
    mine = [r.id for r in tasks][::-1] + [ended, failed, waiting, gang, placed, half]
    assert after is None and [i[0] for i in items] == mine
    made = [brief_of(store.get_job(i), store) for i in mine]
    gpu_seconds = BRIEF_COLUMNS.index("gpu_seconds")
    assert [i[:gpu_seconds] + i[gpu_seconds + 1:] for i in items] == \
        [m[:gpu_seconds] + m[gpu_seconds + 1:] for m in made]
    # GPU-seconds: the database's sum, to its fifteen significant digits
    assert [i[gpu_seconds] for i in items] == [
        None if m[gpu_seconds] is None else pytest.approx(m[gpu_seconds]) for m in made]
    assert all(len(i) == len(BRIEF_COLUMNS) for i in items)
    by_id = {i[0]: dict(zip(BRIEF_COLUMNS, i)) for i in items}
    assert by_id[half]["submit_time"] == 1_764_230_400.123_456_7
    assert by_id[half]["gpu_share"] == 500 and by_id[half]["gpu_memory_mib"] == 20 * 1024
    assert by_id[placed]["placement"] == [{"node": "n1", "devices": [
        {"index": 0, "milli": 1000, "memory_mib": 80 * 1024}]}]
    assert by_id[gang]["placement"][0] == {"node": "n1", "devices": []}
    assert by_id[waiting]["wait_codes"] == ["resources", "quota"]
    assert "ünïcode ✓\t" in by_id[failed]["reason"] and by_id[placed]["wait_codes"] == []
    assert by_id[tasks[0].id]["array_id"] == tasks[0].id
    assert by_id[waiting]["estimated_start"] == 1_764_230_500.5
    assert by_id[placed]["started_at"] is not None and by_id[half]["started_at"] is None
    # one GPU held since it was bound, up to now: the GPU-seconds rota usage counts
    bound_at = store.attempts(placed)[0].bound_at
    assert by_id[placed]["gpu_seconds"] == pytest.approx(store.clock() - bound_at)
    assert by_id[half]["gpu_seconds"] is None
    assert by_id[ended]["max_rss_kib"] == 3 * 1024 * 1024 and by_id[placed]["max_rss_kib"] is None
    assert [a.max_rss_kib for a in store.attempts(ended)] == [2048, None, 3 * 1024 * 1024]
    first, after = briefs_of(store, limit=1)
    assert [r[0] for r in first] == [other] and after == other
    rest, end = briefs_of(store, limit=2, after=after)
    assert [r[0] for r in rest] == mine[:2] and end == mine[1]
    rest, end = briefs_of(store, limit=len(mine), after=after)
    assert [r[0] for r in rest] == mine and end is None
    assert briefs_of(store, where=JobFilter(states=frozenset({S.SUCCEEDED}))) == ([], None)
    with pytest.raises(InvalidSpec):
        store.brief_page(limit=10_001)
    for some in (("id",), ("id", "gpu_share", "placement", "wait_codes"), ("cpu_milli", "reason")):
        picked, _ = briefs_of(store, limit=20, columns=some)
        at = [BRIEF_COLUMNS.index(c) for c in some]
        assert picked == [[full[k] for k in at] for full in briefs_of(store, limit=20)[0]]


def test_eligibility_facts_are_those_of_the_pending_jobs_something_may_keep_back(store, clock):
    """Held, not before a time ahead, with dependencies, a task of an array with a limit: in
    the facts; a plain pending job (its dependencies stored as JSON null) and a running one
    are not, on either database."""
    seed(store)
    plain = store.submit(submission(1))
    held = store.submit(submission(1))
    store.hold(held, "wait for me", by="alice")
    later = store.submit(replace(submission(1), start_at=clock.t + 60))
    after = store.submit(replace(submission(1), depends=(("after_ok", plain),)))
    tasks = store.submit_array([replace(submission(1), array_limit=1) for _ in range(2)])
    placed = running(store)
    facts = store.eligibility_facts(clock.t)
    assert set(facts.pending) == {held, later, after, *(t.id for t in tasks)}
    assert not {plain, placed} & set(facts.pending)
    assert facts.pending[after].depends == (("after_ok", plain),)
    assert facts.states == {plain: S.PENDING}
