"""No double launch on Slurm: attempt ``n`` of a job runs at most once, whatever point a control
plane is killed at while launching it, against the real Slurm of tests/slurm/fixture.

A control plane in a subprocess launches a gang of two and kills itself with SIGKILL before one
step of the launch: before ``sbatch`` (after ``submit.json``), before ``handle.json`` (the Slurm
job exists, held), before the release, or before the handle reaches the caller (the store);
or while ``sbatch`` itself still runs (an ``sbatch`` slowed down by a wrapper of that name on
its ``PATH``, which outlives the dead plane). A fresh backend over the same data directory then
launches the same attempt. Each replica appends its rank to a file in the working directory
when it starts, so that a second run would show; and Slurm must hold exactly one job that ran
under the attempt's name.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rota.backends.base import ReplicaState as R
from rota.backends.slurm.attempts import AttemptFiles, instance
from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue
from slurmkit import on, rota_job, run_spec, slurm_backend, status_of, wait

pytestmark = pytest.mark.usefixtures("leftovers")
RUNNER = 'echo "$ROTA_REPLICA_RANK" >> runs; while [ ! -e go ]; do sleep 0.2; done'
PLACEMENT = on(("node1", 2), ("node2", 2))

DYING_PLANE = """
import os, signal, sys, threading, time
sys.path.insert(0, sys.argv[5])
from slurmkit import on, rota_job, run_spec, slurm_backend
from rota.backends.slurm.backend import SlurmBackend

data_dir, workdir, where, job_id = sys.argv[1:5]

class Dying(SlurmBackend):
    def before(self, step, files):
        if step == where:
            os.kill(os.getpid(), signal.SIGKILL)
        if where == "during-sbatch" and step == "sbatch":  # die while sbatch runs
            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGKILL)).start()

backend = Dying(data_dir, slurm_backend(data_dir).config)
backend.launch(rota_job(job_id, replicas=2), on(("node1", 2), ("node2", 2)),
               run_spec(sys.argv[6], workdir), attempt=0)
"""
SLOW_SBATCH = '#!/bin/sh\nsleep 3\nexec /usr/bin/sbatch "$@"\n'


def die_launching(data_dir: Path, workdir: Path, where: str, job_id: str,
                  slurm_env: dict[str, str], path_first: Path | None = None) -> None:
    env = dict(slurm_env)
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    plane = subprocess.run([sys.executable, "-c", DYING_PLANE, str(data_dir), str(workdir),
                            where, job_id, str(Path(__file__).parent), RUNNER], env=env,
                           timeout=120)
    assert plane.returncode == -signal.SIGKILL


def runs(workdir: Path) -> list[str]:
    path = workdir / "runs"
    return sorted(path.read_text().split()) if path.exists() else []


def slurm_jobs_named(slurm, name: str):
    return [j for j in parse_squeue(slurm.run(SQUEUE_JOBS)) if j.name == name]


def finish_and_count(slurm, backend, handle, workdir: Path, job_id: str) -> None:
    """Let the attempt run to its end; it ran once, as one Slurm job."""
    wait(lambda: len(runs(workdir)) == 2, "both replicas to run")
    (workdir / "go").write_text("")
    assert status_of(backend, handle, lambda s: s.state is not R.RUNNING,
                     "the attempt to end").succeeded
    assert runs(workdir) == ["0", "1"]
    started = [j for j in slurm_jobs_named(slurm, f"rota-{job_id}-0") if j.nodes]
    assert [j.id for j in started] == [int(handle.launch_id)]


@pytest.mark.parametrize("where", ["save", "release", "return"])
def test_a_plane_killed_after_sbatch_is_recovered_and_nothing_runs_twice(
        slurm, slurm_env, data_dir, tmp_path, job_id, where):
    die_launching(data_dir, tmp_path, where, job_id, slurm_env)
    backend = slurm_backend(data_dir)
    handle = backend.recover(rota_job(job_id, replicas=2), PLACEMENT, attempt=0)
    assert handle is not None and handle.attempt == 0
    again = backend.launch(rota_job(job_id, replicas=2), PLACEMENT,
                           run_spec(RUNNER, tmp_path), attempt=0)
    assert again == handle
    finish_and_count(slurm, backend, handle, tmp_path, job_id)


def test_a_plane_killed_before_sbatch_left_nothing_to_recover_and_launches_once(
        slurm, slurm_env, data_dir, tmp_path, job_id):
    die_launching(data_dir, tmp_path, "sbatch", job_id, slurm_env)
    assert AttemptFiles.of(data_dir, job_id, 0).submitted
    backend = slurm_backend(data_dir)
    assert backend.recover(rota_job(job_id, replicas=2), PLACEMENT, attempt=0) is None
    handle = backend.launch(rota_job(job_id, replicas=2), PLACEMENT, run_spec(RUNNER, tmp_path),
                            attempt=0)
    finish_and_count(slurm, backend, handle, tmp_path, job_id)


def test_an_sbatch_that_outlives_its_plane_is_waited_for_and_its_job_adopted(
        slurm, slurm_env, data_dir, tmp_path, job_id):
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    (wrapper / "sbatch").write_text(SLOW_SBATCH)
    (wrapper / "sbatch").chmod(0o755)
    (tmp_path / "work").mkdir()
    die_launching(data_dir, tmp_path / "work", "during-sbatch", job_id, slurm_env, wrapper)
    assert slurm_jobs_named(slurm, f"rota-{job_id}-0") == []   # the sbatch is still sleeping
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id, replicas=2), PLACEMENT,
                            run_spec(RUNNER, tmp_path / "work"), attempt=0)
    [only] = slurm_jobs_named(slurm, f"rota-{job_id}-0")
    assert int(handle.launch_id) == only.id                     # the dead plane's job
    finish_and_count(slurm, backend, handle, tmp_path / "work", job_id)


def test_a_second_slurm_job_of_an_attempt_is_cancelled_before_it_ever_runs(
        slurm, slurm_env, data_dir, tmp_path, job_id):
    """Two held jobs of one attempt (an sbatch whose answer a crash lost, then a late one):
    the first is adopted, the other cancelled without running."""
    die_launching(data_dir, tmp_path, "save", job_id, slurm_env)
    [first] = slurm_jobs_named(slurm, f"rota-{job_id}-0")
    late = slurm.sbatch(["sbatch", "--parsable", "--hold", f"--job-name=rota-{job_id}-0",
                         f"--comment=rota:{job_id}@{instance(data_dir)}", "--output=/dev/null",
                         f"--chdir={tmp_path}", "--wrap", RUNNER])
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id, replicas=2), PLACEMENT, run_spec(RUNNER, tmp_path),
                            attempt=0)
    assert int(handle.launch_id) == first.id
    wait(lambda: (j := slurm.job(late)) is not None and j.phase.ended, "the late job's cancel")
    assert slurm.job(late).state == "CANCELLED" and not slurm.job(late).nodes
    finish_and_count(slurm, backend, handle, tmp_path, job_id)


def test_a_late_duplicate_seen_while_polling_is_cancelled(slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id, replicas=2), PLACEMENT, run_spec(RUNNER, tmp_path),
                            attempt=0)
    late = slurm.sbatch(["sbatch", "--parsable", "--hold", f"--job-name=rota-{job_id}-0",
                         f"--comment=rota:{job_id}@{backend.instance}", "--output=/dev/null",
                         f"--chdir={tmp_path}", "--wrap", RUNNER])
    other = slurm.sbatch(["sbatch", "--parsable", "--hold", f"--job-name=rota-{job_id}-0",
                          f"--comment=rota:{job_id}@another", "--output=/dev/null",
                          f"--chdir={tmp_path}", "--wrap", RUNNER])
    backend.poll([handle])
    wait(lambda: (j := slurm.job(late)) is not None and j.phase.ended, "the duplicate's cancel")
    # the same name from another rota on the cluster is not this one's to cancel
    assert slurm.job(other).state == "PENDING"
    slurm.run(["scancel", str(other)])
    finish_and_count(slurm, backend, handle, tmp_path, job_id)


def test_a_plane_taking_over_finds_what_its_dead_predecessor_launched_without_recording_it(
        slurm, slurm_env, data_dir, tmp_path, job_id):
    """A standby that takes over has a data directory of its own, without the dead leader's
    files: while taking over it asks Slurm, and adopts the attempt instead of launching it
    again; otherwise it trusts its files (no Slurm call per launch)."""
    die_launching(data_dir, tmp_path, "return", job_id, slurm_env)  # released, not recorded
    successor_dir = tmp_path / "successor"
    successor_dir.mkdir(mode=0o711)
    shutil.copy(data_dir / "slurm-instance", successor_dir / "slurm-instance")  # one instance
    successor = slurm_backend(successor_dir)
    assert successor.recover(rota_job(job_id, replicas=2), PLACEMENT, attempt=0) is None
    successor.taking_over(True)
    handle = successor.recover(rota_job(job_id, replicas=2), PLACEMENT, attempt=0)
    successor.taking_over(False)
    [only] = slurm_jobs_named(slurm, f"rota-{job_id}-0")
    assert handle is not None and int(handle.launch_id) == only.id
    again = successor.launch(rota_job(job_id, replicas=2), PLACEMENT,
                             run_spec(RUNNER, tmp_path), attempt=0)
    assert again == handle  # its files now say it was launched
    finish_and_count(slurm, successor, handle, tmp_path, job_id)
