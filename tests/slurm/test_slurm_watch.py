"""The cheap looks at rota's own Slurm jobs, against the real Slurm of tests/slurm/fixture:
``squeue`` by name in brief (``records.squeue_named``), releases in batches
(``release.Releaser``) and the watcher that wakes the control loop when a job starts or ends
(``watch.SlurmWatcher``, and ``SlurmBackend.watch``)."""

from __future__ import annotations

import threading

import pytest

from rota.backends.base import ReplicaState as R
from rota.backends.slurm.commands import SlurmCommands
from rota.backends.slurm.records import (
    SlurmOutputError, parse_squeue_named, squeue_named,
)
from rota.backends.slurm.release import Releaser, release
from rota.backends.slurm.reservations import TIME_FORMAT
from rota.backends.slurm.watch import SlurmWatcher
from slurmkit import on, rota_job, run_spec, slurm_backend, status_of, wait

pytestmark = pytest.mark.usefixtures("leftovers")


def held(slurm, name: str, command: str = "sleep 2", comment: str = "") -> int:
    return slurm.sbatch(["sbatch", "--parsable", "--hold", f"--job-name={name}",
                         f"--comment={comment or name}", "--output=/dev/null",
                         "--wrap", command])


@pytest.fixture
def commands(slurm_env) -> SlurmCommands:
    return SlurmCommands(slurm_env["SLURM_CONF"])


def test_squeue_by_name_lists_only_those_jobs_in_brief_and_agrees_with_the_json(
        slurm, commands, job_id):
    mine = held(slurm, f"rota-{job_id}-0", comment=f"rota:{job_id}|x")
    other = held(slurm, f"rota-{job_id}-1")
    found = parse_squeue_named(commands.run(squeue_named((f"rota-{job_id}-0",)),
                                            extra_env=TIME_FORMAT))
    assert [j.id for j in found] == [mine]  # not `other`, not the rest of the cluster
    [job] = found
    assert (job.state, job.reason, job.comment) == ("PENDING", "JobHeldUser", f"rota:{job_id}|x")
    assert job.start_time is None and job.exit is None and job.allocations == ()
    release(commands, [mine, other])
    wait(lambda: slurm.job(mine) is not None and slurm.job(mine).phase.ended, "the job to end")
    [done] = parse_squeue_named(commands.run(squeue_named((f"rota-{job_id}-0",)),
                                             extra_env=TIME_FORMAT))
    full = slurm.job(mine)
    assert (done.state, done.nodes) == (full.state, full.nodes) == ("COMPLETED", full.nodes)
    assert done.start_time == full.start_time and done.end_time == full.end_time


def test_a_squeue_line_that_cannot_be_read_is_an_error_naming_the_line():
    assert parse_squeue_named("") == ()
    with pytest.raises(SlurmOutputError, match="squeue line 2: expected id"):
        parse_squeue_named("7|RUNNING|None|1|0|node1|rota-a-0|rota:a\n7|RUNNING")
    with pytest.raises(SlurmOutputError, match="squeue line 1 state"):
        parse_squeue_named("7|SLEEPY|None|1|0|node1|rota-a-0|rota:a")


def test_the_releaser_releases_a_pass_in_one_command_even_when_one_job_is_gone(
        slurm, commands, job_id):
    ids = [held(slurm, f"rota-{job_id}-{k}") for k in range(3)]
    slurm.run(["scancel", str(ids[1])])  # cancelled before its release: the others still go
    runs: list[tuple[str, ...]] = []

    class Counting(SlurmCommands):
        def run(self, argv, *args, **kwargs):
            runs.append(tuple(argv))
            return super().run(argv, *args, **kwargs)

    releaser = Releaser(Counting(commands.slurm_conf), window_s=0.5)
    releaser.start()
    for i in ids:
        releaser.put(i)
    assert releaser.queued() <= set(ids)
    for i in (ids[0], ids[2]):
        wait(lambda: slurm.job(i).reason != "JobHeldUser", f"job {i} to be released")
    releaser.stop()
    assert runs == [("scontrol", "release", ",".join(map(str, sorted(ids))))]


def test_stopping_the_releaser_releases_what_it_still_holds(slurm, commands, job_id):
    job = held(slurm, f"rota-{job_id}-0")
    releaser = Releaser(commands, window_s=60)
    releaser.start()
    releaser.put(job)
    releaser.stop()
    assert slurm.job(job).reason != "JobHeldUser"


def test_the_watcher_wakes_when_a_tracked_job_starts_and_when_it_ends(slurm, commands, job_id):
    job = held(slurm, f"rota-{job_id}-0", command="sleep 3")
    tracked: list[int] = []
    wakes = threading.Semaphore(0)
    watcher = SlurmWatcher(commands, lambda: list(tracked), wakes.release, period_s=0.2)
    watcher.start()
    try:
        assert not wakes.acquire(timeout=1)  # nothing tracked: not a word
        tracked.append(job)
        assert wakes.acquire(timeout=10)     # first seen (pending)
        assert not wakes.acquire(timeout=1)  # held: no change
        release(commands, [job])
        assert wakes.acquire(timeout=30)     # it started
        wait(lambda: slurm.job(job).phase.ended, "the job to end")
        assert wakes.acquire(timeout=10)     # it ended
        assert watcher.states([job])[job] == "COMPLETED"
    finally:
        watcher.stop()


def test_a_watched_backend_wakes_the_loop_when_its_launch_ends_and_then_forgets_it(
        slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    wakes = threading.Semaphore(0)
    backend.watch(lambda **_: wakes.release())  # inventory=True too: work outside rota
    try:
        handle = backend.launch(rota_job(job_id), on(("node2", 1)),
                                run_spec("sleep 2", tmp_path), attempt=0)
        assert backend.tracked() == [int(handle.launch_id)]
        # the releaser let it start and the watcher saw it end, without a poll in between
        wait(lambda: (j := slurm.job(int(handle.launch_id))) is not None and j.phase.ended,
             "the job to end")
        assert wakes.acquire(timeout=10)
        done = status_of(backend, handle, lambda s: s.state is not R.RUNNING, "its end")
        assert done.succeeded and backend.tracked() == []
    finally:
        backend.unwatch()


def test_the_watcher_tells_when_a_job_outside_rota_starts_and_ends(slurm, commands, job_id):
    """A plain job taking GPUs is news for the inventory at once: ``on_foreign`` is called
    at the first answer and whenever the cluster's jobs that hold resources, less rota's
    tracked ones, change."""
    foreign = threading.Semaphore(0)
    watcher = SlurmWatcher(commands, lambda: [], lambda: None, period_s=0.2,
                           on_foreign=foreign.release)
    watcher.start()
    try:
        wait(lambda: watcher._others is not None, "the first look at the cluster")
        assert foreign.acquire(timeout=0)  # the first answer is news: nothing was read yet
        while foreign.acquire(timeout=0.5):  # other tests' jobs ending meanwhile
            pass
        plain = held(slurm, f"plain-{job_id}", command="sleep 3")
        release(commands, [plain])
        wait(lambda: str(plain) in watcher.holding(), "the plain job to run")
        assert foreign.acquire(timeout=10)    # it started
        wait(lambda: str(plain) in watcher._others, "the watcher to count it")  # type: ignore
        wait(lambda: slurm.job(plain).phase.ended and str(plain) not in watcher.holding(),
             "the plain job to end")
        assert foreign.acquire(timeout=10)    # it ended
    finally:
        watcher.stop()


def test_rotas_own_tracked_jobs_are_not_news_for_the_inventory(slurm, commands, job_id):
    mine = held(slurm, f"rota-{job_id}-0", command="sleep 30")
    watcher = SlurmWatcher(commands, lambda: [mine], lambda: None, on_foreign=lambda: None)
    release(commands, [mine])
    wait(lambda: str(mine) in watcher.holding(), "rota's job to run")
    watcher._look_at_others()
    assert watcher._others is not None and str(mine) not in watcher._others
    slurm.run(["scancel", str(mine)])


def test_a_look_that_fails_does_not_end_the_watching(slurm, commands):
    """An error other than Slurm's command failing (here, the list of tracked jobs) is logged
    and the next period looks again."""
    calls: list[int] = []

    def tracked() -> list[int]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("not this time")
        return []
    looked = threading.Semaphore(0)
    watcher = SlurmWatcher(commands, tracked, lambda: None, period_s=0.1,
                           on_foreign=looked.release)
    watcher.start()
    try:
        wait(lambda: len(calls) >= 3, "the watcher to look again after the failure")
        assert looked.acquire(timeout=10)
    finally:
        watcher.stop()
