"""Early ends on the real Slurm of tests/slurm/fixture: a batch script reports its status to
``$ROTA_URL`` (here a recording HTTP server on loopback) and keeps its allocation until it is
answered; the backend takes the report and says the attempt exited while Slurm still runs it,
until Slurm says so itself; a script without ``curl`` ends as before, unreported; a job Slurm
still runs long after it reported its end is named overdue, once.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from rota.backends.base import REPORT_TRUST_S, ReplicaState as R
from rota.backends.slurm.backend import SlurmBackend
from reportkit import Reports
from slurmkit import on, rota_job, run_spec, slurm_backend, status_of, wait

pytestmark = pytest.mark.usefixtures("leftovers")


@pytest.fixture
def reports():
    made: list[Reports] = []

    def make(on_report=lambda *seen: None) -> Reports:
        made.append(Reports(on_report))
        return made[-1]
    yield make
    for server in made:
        server.close()


def test_a_reported_end_counts_while_slurm_still_holds_the_job_until_slurm_says_so(
        slurm, data_dir, tmp_path, job_id, reports):
    backend = slurm_backend(data_dir)
    launched = threading.Event()
    handles = []
    during: list[tuple[str | None, object]] = []

    def on_report(path, authorization, body):
        launched.wait(30)
        [handle] = handles
        assert backend.reported(handle, body["status"])
        during.append((slurm.job(int(handle.launch_id)).state, backend.poll([handle])[0]))
    server = reports(on_report)
    env = {"ROTA_URL": server.url, "ROTA_TOKEN": "attempt-token"}
    handles.append(backend.launch(rota_job(job_id), on(("node2", 0)),
                                  run_spec("sleep 1; exit 3", tmp_path, env=env), attempt=0))
    launched.set()
    slurm_id = int(handles[0].launch_id)
    wait(lambda: during and slurm.ended(slurm_id), "the report, then Slurm's end")
    done = backend.poll(handles)[0]
    assert server.seen == [(f"/v1/jobs/{job_id}/exited", "Bearer attempt-token",
                            '{"status": 3, "replicas": [3]}')]
    [(state, early)] = during
    assert state == "RUNNING"                       # the script waits for the answer
    assert early.state is R.EXITED and early.exit_codes == (3,)
    assert done.exit_codes == (3,)                  # and Slurm, once it ended, says the same
    assert backend.early.handles() == {}
    assert slurm_backend(data_dir).early.handles() == {}  # nor kept for a restart
    assert "attempt-token" not in (data_dir / "jobs" / job_id / "attempt-0-logs" /
                                   "batch.log").read_text()


def test_a_gang_reports_each_replicas_own_code(slurm, data_dir, tmp_path, job_id, reports):
    """Rank 1 fails; the script stops rank 0 (a gang cannot go on) and says which did what."""
    backend = slurm_backend(data_dir)
    launched, handles, during = threading.Event(), [], []

    def on_report(path, authorization, body):
        launched.wait(30)
        [handle] = handles
        assert backend.reported(handle, body["status"], tuple(body["replicas"]))
        during.append(backend.poll([handle])[0])
    server = reports(on_report)
    env = {"ROTA_URL": server.url, "ROTA_TOKEN": "attempt-token"}
    command = 'if [ "$ROTA_REPLICA_RANK" = 1 ]; then sleep 1; exit 3; fi; exec sleep 60'
    handles.append(backend.launch(rota_job(job_id, replicas=2), on(("node1", 1), ("node2", 1)),
                                  run_spec(command, tmp_path, env=env), attempt=0))
    launched.set()
    wait(lambda: during and slurm.ended(int(handles[0].launch_id)), "the report, then the end")
    [(_, _, sent)] = server.seen
    body = json.loads(sent)
    assert (body["status"], body["replicas"][1]) == (3, 3)
    assert body["replicas"][0] > 128                # stopped by a signal (srun: 137 here)
    assert during[0].exit_codes == tuple(body["replicas"])
    assert [r.reason for r in during[0].replicas] == ["stopped after replica 1 failed", ""]


def test_a_script_without_curl_on_the_node_ends_as_before_unreported(
        slurm, data_dir, tmp_path, job_id, reports):
    server = reports()
    bare = tmp_path / "bin"  # the node's programs but curl: srun and env, which the script runs
    bare.mkdir()
    for program in ("srun", "env"):
        (bare / program).symlink_to(Path("/usr/bin", program))
    backend = slurm_backend(data_dir)
    env = {"ROTA_URL": server.url, "ROTA_TOKEN": "t", "PATH": str(bare)}
    handle = backend.launch(rota_job(job_id), on(("node2", 1)),
                            run_spec("exit 4", tmp_path, env=env), attempt=0)
    done = status_of(backend, handle, lambda s: s.state is not R.RUNNING, "the job to end")
    assert done.state is R.EXITED and done.exit_codes == (4,)
    assert server.seen == []


def lied(data_dir, tmp_path, job_id, node: str):
    """A backend on a hand-moved clock, and an attempt of ``sleep 120`` on ``node`` that
    reported its end: a report that lies, it runs on."""
    now = [1000.0]
    backend = SlurmBackend(data_dir, slurm_backend(data_dir).config, clock=lambda: now[0])
    handle = backend.launch(rota_job(job_id), on((node, 2)), run_spec("sleep 120", tmp_path),
                            attempt=0)
    status_of(backend, handle, lambda s: s.state is R.RUNNING, "the job to be submitted")
    assert backend.reported(handle, 0)
    return now, backend, handle


def test_a_job_slurm_still_runs_long_after_its_report_is_named_overdue_once(
        slurm, data_dir, tmp_path, job_id):
    now, backend, handle = lied(data_dir, tmp_path, job_id, "node2")
    assert backend.poll([handle])[0].exit_codes == (0,)
    now[0] += REPORT_TRUST_S - 1
    assert backend.overdue() == []
    now[0] += 2
    assert [h.launch_id for h in backend.overdue()] == [handle.launch_id]
    assert backend.overdue() == []                  # named once
    backend.cancel(handle, 0.0)
    slurm.ended(int(handle.launch_id))
    now[0] += 1
    assert backend.overdue() == []


def test_a_job_that_lied_is_stopped_after_a_restart_too(slurm, data_dir, tmp_path, job_id):
    """The store counts the attempt ended once its report is taken, so after a restart only
    the kept report says to look at it: the new backend tracks it and names it overdue."""
    now, before, handle = lied(data_dir, tmp_path, job_id, "node3")
    after = SlurmBackend(data_dir, before.config, clock=lambda: now[0])     # rota up again
    assert int(handle.launch_id) in after.tracked()
    now[0] += REPORT_TRUST_S + 1
    assert [h.launch_id for h in after.overdue()] == [handle.launch_id]
    after.cancel(handle, 0.0)
    slurm.ended(int(handle.launch_id))
    after._confirmed({}, [int(handle.launch_id)])   # the watcher's squeue no longer lists it
    assert SlurmBackend(data_dir, before.config).early.handles() == {}


def test_a_job_not_launched_here_is_not_taken(data_dir, tmp_path, job_id, slurm):
    backend = slurm_backend(data_dir)
    other = slurm_backend(data_dir)
    handle = backend.launch(rota_job(job_id), on(("node2", 3)), run_spec("sleep 30", tmp_path),
                            attempt=0)
    backend.cancel(handle, 0.0)
    slurm.ended(int(handle.launch_id))
    status_of(backend, handle, lambda s: s.state is not R.RUNNING, "the end")
    assert not backend.reported(handle, 0)          # ended: Slurm's word stands
    assert not other.reported(handle, 0)            # never tracked by that one
