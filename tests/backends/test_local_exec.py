"""Reaching inside a running local replica (``open_exec``, ``open_port``): a command runs as
the replica's own command does (environment, devices, working directory, account, cgroup),
a port is a TCP connection to the replica's server, and the refusals say what to do."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from backend_support import a_job, placement, python, run, wait_ended, wait_for
from osusers import PYTHON, needs_accounts, os_user, remove_os_user
from rota.backends.base import BackendError, Channel, Interactive, LaunchSpec
from rota.backends.local import LocalBackend, proc
from rota.backends.localstatus import live_child
from rota.backends.procs import is_running, read_json
from rota.control.accounts import lookup

HOLD = ["sleep", "300"]


def _started(backend: LocalBackend, handle) -> None:
    wait_for(lambda: live_child(proc(handle.replicas[0])), "the replica's command to start")


def _all(channel: Channel) -> bytes:
    out = b""
    while chunk := channel.read():
        out += chunk
    return out


def test_a_command_runs_with_the_jobs_environment_devices_and_working_directory(
        backend: LocalBackend, workdir: Path) -> None:
    assert backend.capabilities.interactive and isinstance(backend, Interactive)
    handle = backend.launch(a_job("e1"), placement([2]), run(HOLD, str(workdir), {"MINE": "x"}))
    _started(backend, handle)
    channel = backend.open_exec(handle, 0, ["sh", "-c", "pwd; echo $MINE $CUDA_VISIBLE_DEVICES "
                                            "$ROTA_JOB_ID; echo oops >&2; exit 3"], tty=False)
    try:
        out = _all(channel)
        assert channel.exit_code() == 3
    finally:
        channel.close()
    assert out.decode().split("\n") == [str(workdir), "x 2 e1", "oops", ""]  # stderr merged
    backend.cancel(handle, 0)


def test_a_terminal_is_the_commands_own_and_follows_resizes(backend: LocalBackend,
                                                            workdir: Path) -> None:
    handle = backend.launch(a_job("e2"), placement([0]), run(HOLD, str(workdir)))
    _started(backend, handle)
    channel = backend.open_exec(handle, 0, ["sh"], tty=True)
    try:
        channel.resize(33, 121)
        channel.write(b"tty; stty size; exit 5\n")
        out = _all(channel).decode()
        assert channel.exit_code() == 5
    finally:
        channel.close()
    assert "/dev/pts/" in out and "33 121" in out
    with pytest.raises(BackendError):
        channel.write(b"more")  # closed
    backend.cancel(handle, 0)


def test_closing_a_channel_ends_its_command(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job("e3"), placement([0]), run(HOLD, str(workdir)))
    _started(backend, handle)
    channel = backend.open_exec(handle, 0, python(
        "import os, time; print(os.getpid(), flush=True); time.sleep(300)"), tty=False)
    pid = int(channel.read().split()[0])
    channel.close()
    channel.close()  # again: nothing
    assert not is_running(pid, None)
    assert channel.exit_code() is not None
    backend.cancel(handle, 0)


def test_a_port_is_a_connection_to_the_replicas_server(backend: LocalBackend,
                                                       workdir: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    echo = ("import socket, sys\ns = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
            "c, _ = s.accept()\nc.sendall(c.recv(100).upper())\n")
    handle = backend.launch(a_job("p1"), placement([0]),
                            run(python(echo) + [str(port)], str(workdir)))
    _started(backend, handle)

    def connected():
        try:
            return backend.open_port(handle, 0, port)
        except BackendError as exc:
            assert exc.code == "port_refused" and f"port {port} of replica 0" in str(exc)
            return None
    channel = wait_for(connected, "the job's server to listen")
    try:
        channel.write(b"hello")
        assert channel.read() == b"HELLO"
        assert channel.read() == b"" and channel.exit_code() is None
    finally:
        channel.close()
    wait_ended(backend, handle)


def test_refusals_say_what_to_do(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job("r1"), placement([0]), run(["true"], str(workdir)))
    wait_ended(backend, handle)
    with pytest.raises(BackendError) as ended:
        backend.open_exec(handle, 0, ["true"], tty=False)
    assert ended.value.code == "not_running" and "rota show" in str(ended.value)
    with pytest.raises(BackendError) as ended_port:
        backend.open_port(handle, 0, 8888)
    assert ended_port.value.code == "not_running"
    with pytest.raises(BackendError) as rank:
        backend.open_exec(handle, 1, ["true"], tty=False)
    assert rank.value.code == "no_replica" and "replicas 0 to 0, not 1" in str(rank.value)


@needs_accounts
def test_a_command_runs_as_the_jobs_owner_in_its_cgroup(data_dir: Path, n1) -> None:
    name = f"rx{os.getpid() % 100000}"
    os_user(name)
    work = Path(tempfile.mkdtemp(prefix="rota-exec-", dir="/tmp"))  # reachable by the owner
    try:
        owner = lookup(name)
        assert owner is not None
        os.chown(work, owner.uid, owner.gid)
        backend = LocalBackend(data_dir, node=n1)
        handle = backend.launch(a_job("o1"), placement([0]),
                                LaunchSpec(("sleep", "300"), str(work), {}, owner))
        try:
            _started(backend, handle)
            channel = backend.open_exec(handle, 0, [PYTHON, "-c", (
                "import os; print(os.getuid(), os.getgid());"
                "print(open('/proc/self/cgroup').read())")], tty=False)
            out = _all(channel).decode()
            channel.close()
            uid, gid = out.split("\n")[0].split()
            assert (int(uid), int(gid)) == (owner.uid, owner.gid)
            plan = (read_json(Path(proc(handle.replicas[0]).dir) / "spec.json") or {}).get(
                "cgroup")
            if plan:  # cgroups usable here: the command counts against the job's limits
                leaf = Path(next(iter(plan["dirs"].values()))).name
                assert leaf in out
        finally:
            backend.cancel(handle, 0)
            wait_ended(backend, handle)
            backend.spawner.close()
    finally:
        remove_os_user(name)
        shutil.rmtree(work, ignore_errors=True)
