"""Handles survive a JSON round trip and reject damaged input naming the field; statuses sum up
their replicas."""

from __future__ import annotations

import json

import pytest

from rota.backends.base import Handle, ReplicaHandle, ReplicaState, ReplicaStatus, Status
from rota.core import DeviceShare, InvalidSpec

R, E, L = ReplicaState.RUNNING, ReplicaState.EXITED, ReplicaState.LOST


def a_handle() -> Handle:
    return Handle("local", "train-1", "/data/jobs/train-1/attempt-0", "boot-1", (
        ReplicaHandle(0, "n1", 4242, 1000, "/d/r0", "/d/r0/stdout.log", "/d/r0/stderr.log",
                      (DeviceShare(0, 250, 20480),)),
        ReplicaHandle(1, "n1", 4243, 1001, "/d/r1", "/d/r1/stdout.log", "/d/r1/stderr.log"),
    ))


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
    (["replicas", 1, "pid"], KeyError, "handle.replicas[1].pid"),
    (["replicas", 0, "pid"], "4242", "handle.replicas[0].pid"),
    (["replicas", 0, "pid"], -1, "handle.replicas[0].pid"),
    (["replicas", 0, "devices", 0, "index"], True, "handle.replicas[0].devices[0].index"),
    (["replicas"], [], "handle.replicas"),
    (["job_id"], KeyError, "handle.job_id"),
], ids=["missing-pid", "pid-as-text", "negative-pid", "bool-index", "no-replicas", "no-job-id"])
def test_damaged_handle_names_the_field(path: list[object], value: object, field: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        Handle.from_json(_damaged(path, value))
    assert err.value.field == field


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
