"""The Slurm backend against the real Slurm of tests/slurm/fixture: launch where rota placed a
job (or where Slurm does), status in bulk, logs, signals and stops with scancel, a drained and a down node,
other people's jobs, reservations, shards, and jobs run as their owner's account.

The cluster: node1-2 with 4 H100s, node3-4 with 4 A100s, every GPU cut in 4 shards.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess

import pytest

from rota.backends.base import ReplicaState as R, RunAs
from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue
from rota.core import InvalidSpec
from slurmkit import (
    log_of, on, rota_job, run_spec, slurm_backend, status_of, wait,
)

pytestmark = pytest.mark.usefixtures("leftovers")
SHOW = 'echo "host=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES rank=$ROTA_REPLICA_RANK user=$(id -un)"'


def ended(status) -> bool:
    return status.state is not R.RUNNING


def running_in_slurm(slurm, handle) -> bool:
    job = slurm.job(int(handle.launch_id))
    return job is not None and job.state == "RUNNING"


def test_a_one_gpu_job_runs_where_placed_reports_its_device_and_its_log(
        slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id), on(("node3", 2)),
                            run_spec(SHOW + "; sleep 4", tmp_path), attempt=0)
    assert (handle.backend, handle.attempt, handle.ref["name"]) == ("slurm", 0, f"rota-{job_id}-0")
    # while it runs, the backend says which GPU of node3 Slurm gave it
    live = status_of(backend, handle, lambda s: s.state is R.RUNNING and s.placement,
                     "the job to run with a device")
    [replica] = live.placement.replicas
    assert replica.node == "node3" and replica.devices[0].memory_mib == 40960
    done = status_of(backend, handle, ended, "the job to end")
    assert done.succeeded and done.finished_at is not None
    words = dict(w.split("=", 1) for w in log_of(backend, handle).split())
    assert words["host"] == "node3" and words["cvd"] == str(replica.devices[0].index)
    assert words["rank"] == "0"


def test_a_gang_over_two_nodes_reports_each_replica_and_stops_the_peers_of_a_failure(
        slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    # rank 1 fails at once; rank 0 would run a minute: the gang stops it
    command = SHOW + '; if [ "$ROTA_REPLICA_RANK" = 1 ]; then sleep 1; exit 3; fi; sleep 60'
    handle = backend.launch(rota_job(job_id, replicas=2), on(("node1", 0), ("node2", 0)),
                            run_spec(command, tmp_path), attempt=0)
    done = status_of(backend, handle, ended, "the gang to end")
    zero, one = done.replicas
    assert (one.state, one.exit_code, one.reason) == (R.EXITED, 3, "")
    assert zero.state is R.EXITED and zero.exit_code != 0
    hosts = {log_of(backend, handle, r).split()[0] for r in (0, 1)}
    assert hosts == {"host=node1", "host=node2"}


TORCH = ('echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE '
         'node=$NODE_RANK master=$MASTER_ADDR:$MASTER_PORT '
         'rota=$ROTA_MASTER_ADDR:$ROTA_MASTER_PORT"')


def test_a_gangs_replicas_get_torchruns_variables_from_rotas(slurm, data_dir, tmp_path,
                                                             job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id, replicas=2), on(("node1", 3), ("node2", 3)),
                            run_spec(TORCH, tmp_path), attempt=0)
    done = status_of(backend, handle, ended, "the gang to end")
    assert done.succeeded, [log_of(backend, handle, r) for r in (0, 1)]
    seen = [dict(w.split("=", 1) for w in log_of(backend, handle, r).split()) for r in (0, 1)]
    assert [(w["rank"], w["world"], w["local"], w["node"]) for w in seen] == [
        ("0", "2", "0/1", "0"), ("1", "2", "0/1", "1")]
    # rank 0's node address and the job's port, the same for both, and rota's own values
    assert seen[0]["master"] == seen[1]["master"] == seen[0]["rota"]
    address, port = seen[0]["master"].rsplit(":", 1)
    assert address and int(port) > 0


class Recorded:
    """Slurm's commands, each one's program and first argument noted before it runs."""

    def __init__(self, commands) -> None:
        self.commands, self.slurm_conf, self.seen = commands, commands.slurm_conf, []

    def run(self, argv, *args, **kwargs):
        self.seen.append(" ".join(argv[:2]))
        return self.commands.run(argv, *args, **kwargs)


def test_a_gang_that_succeeded_is_seen_ended_from_squeue_alone(slurm, data_dir, job_id,
                                                               tmp_path):
    """Slurm lists a job COMPLETED only when its batch script exited 0, which it does only
    when every replica did: no sacct, and no whole queue, is needed to say so."""
    from rota.backends.slurm.backend import SlurmBackend
    config = slurm_backend(data_dir).config
    recorded = Recorded(slurm_backend(data_dir).commands)
    backend = SlurmBackend(data_dir, config, recorded)
    handle = backend.launch(rota_job(job_id, replicas=2), on(("node1", 1), ("node2", 1)),
                            run_spec("sleep 1", tmp_path), attempt=0)
    wait(lambda: (j := slurm.job(int(handle.launch_id))) is not None and j.phase.ended,
         "the gang to end in Slurm")
    recorded.seen.clear()
    done = backend.poll([handle])[0]
    assert [(r.state, r.exit_code) for r in done.replicas] == [(R.EXITED, 0), (R.EXITED, 0)]
    assert done.finished_at is not None
    assert not [c for c in recorded.seen if c.startswith("sacct") or c == "squeue --all"]
    assert backend.tracked() == []


def test_a_fraction_runs_on_shards_and_lands_on_their_gpu(slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id, share=500), on(("node4", 1, 500)),
                            run_spec('echo "cvd=$CUDA_VISIBLE_DEVICES share=$ROTA_GPU_SHARE"; '
                                     "sleep 4", tmp_path), attempt=0)
    live = status_of(backend, handle, lambda s: s.placement, "the fraction to land")
    [device] = live.placement.replicas[0].devices
    assert (device.milli, device.memory_mib) == (500, 40960)   # 2 of 4 shards, as planned
    assert status_of(backend, handle, ended, "the fraction to end").succeeded
    assert log_of(backend, handle).split() == [f"cvd={device.index}", "share=0.5"]


def test_a_fraction_is_refused_where_no_node_has_shards(slurm, data_dir, tmp_path, job_id):
    class NoShards(type(slurm_backend(data_dir))):
        def reports(self, max_age_s=None):
            from dataclasses import replace
            return {n: replace(r, shards_per_gpu=0) for n, r in super().reports(max_age_s).items()}

    backend = NoShards(data_dir, slurm_backend(data_dir).config)
    with pytest.raises(InvalidSpec, match="no schedulable Slurm node has `shard` GRES") as caught:
        backend.launch(rota_job(job_id, share=500), on(("node4", 1, 500)),
                       run_spec("true", tmp_path), attempt=0)
    assert caught.value.field == "gpu" and "GresTypes" in str(caught.value)
    assert backend.capabilities.fractional_gpu is False
    assert slurm_backend(data_dir).capabilities.fractional_gpu is True


def test_a_job_that_names_a_container_image_is_refused_before_anything_is_submitted(
        slurm, data_dir, tmp_path, job_id):
    from dataclasses import replace
    backend = slurm_backend(data_dir)
    spec = replace(run_spec("true", tmp_path), image="pytorch/pytorch:2.3.0")
    with pytest.raises(InvalidSpec, match="the slurm backend runs commands") as caught:
        backend.launch(rota_job(job_id), on(("node1", 0)), spec, attempt=0)
    assert caught.value.field == "image"
    assert not [j for j in parse_squeue(subprocess.run(list(SQUEUE_JOBS), capture_output=True,
                                                        text=True, env=slurm.env).stdout)
                if j.name.startswith(f"rota-{job_id}")]


TRAPS = ('trap "echo got=TERM" TERM; trap "echo got=USR1" USR1; echo started; '
         'while true; do sleep 0.2; done')


def test_signals_reach_the_replicas_and_a_cancel_warns_before_it_stops(
        slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id), on(("node2", 1)), run_spec(TRAPS, tmp_path),
                            attempt=0)
    wait(lambda: "started" in log_of(backend, handle), "the job to start")
    backend.signal(handle, signal.SIGUSR1)                 # the checkpoint signal
    wait(lambda: "got=USR1" in log_of(backend, handle), "the checkpoint signal to arrive")
    backend.cancel(handle, grace_s=30)                     # SIGTERM first: it may checkpoint
    wait(lambda: "got=TERM" in log_of(backend, handle), "SIGTERM to arrive")
    assert backend.poll([handle])[0].state is R.RUNNING    # it ignores it: still running
    backend.signal(handle, signal.SIGKILL)                 # the grace is over: scancel
    done = status_of(backend, handle, ended, "the job to be cancelled")
    assert done.replicas[0].reason == "cancelled in Slurm"
    backend.cancel(handle, 0)                              # an ended job: nothing happens


def test_a_job_still_pending_in_slurm_is_cancelled_at_once(slurm, data_dir, tmp_path, job_id):
    blocker = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node1", "--gres=gpu:h100:4",
                            f"--job-name=plain-{job_id}", "--output=/dev/null",
                            "--wrap", "sleep 120"])
    wait(lambda: (j := slurm.job(blocker)) and j.state == "RUNNING", "the blocker to run")
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id), on(("node1", 0)), run_spec("true", tmp_path),
                            attempt=0)
    wait(lambda: (j := slurm.job(int(handle.launch_id))) and j.state == "PENDING"
         and j.reason != "JobHeldUser", "the job to wait for node1 in Slurm")
    assert backend.poll([handle])[0].state is R.RUNNING    # submitted, not ended
    backend.cancel(handle, grace_s=30)                     # nothing runs to warn: scancel
    done = status_of(backend, handle, ended, "the pending job to be cancelled")
    assert (done.replicas[0].exit_code, done.replicas[0].reason) == (
        None, "cancelled in Slurm before it started")


def test_a_node_drained_under_a_running_job_lets_it_run_and_a_node_down_loses_it(
        slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id, replicas=2), on(("node1", 3), ("node2", 3)),
                            run_spec("sleep 120", tmp_path), attempt=0)
    wait(lambda: running_in_slurm(slurm, handle), "the gang to run")
    slurm.run(["scontrol", "update", "nodename=node2", "state=drain", f"reason=fan {job_id}"])
    try:
        wait(lambda: backend.reports(0)["node2"].reason == f"drained in Slurm: fan {job_id}",
             "the backend to see node2 drained")
        for _ in range(3):  # as in Slurm, a drained node lets its running jobs end
            assert [r.state for r in backend.poll([handle])[0].replicas] == [R.RUNNING] * 2
        slurm.run(["scontrol", "update", "nodename=node2", "state=down", f"reason=psu {job_id}"])
        lost = status_of(backend, handle, lambda s: s.state is R.LOST, "node2's replica lost")
        assert R.LOST in [r.state for r in lost.replicas]
        assert any(r.reason in (f"node2 is down in Slurm: psu {job_id}", "a Slurm node failed")
                   for r in lost.replicas)
        backend.cancel(handle, 0)                          # what the control loop does next
        status_of(backend, handle, lambda s: not any(r.state is R.RUNNING for r in s.replicas),
                  "the gang to be stopped")
    finally:
        state = slurm.run(["sinfo", "-h", "-n", "node2", "-o", "%T"])
        if "down" in state or "drain" in state:
            slurm.run(["scontrol", "update", "nodename=node2", "state=resume"])


def test_gpus_of_a_plain_sbatch_job_are_foreign_in_the_inventory(slurm, data_dir, job_id):
    foreign = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node2", "--gres=gpu:h100:3",
                            f"--job-name=plain-{job_id}", "--output=/dev/null",
                            "--wrap", "sleep 120"])
    backend = slurm_backend(data_dir)
    node2 = wait(lambda: next((n for n in backend.inventory() if n.name == "node2"
                               and n.foreign), None), "the plain job to hold node2's GPUs")
    [held] = [f for f in node2.foreign if f.holder == f"slurm job {foreign} (root)"]
    assert len(held.devices) == 3 and all(d.milli == 1000 for d in held.devices)
    assert node2.schedulable and node2.problem == ""


def test_a_reservation_closes_its_node_to_rota(slurm, data_dir, job_id):
    name = f"r-{job_id}"
    slurm.run(["scontrol", "create", "reservation", f"reservationname={name}", "starttime=now",
               "duration=10", "nodes=node4", "users=root", "flags=maint"])
    try:
        backend = slurm_backend(data_dir)
        node4 = next(n for n in backend.inventory() if n.name == "node4")
        assert node4.problem.startswith(f"in Slurm maintenance reservation {name} until ")
        assert node4.schedulable  # the operator's flag is untouched
    finally:
        slurm.run(["scontrol", "delete", f"reservationname={name}"])
    assert next(n for n in slurm_backend(data_dir).inventory() if n.name == "node4").problem == ""


def test_left_to_slurm_a_job_lands_where_slurm_put_it(slurm, data_dir, tmp_path, job_id):
    # node1's GPUs are all taken outside rota: rota's plan said node1, Slurm chooses another
    blocker = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node1", "--gres=gpu:h100:4",
                            f"--job-name=plain-{job_id}", "--output=/dev/null",
                            "--wrap", "sleep 120"])
    wait(lambda: (j := slurm.job(blocker)) and j.state == "RUNNING", "the blocker to run")
    backend = slurm_backend(data_dir, placement="slurm")
    handle = backend.launch(rota_job(job_id), on(("node1", 0)), run_spec(SHOW + "; sleep 3",
                                                                         tmp_path), attempt=0)
    live = status_of(backend, handle, lambda s: s.placement, "Slurm to place the job")
    [replica] = live.placement.replicas
    assert replica.node == "node2"                     # the other node with H100s
    assert status_of(backend, handle, ended, "the job to end").succeeded
    words = dict(w.split("=", 1) for w in log_of(backend, handle).split())
    assert (words["host"], words["cvd"]) == ("node2", str(replica.devices[0].index))


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                    reason="needs root and useradd: runs a job as another OS account")
def test_a_job_runs_as_its_owners_account_and_writes_its_logs_as_them(
        slurm, data_dir, tmp_path, job_id):
    user = f"rs{job_id[1:9]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", user], check=True,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(user)
        account = RunAs(user, entry.pw_uid, entry.pw_gid, (), "/", "/bin/sh")
        work = data_dir.parent / "work"
        work.mkdir(mode=0o700)
        os.chown(work, entry.pw_uid, entry.pw_gid)
        backend = slurm_backend(data_dir)
        handle = backend.launch(rota_job(job_id, gpus=0), on(("node1", None)),
                                run_spec(SHOW + '; echo "home=$HOME"', work, run_as=account),
                                attempt=0)
        assert status_of(backend, handle, ended, "the job to end").succeeded
        words = dict(w.split("=", 1) for w in log_of(backend, handle).split())
        assert (words["user"], words["home"]) == (user, "/")
        assert os.stat(handle.replicas[0].ref["stdout"]).st_uid == entry.pw_uid
        jobs = parse_squeue(slurm.run(SQUEUE_JOBS))
        assert next(j for j in jobs if j.id == int(handle.launch_id)).user == user
    finally:
        subprocess.run(["userdel", user], capture_output=True)


def test_activity_is_when_the_output_last_grew_and_a_notice_reaches_the_jobs_stderr(
        slurm, data_dir, tmp_path, job_id):
    backend = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id), on(("node1", 0)),
                            run_spec("echo one; sleep 60", tmp_path), attempt=0)
    [before] = backend.activity([handle])
    assert before.gpu_util is None  # Slurm reports no GPU utilisation rota could read
    wait(lambda: "one" in log_of(backend, handle), "the job's first line")
    [seen] = backend.activity([handle])
    out = handle.replicas[0].ref["stdout"]
    assert seen.last_output_at is not None and seen.last_output_at >= os.stat(out).st_mtime
    backend.notify(handle, "idle for 2 h: stopped in 10 min")
    assert log_of(backend, handle, stream="stderr").endswith(
        "[rota] idle for 2 h: stopped in 10 min\n")
    backend.cancel(handle, 0)
