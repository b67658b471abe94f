"""The local backend with real processes: environment, logs, exit codes, signals, cancel."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from backend_support import (
    a_job, placement, poll_one, python, run, wait_ended, wait_for, wait_started,
)
from rota.backends.base import BackendError, Handle, ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.backends.procs import is_running
from rota.core import DeviceShare, InvalidSpec, Placement, ReplicaPlacement

DUMP_ENV = ("import json, os, sys; "
            "json.dump({'env': dict(os.environ), 'cwd': os.getcwd()}, open(sys.argv[1], 'w'))")


def dumped(path: Path) -> dict:
    wait_for(path.exists, f"{path} to be written")
    return json.loads(path.read_text())


def test_child_sees_its_devices_env_and_workdir(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job("train"), placement([1, 2]), run(python(DUMP_ENV) + ["seen.json"], str(workdir), {"FOO": "bar"}))
    assert wait_ended(backend, handle).succeeded
    seen = dumped(workdir / "seen.json")
    env = seen["env"]
    assert seen["cwd"] == str(workdir.resolve())
    assert env["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert env["FOO"] == "bar"
    assert (env["ROTA_JOB_ID"], env["ROTA_REPLICA_RANK"], env["ROTA_WORLD_SIZE"]) == ("train", "0", "1")
    assert "ROTA_GPU_SHARE" not in env and "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env


def test_fraction_gets_mps_limits(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement((3, 500, 40960)), run(python(DUMP_ENV) + ["seen.json"], str(workdir)))
    wait_ended(backend, handle)
    env = dumped(workdir / "seen.json")["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["ROTA_GPU_SHARE"] == "0.5"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=40960M"


def test_gang_replicas_get_rank_world_size_and_master(backend: LocalBackend, workdir: Path) -> None:
    code = ("import json, os; json.dump({k: v for k, v in os.environ.items() if k.startswith(('ROTA_', "
            "'CUDA_VISIBLE'))}, open('rank-' + os.environ['ROTA_REPLICA_RANK'] + '.json', 'w'))")
    handle = backend.launch(a_job("gang", replicas=2), placement([0, 1], [2, 3]), run(python(code), str(workdir)))
    status = wait_ended(backend, handle)
    assert status.exit_codes == (0, 0)
    r0, r1 = dumped(workdir / "rank-0.json"), dumped(workdir / "rank-1.json")
    assert (r0["ROTA_REPLICA_RANK"], r1["ROTA_REPLICA_RANK"]) == ("0", "1")
    assert r0["ROTA_WORLD_SIZE"] == r1["ROTA_WORLD_SIZE"] == "2"
    assert r0["ROTA_MASTER_ADDR"] == r1["ROTA_MASTER_ADDR"] == "127.0.0.1"
    assert r0["ROTA_MASTER_PORT"] == r1["ROTA_MASTER_PORT"] and int(r0["ROTA_MASTER_PORT"]) > 0
    assert (r0["CUDA_VISIBLE_DEVICES"], r1["CUDA_VISIBLE_DEVICES"]) == ("0,1", "2,3")
    assert proc(handle.replicas[0]).stdout != proc(handle.replicas[1]).stdout


def test_logs_are_captured_per_stream(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([]), run("echo to-out; echo to-err >&2", str(workdir)))
    wait_ended(backend, handle)
    rep = handle.replicas[0]
    assert Path(proc(rep).stdout).read_text() == "to-out\n"
    assert Path(proc(rep).stderr).read_text() == "to-err\n"


@pytest.mark.parametrize("command,exit_code,sig", [
    ("exit 0", 0, None),
    ("exit 3", 3, None),
    ("kill -KILL $$", 137, 9),  # killed by a signal: 128 + 9, like a shell reports it
], ids=["zero", "three", "killed"])
def test_exit_codes_are_recorded(backend: LocalBackend, workdir: Path, command: str,
                                 exit_code: int, sig: int | None) -> None:
    handle = backend.launch(a_job(), placement([0]), run(command, str(workdir)))
    (replica,) = wait_ended(backend, handle).replicas
    assert (replica.state, replica.exit_code, replica.signal) == (ReplicaState.EXITED, exit_code, sig)


def test_command_that_cannot_start(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run(["/no/such/program"], str(workdir)))
    (replica,) = wait_ended(backend, handle).replicas
    assert replica.exit_code == 127
    assert "cannot start '/no/such/program'" in replica.reason


TRAP_TERM = ("import os, signal, sys, time\n"
             "def on_term(*_):\n"
             "    open('got-term', 'w').write('x')\n"
             "    {after}\n"
             "signal.signal(signal.SIGTERM, on_term)\n"
             "open('ready', 'w').write('x')\n"
             "while True: time.sleep(0.05)\n")


def test_cancel_sends_sigterm_then_sigkill_after_grace(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run(python(TRAP_TERM.format(after="pass")), str(workdir)))  # ignores SIGTERM
    wait_for((workdir / "ready").exists, "the job to start")
    backend.cancel(handle, grace_s=0.3)
    (replica,) = wait_ended(backend, handle).replicas
    assert (workdir / "got-term").exists()
    assert (replica.exit_code, replica.signal) == (137, signal.SIGKILL)
    assert replica.reason == "cancelled; killed with SIGKILL after a grace period of 0.3s"


def test_cancel_lets_a_job_that_exits_on_sigterm_finish(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run(python(TRAP_TERM.format(after="sys.exit(42)")), str(workdir)))
    wait_for((workdir / "ready").exists, "the job to start")
    backend.cancel(handle, grace_s=30)
    (replica,) = wait_ended(backend, handle).replicas
    assert (replica.exit_code, replica.signal, replica.reason) == (42, None, "cancelled")


def test_cancel_right_after_launch_is_not_lost(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run(["sleep", "30"], str(workdir)))
    backend.cancel(handle, grace_s=0.2)
    (replica,) = wait_ended(backend, handle).replicas
    assert replica.state is ReplicaState.EXITED and replica.reason.startswith("cancelled")


def test_signal_reaches_the_job(backend: LocalBackend, workdir: Path) -> None:
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGUSR1, lambda *_: sys.exit(7))\n"
            "open('ready', 'w').write('x')\n"
            "while True: time.sleep(0.05)\n")
    handle = backend.launch(a_job(), placement([0]), run(python(code), str(workdir)))
    wait_for((workdir / "ready").exists, "the job to start")
    assert poll_one(backend, handle).state is ReplicaState.RUNNING
    backend.signal(handle, signal.SIGUSR1)
    assert wait_ended(backend, handle).exit_codes == (7,)


def test_leftovers_of_a_replica_are_killed(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run("sleep 30 & echo $! > bg.pid; exit 0", str(workdir)))
    wait_ended(backend, handle)
    pid = int(wait_for(lambda: (workdir / "bg.pid").read_text().strip(), "bg.pid"))
    wait_for(lambda: not is_running(pid, None), "the background process to be killed")


def test_each_launch_is_a_new_attempt(backend: LocalBackend, workdir: Path) -> None:
    first = backend.launch(a_job(), placement([0]), run("exit 1", str(workdir)))
    second = backend.launch(a_job(), placement([0]), run("exit 0", str(workdir)))
    assert first.launch_id != second.launch_id
    assert wait_ended(backend, first).exit_codes == (1,)
    assert wait_ended(backend, second).exit_codes == (0,)


def test_cancel_of_an_ended_job_does_nothing(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run("exit 5", str(workdir)))
    wait_ended(backend, handle)
    backend.cancel(handle, grace_s=0)
    assert poll_one(backend, handle).exit_codes == (5,)


@pytest.mark.parametrize("replica,code", [
    (ReplicaPlacement("elsewhere", ()), "foreign_node"),
    (ReplicaPlacement("n1", (DeviceShare(7, 1000, 81920),)), "unknown_device"),
], ids=["other-node", "missing-gpu"])
def test_placements_this_machine_cannot_run(backend: LocalBackend, workdir: Path, replica,
                                           code: str) -> None:
    with pytest.raises(BackendError) as err:
        backend.launch(a_job(), Placement((replica,)), run("true", str(workdir)))
    assert err.value.code == code
    assert "placement.replicas[0]" in err.value.message


@pytest.mark.parametrize("env,workdir_name,command,field", [
    ({}, "missing", "true", "workdir"),
    ({"not valid": "x"}, "work", "true", "env.not valid"),
    ({}, "work", [], "command"),
    ({}, "work", "  ", "command"),
], ids=["workdir", "env", "empty-argv", "blank-shell"])
def test_bad_launch_input_names_the_field(backend: LocalBackend, tmp_path: Path, workdir: Path,
                                          env, workdir_name, command, field) -> None:
    with pytest.raises(InvalidSpec) as err:
        backend.launch(a_job(), placement([0]), run(command, str(tmp_path / workdir_name), env))
    assert err.value.field == field
    assert not list(backend.data_dir.glob("jobs/*/attempt-*/replica-*"))


def test_signals_the_supervisor_does_not_forward_go_to_the_group(
        backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run(["sleep", "30"], str(workdir)))
    wait_started(handle)
    backend.signal(handle, signal.SIGKILL)
    (replica,) = wait_ended(backend, handle).replicas
    assert (replica.exit_code, replica.signal, replica.reason) == (137, signal.SIGKILL, "")


def test_supervisor_without_a_readable_spec_reports_it(backend: LocalBackend, workdir: Path) -> None:
    rdir = workdir / "replica"
    rdir.mkdir()
    (rdir / "spec.json").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "rota.backends.shim", str(rdir)], timeout=60)
    assert done.returncode == 0
    status = json.loads((rdir / "status.json").read_text())
    assert status["exit_code"] == 127 and "cannot read" in status["reason"]


def test_placement_must_match_the_gang_size(backend: LocalBackend, workdir: Path) -> None:
    with pytest.raises(InvalidSpec) as err:
        backend.launch(a_job(replicas=2), placement([0]), run("true", str(workdir)))
    assert err.value.field == "placement.replicas"


@pytest.mark.parametrize("asked", [0, 18765], ids=["any-free", "named"])
def test_a_server_listens_on_rota_port_where_endpoint_says(backend: LocalBackend, workdir: Path,
                                                           asked: int) -> None:
    code = "import json, os; json.dump(dict(os.environ), open('seen.json', 'w'))"
    spec = replace(run(python(code), str(workdir)), port=asked)
    handle = backend.launch(a_job("svc"), placement([0]), spec)
    assert wait_ended(backend, handle).succeeded
    port = dumped(workdir / "seen.json")["ROTA_PORT"]
    assert int(port) > 0 and (asked == 0 or int(port) == asked)
    assert backend.endpoint(handle) == f"127.0.0.1:{port}"
    assert backend.endpoint(Handle.from_json(handle.to_json())) == f"127.0.0.1:{port}"


def test_a_job_that_serves_nothing_has_no_port_and_no_endpoint(backend: LocalBackend,
                                                               workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([]), run(python(DUMP_ENV) + ["seen.json"],
                                                          str(workdir)))
    wait_ended(backend, handle)
    assert "ROTA_PORT" not in dumped(workdir / "seen.json")["env"]
    assert backend.endpoint(handle) is None
