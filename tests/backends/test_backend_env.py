"""The environment a replica sees: device pinning, gang coordinates, fractional-GPU limits."""

from __future__ import annotations

import pytest

from rota.backends.base import RunAs
from rota.backends.env import (
    TORCH_NAMES, ReplicaContext, account_env, inherited, replica_env, rota_variables,
)
from rota.core import DeviceShare, InvalidSpec


def ctx(*shares: DeviceShare, rank: int = 0, world: int = 1) -> ReplicaContext:
    return ReplicaContext("j1", rank, world, "127.0.0.1", 29500, shares,
                          tuple(str(s.index) for s in shares))


@pytest.mark.parametrize("shares,expected", [
    ((), {"CUDA_VISIBLE_DEVICES": ""}),
    ((DeviceShare(0, 1000, 81920), DeviceShare(3, 1000, 81920)),
     {"CUDA_VISIBLE_DEVICES": "0,3"}),
    # 0.25 of GPU 2 with 20 GiB: 25 % of the SMs, 20480 MiB pinned on the one visible device (0)
    ((DeviceShare(2, 250, 20480),),
     {"CUDA_VISIBLE_DEVICES": "2", "ROTA_GPU_SHARE": "0.25", "ROTA_GPU_MEMORY_MIB": "20480",
      "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=20480M"}),
    # 0.125 rounds the percentage up: 12.5 -> 13
    ((DeviceShare(1, 125, 10240),),
     {"ROTA_GPU_SHARE": "0.125", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "13"}),
], ids=["no-gpu", "two-whole", "quarter", "eighth"])
def test_device_variables(shares, expected) -> None:
    env = rota_variables(ctx(*shares))
    for key, value in expected.items():
        assert env[key] == value, key
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    if all(s.milli == 1000 for s in shares):
        assert not any(k.startswith(("CUDA_MPS_", "ROTA_GPU_")) for k in env)


def test_gang_coordinates() -> None:
    env = rota_variables(ctx(rank=1, world=2))
    assert (env["ROTA_JOB_ID"], env["ROTA_REPLICA_RANK"], env["ROTA_WORLD_SIZE"]) == ("j1", "1", "2")
    assert (env["ROTA_MASTER_ADDR"], env["ROTA_MASTER_PORT"]) == ("127.0.0.1", "29500")


def test_every_replica_gets_torchruns_variables_as_a_node_of_one_process() -> None:
    # rank 2 of 4: RANK and WORLD_SIZE are rota's; each replica sees only its own GPU, so it is
    # a node of one process to torch: LOCAL_RANK 0 names that GPU, NODE_RANK is its rank
    env = replica_env({}, {}, ctx(DeviceShare(5, 1000, 81920), rank=2, world=4))
    assert {k: env[k] for k in TORCH_NAMES} == {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "2", "WORLD_SIZE": "4",
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "2"}
    assert (env["RANK"], env["MASTER_PORT"]) == (env["ROTA_REPLICA_RANK"],
                                                 env["ROTA_MASTER_PORT"])


def test_a_jobs_env_may_set_torchruns_names_but_not_rotas() -> None:
    env = replica_env({"MASTER_PORT": "1", "RANK": "9"},
                      {"MASTER_PORT": "29999", "ROTA_MASTER_PORT": "1", "ROTA_REPLICA_RANK": "7"},
                      ctx(rank=1, world=2))
    assert (env["MASTER_PORT"], env["RANK"]) == ("29999", "1")  # the base never sets them
    assert (env["ROTA_MASTER_PORT"], env["ROTA_REPLICA_RANK"]) == ("29500", "1")


def test_job_env_is_kept_but_cannot_unpin_devices() -> None:
    base = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "ROTA_TOKEN": "secret",
            "CUDA_MPS_PIPE_DIRECTORY": "/x"}
    env = replica_env(base, {"FOO": "bar", "CUDA_VISIBLE_DEVICES": "0,1", "CUDA_LAUNCH_BLOCKING": "1"},
                      ctx(DeviceShare(2, 1000, 81920)))
    assert env["PATH"] == "/bin" and env["FOO"] == "bar" and env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "2"
    assert "ROTA_TOKEN" not in env
    # the MPS daemon's pipes: a job that does not reach them runs without its limits
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/x"


def test_a_job_inherits_only_the_documented_part_of_the_control_planes_environment() -> None:
    plane = {"PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
             "https_proxy": "http://proxy:3128", "CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps-pipe",
             "CUDA_MPS_LOG_DIRECTORY": "/tmp/mps-log", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
             "ROTA_DATABASE_URL": "postgresql://rota:pw@db/rota", "HOME": "/root",
             "SSH_AUTH_SOCK": "/tmp/agent", "PYTHONPATH": "/srv/rota", "CUDA_VISIBLE_DEVICES": "0"}
    assert inherited(plane) == {
        "PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "https_proxy": "http://proxy:3128", "CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps-pipe",
        "CUDA_MPS_LOG_DIRECTORY": "/tmp/mps-log"}
    assert inherited({})["PATH"]  # a job always finds the usual programs


def test_the_account_sets_home_user_and_shell() -> None:
    alice = RunAs("alice", 1001, 1001, (1001, 27), "/home/alice", "/bin/bash")
    assert account_env(alice) == {"HOME": "/home/alice", "USER": "alice", "LOGNAME": "alice",
                                  "SHELL": "/bin/bash"}


@pytest.mark.parametrize("job_env,field", [
    ({"1BAD": "x"}, "env.1BAD"),
    ({"A-B": "x"}, "env.A-B"),
    ({"N": 3}, "env.N"),
    ({"Z": "a\0b"}, "env.Z"),
], ids=["leading-digit", "dash", "number", "nul"])
def test_bad_job_env_names_the_variable(job_env, field) -> None:
    with pytest.raises(InvalidSpec) as err:
        replica_env({}, job_env, ctx())
    assert err.value.field == field
