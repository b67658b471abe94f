"""Several backends in one control plane (``--backend local,example``, composed by
``open_control_plane``): this machine as the local backend reports it and as the example backend
(``tests/backends/example_backend.py``) reports it under the same name is one node; a job runs
through the local backend unless its selector asks for the example's engine, and everything
about a launch (status, logs, exec) goes back to the member that made it."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from backend_support import kill_everything_under
from builders import job
from controlkit import drive, python, state_is
from example_backend import NAME, ExampleFactory
from rota.backends.base import BackendError, EarlyEnding, Handle, Interactive, Offering
from rota.backends.engines import ENGINE_LABEL
from rota.control import setup
from rota.control.logs import log_reader
from rota.control.sessions import Sessions
from rota.core import InvalidSpec
from rota.core import JobState as S
from rota.scheduler import ReasonCode, build_policy
from rota.server import ServerConfig, open_control_plane
from rota.server.backends import check_flags, factory_of, register, unregister
from rota.store import Submission

BOTH = f"local,{NAME}"


@pytest.fixture
def example():
    factory = ExampleFactory()
    register(factory)
    yield factory
    unregister(NAME)


@pytest.fixture
def plane(example, tmp_path: Path, monkeypatch, request) -> Iterator:
    """A control plane of the local and example backends: the local one with the GPUs the
    test's parameter names (default two), the example's node named as it says (default: this
    machine, as the local backend names it)."""
    gpus, node = getattr(request, "param", ("2xH100-80GB", None))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    values = {"--gpus": gpus, "--data-dir": tmp_path / "data"}
    factory = check_flags(BOTH, values)
    inventory = factory.inventory(values)
    values["--example-node"] = node or inventory.node.name
    config = ServerConfig(tmp_path / "data", inventory, build_policy("default"), port=0,
                          backend=factory.name, backend_options=factory.options(values))
    built = open_control_plane(config)
    yield built
    built.sock.close()
    built.close()
    kill_everything_under(tmp_path / "data")


def submit(plane, code: str, **fields) -> str:
    builder = job("x").gpus(1).user(plane.operator).project(setup.DEFAULT_PROJECT)
    for name, value in fields.items():
        builder = getattr(builder, name)(value)
    return plane.store.submit(Submission.from_job(builder.queue(setup.DEFAULT_QUEUE).build(),
                                                  run={"command": python(code)}))


def test_one_node_one_job_through_each_backend(plane):
    store, backend = plane.store, plane.loop.backend
    machine = plane.config.inventory.node.name
    assert backend.name == BOTH
    assert not isinstance(backend, (EarlyEnding, Offering))  # neither member has them
    assert isinstance(backend, Interactive)  # the local backend is
    plain = submit(plane, "print('through local')")
    asked = submit(plane, "print('through example')",
                   selector=((f"{ENGINE_LABEL}{NAME}", "true"),))
    for job_id in (plain, asked):
        rec = drive(plane.loop, state_is(store, job_id, S.SUCCEEDED, S.FAILED),
                    f"job {job_id} to end")
        assert rec.state is S.SUCCEEDED, rec
    nodes = [(n.name, owner, len(n.devices), n.labels.get(f"{ENGINE_LABEL}local"),
              n.labels.get(f"{ENGINE_LABEL}{NAME}")) for n, owner, _ in store.list_nodes()]
    assert nodes == [(machine, BOTH, 2, "true", "true")]  # the local backend's two GPUs
    read = log_reader(backend)
    for job_id, member, text in ((plain, "local", b"through local\n"),
                                 (asked, NAME, b"through example\n")):
        stored = store.get_job(job_id).backend_handle
        assert Handle.from_dict(stored).backend == member
        assert b"".join(read(stored, 0, "stdout", 0)) == text
    # rota exec reaches inside through the member that runs the job, which here cannot
    with pytest.raises(BackendError) as refused:
        Sessions(backend).open_exec(store.get_job(asked).backend_handle, 0, ["true"], False)
    assert refused.value.code == "unsupported" and f"the {NAME} backend" in str(refused.value)


@pytest.mark.parametrize("plane", [("1xH100-80GB", "box-7")], indirect=True)
def test_a_gang_waits_where_no_one_backend_reaches_nodes_enough_never_launched(plane):
    # one node each (this machine: local; box-7: the example backend): two replicas of one
    # GPU would fit across both, which no backend could launch
    store = plane.store
    gang = submit(plane, "print('never')", replicas=2)
    for _ in range(3):
        plane.loop.step()
    rec = store.get_job(gang)
    assert rec.state is S.PENDING and rec.attempts == 0
    assert rec.wait_reasons[0].code is ReasonCode.GANG, rec.wait_reasons
    assert sorted(n.name for n, _, _ in store.list_nodes()) == sorted(
        ["box-7", plane.config.inventory.node.name])


def test_rota_up_describes_every_member(plane):
    lines = factory_of(BOTH).describe(plane)
    assert lines[0].startswith(f"  backends: local, {NAME},")
    assert f"  backend {NAME}: node {plane.config.inventory.node.name}" in lines
    assert any(line.startswith("  this machine: ") for line in lines)
    assert set(plane.config.backend_options) == {"local", NAME}


@pytest.mark.parametrize("backend, values, field, reason", [
    ("slurm,slurm", {}, "backend", "names a backend twice: slurm,slurm"),
    ("slurm,nope", {}, "backend", "unknown backend 'nope'"),
    ("slurm,kubernetes", {"--gpus": "4xH100-80GB"}, "--gpus",
     "applies only with --backend local"),
], ids=["twice", "unknown-member", "option-of-none-of-them"])
def test_several_backends_named_wrong_are_refused_naming_why(backend, values, field, reason):
    with pytest.raises(InvalidSpec) as caught:
        check_flags(backend, values)
    assert (caught.value.field, caught.value.reason[:len(reason)]) == (field, reason)


def test_each_members_options_are_checked_by_its_factory():
    factory = check_flags("slurm,kubernetes", {"--kube-namespace": "ml",
                                               "--slurm-partition": "gpu"})
    options = factory.options({"--kube-namespace": "ml", "--slurm-partition": "gpu"})
    assert options["kubernetes"]["namespace"] == "ml"
    assert options["slurm"]["partition"] == "gpu"
    with pytest.raises(InvalidSpec) as caught:
        factory.options({"--kube-uid": 0})
    assert caught.value.field == "--kube-uid"
