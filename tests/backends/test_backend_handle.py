"""Handles survive a JSON round trip and reject damaged input naming the field (the local
backend's own part too, when it adopts one); handles saved before version 2 still read;
statuses sum up their replicas."""

from __future__ import annotations

import json

import pytest

from rota.backends.base import Handle, ReplicaHandle, ReplicaState, ReplicaStatus, Status
from rota.backends.local import LocalBackend, Proc, proc
from rota.core import DeviceShare, InvalidSpec

R, E, L = ReplicaState.RUNNING, ReplicaState.EXITED, ReplicaState.LOST


def a_handle() -> Handle:
    return Handle("local", "train-1", "/data/jobs/train-1/attempt-0", (
        ReplicaHandle(0, "n1", (DeviceShare(0, 250, 20480),),
                      Proc(4242, 1000, "/d/r0", "/d/r0/stdout.log", "/d/r0/stderr.log").ref()),
        ReplicaHandle(1, "n1", (),
                      Proc(4243, 1001, "/d/r1", "/d/r1/stdout.log", "/d/r1/stderr.log").ref()),
    ), ref={"boot_id": "boot-1"})


def test_handle_round_trips_through_json() -> None:
    handle = a_handle()
    assert Handle.from_json(handle.to_json()) == handle
    assert json.loads(handle.to_json())["replicas"][0]["devices"][0]["memory_mib"] == 20480


def _damaged(path: list[object], value: object) -> str:
    data = a_handle().to_dict()
    target = data
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    if value is KeyError:
        del target[path[-1]]  # type: ignore[arg-type]
    else:
        target[path[-1]] = value  # type: ignore[index]
    return json.dumps(data)


@pytest.mark.parametrize("path,value,field", [
    (["replicas", 0, "devices", 0, "index"], True, "handle.replicas[0].devices[0].index"),
    (["replicas", 0, "ref"], [], "handle.replicas[0].ref"),
    (["replicas"], [], "handle.replicas"),
    (["job_id"], KeyError, "handle.job_id"),
    (["launch_id"], 7, "handle.launch_id"),
], ids=["bool-index", "ref-not-a-mapping", "no-replicas", "no-job-id", "launch-id-number"])
def test_damaged_handle_names_the_field(path: list[object], value: object, field: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        Handle.from_json(_damaged(path, value))
    assert err.value.field == field


@pytest.mark.parametrize("path,value,field", [
    (["replicas", 1, "ref", "pid"], KeyError, "handle.replicas[1].ref.pid"),
    (["replicas", 0, "ref", "pid"], "4242", "handle.replicas[0].ref.pid"),
    (["replicas", 0, "ref", "pid"], -1, "handle.replicas[0].ref.pid"),
    (["replicas", 0, "ref", "stdout"], None, "handle.replicas[0].ref.stdout"),
], ids=["missing-pid", "pid-as-text", "negative-pid", "no-stdout"])
def test_local_backend_refuses_a_damaged_ref_naming_the_field(
        tmp_path, path: list[object], value: object, field: str) -> None:
    """The control plane does not look inside ``ref``; the backend that adopts it does."""
    damaged = Handle.from_json(_damaged(path, value))
    with pytest.raises(InvalidSpec) as err:
        LocalBackend(tmp_path).adopt(damaged)
    assert err.value.field == field


def test_handle_saved_before_version_2_reads_as_the_same_handle() -> None:
    """Jobs launched by an earlier control plane are adopted after an upgrade: their stored
    handles had the local backend's fields beside the rank."""
    old = {"backend": "local", "job_id": "train-1", "attempt_dir": "/data/jobs/train-1/attempt-0",
           "boot_id": "boot-1", "attempt": 0, "replicas": [
               {"rank": 0, "node": "n1", "pid": 4242, "start_ticks": 1000, "dir": "/d/r0",
                "stdout": "/d/r0/stdout.log", "stderr": "/d/r0/stderr.log",
                "devices": [{"index": 0, "milli": 250, "memory_mib": 20480}]}]}
    handle = Handle.from_dict(old)
    assert handle.launch_id == "/data/jobs/train-1/attempt-0" and handle.attempt == 0
    assert handle.ref == {"boot_id": "boot-1"}
    assert proc(handle.replicas[0]) == Proc(4242, 1000, "/d/r0", "/d/r0/stdout.log",
                                            "/d/r0/stderr.log")
    assert handle.replicas[0].devices == (DeviceShare(0, 250, 20480),)
    assert Handle.from_json(handle.to_json()) == handle


def test_handle_that_is_not_json_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="not valid JSON"):
        Handle.from_json("{pid: 1")


@pytest.mark.parametrize("states,codes,expected,succeeded", [
    ((R, R), (None, None), R, False),
    ((E, R), (0, None), R, False),       # one replica still runs
    ((E, E), (0, 0), E, True),
    ((E, E), (0, 1), E, False),          # one failed: the job failed
    ((E, L), (0, None), L, False),       # a lost replica makes the job lost
    ((R, L), (None, None), L, False),
], ids=["running", "partly-exited", "all-ok", "one-failed", "exited-and-lost", "running-and-lost"])
def test_status_sums_up_replicas(states, codes, expected, succeeded) -> None:
    status = Status(tuple(ReplicaStatus(k, s, c) for k, (s, c) in enumerate(zip(states, codes))))
    assert status.state is expected
    assert status.succeeded is succeeded
