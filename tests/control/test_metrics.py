"""The control plane's metrics (``rota.control.metrics``) through the real control loop, store
and local backend: what a pass saw (jobs per queue, state and reason; quotas; GPUs allocated,
fractions by their share), what the jobs' history says (preemptions, requeues, outcomes, the
wait before a first start), and the pass's timings; read back from the text Prometheus
scrapes."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from controlkit import drive, python, state_is, submit
from rota.control import ControlLoop
from rota.control.metrics import Metrics, Reading
from rota.core import ANY_FLAVOR, FlavorQuota, JobState as S, Queue
from rota.scheduler import build_policy


def samples(metrics: Metrics) -> dict[tuple[str, tuple], float]:
    text = metrics.exposition().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def metered(store, backend, data_dir, clock, **kw) -> tuple[ControlLoop, Metrics]:
    metrics = Metrics(store, clock=clock.now, **kw)
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       metrics=metrics)
    return loop, metrics


def test_a_pass_shows_jobs_reasons_and_gpus_held_fractions_by_their_share(
        store, backend, data_dir, clock):
    loop, metrics = metered(store, backend, data_dir, clock)
    try:
        half = submit(store, python("import time; time.sleep(60)"), gpus=0.5)
        whole = submit(store, python("import time; time.sleep(60)"), gpus=3)
        big = submit(store, "true", gpus=4)  # waits: only half a GPU is free
        drive(loop, lambda: all(state_is(store, j, S.RUNNING)() for j in (half, whole)),
              "both to run")
        loop.step()
        found = samples(metrics)
        assert value(found, "rota_jobs", queue="q", state="running") == 2
        assert value(found, "rota_jobs", queue="q", state="pending") == 1
        assert value(found, "rota_pending_jobs", queue="q", reason="resources") == 1
        assert value(found, "rota_allocated_gpus", queue="q", project="p") == 3.5
        ratios = sorted(v for (name, _), v in found.items() if name == "rota_gpu_allocated_ratio")
        assert ratios == [0.5, 1.0, 1.0, 1.0]  # three whole GPUs and half of the fourth
        assert value(found, "rota_control_pass_seconds_count") == loop.passes
        assert value(found, "rota_scheduling_cycle_seconds_count") == loop.passes
        assert value(found, "rota_job_start_wait_seconds_count", queue="q") == 2
        assert big  # stays pending: counted above
    finally:
        loop.stop()


def test_quotas_show_nominal_used_and_borrowed_in_gpus(store, backend, data_dir, clock):
    store.put_queue(Queue("q", cohort="lab", quotas={ANY_FLAVOR: FlavorQuota(
        nominal={"gpu": 1000}, borrowing_limit={"gpu": 3000})}))
    store.put_queue(Queue("idle", cohort="lab", quotas={ANY_FLAVOR: FlavorQuota(nominal={"gpu": 3000})}))
    loop, metrics = metered(store, backend, data_dir, clock)
    try:
        job = submit(store, python("import time; time.sleep(60)"), gpus=2)
        drive(loop, state_is(store, job, S.RUNNING), "the borrowing job to run")
        loop.step()
        found = samples(metrics)
        assert value(found, "rota_queue_nominal_gpus", queue="q", flavor=ANY_FLAVOR) == 1
        assert value(found, "rota_queue_used_gpus", queue="q", flavor=ANY_FLAVOR) == 2
        assert value(found, "rota_queue_borrowed_gpus", queue="q", flavor=ANY_FLAVOR) == 1
        assert value(found, "rota_queue_borrowed_gpus", queue="idle", flavor=ANY_FLAVOR) == 0
    finally:
        loop.stop()


def test_history_counts_preemptions_requeues_and_outcomes(store, backend, data_dir, clock):
    loop, metrics = metered(store, backend, data_dir, clock)
    try:
        low = submit(store, python("import time; time.sleep(60)"), gpus=4, grace_s=1)
        drive(loop, state_is(store, low, S.RUNNING), "the low-priority job to run")
        high = submit(store, "true", gpus=4, priority=10)
        drive(loop, state_is(store, low, S.PREEMPTING), "its preemption")
        clock.t += 2  # its grace period is over
        drive(loop, state_is(store, high, S.SUCCEEDED), "the high-priority job to run")
        failing = submit(store, "false", gpus=0)
        drive(loop, state_is(store, failing, S.FAILED), "a job to fail")
        found = samples(metrics)
        assert value(found, "rota_preemptions_total", queue="q") == 1
        assert value(found, "rota_job_requeues_total", queue="q", end="preempted") == 1
        assert value(found, "rota_jobs_ended_total", queue="q", state="succeeded") == 1
        assert value(found, "rota_jobs_ended_total", queue="q", state="failed") == 1
        # the preempted job's second start is not a first start
        starts = value(found, "rota_job_start_wait_seconds_count", queue="q")
        drive(loop, state_is(store, low, S.RUNNING), "the preempted job to run again")
        assert value(samples(metrics), "rota_job_start_wait_seconds_count", queue="q") == starts
    finally:
        loop.stop()


def test_counting_starts_with_the_control_plane(store, backend, data_dir, clock):
    """A restarted control plane does not count the history of the one before (counters start
    at 0 again, as Prometheus expects of a restarted target)."""
    loop, _ = metered(store, backend, data_dir, clock)
    job = submit(store, "true", gpus=0)
    drive(loop, state_is(store, job, S.SUCCEEDED), "a job to end")
    loop.stop()
    again, metrics = metered(store, backend, data_dir, clock)
    try:
        again.step()
        assert value(samples(metrics), "rota_jobs_ended_total", queue="q",
                     state="succeeded") is None
    finally:
        again.stop()


def test_gpu_readings_and_the_lease(store, backend, data_dir, clock):
    readings = [Reading("n1", 0, 87, 1024), Reading("n1", 1, None, None)]
    loop, metrics = metered(store, backend, data_dir, clock, readings=lambda: readings,
                            lease=lambda: clock.now() + 12)
    try:
        loop.step()
        found = samples(metrics)
        assert value(found, "rota_gpu_utilization_ratio", node="n1", gpu="0") == 0.87
        assert value(found, "rota_gpu_memory_used_bytes", node="n1", gpu="0") == 1024 ** 3
        assert value(found, "rota_gpu_utilization_ratio", node="n1", gpu="1") is None
        assert value(found, "rota_lease_held") == 1
        assert value(found, "rota_lease_expiry_seconds") == 12
    finally:
        loop.stop()


def test_budgets_show_what_a_project_used_its_limits_and_whether_it_is_past_one(
        store, backend, data_dir, clock):
    store.set_budget("p", soft=0.001, hard=1.0)
    loop, metrics = metered(store, backend, data_dir, clock)
    try:
        job = submit(store, python("import time; time.sleep(60)"), gpus=2)
        drive(loop, state_is(store, job, S.RUNNING), "the job to run")
        clock.t += 36  # two GPUs for 36 s: 0.02 GPU-hours, past the soft limit only
        loop.step()
        found = samples(metrics)
        assert abs(value(found, "rota_project_month_gpu_hours", project="p") - 0.02) < 1e-6
        assert value(found, "rota_project_budget_gpu_hours", project="p", limit="soft") == 0.001
        assert value(found, "rota_project_budget_gpu_hours", project="p", limit="hard") == 1.0
        assert value(found, "rota_project_over_budget", project="p") == 1
    finally:
        loop.stop()
