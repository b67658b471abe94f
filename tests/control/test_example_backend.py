"""A backend added from outside rota: ``tests/backends/example_backend.py`` registered by name
is composed into a control plane like rota's own (``open_control_plane``), its node is the
scheduler's, and a job runs on it to the end; its one ``rota up`` option is refused with
another backend and checked by its factory."""

from __future__ import annotations

import pytest

from builders import job
from controlkit import drive, python, state_is
from example_backend import NAME, ExampleFactory
from rota.backends.base import EarlyEnding, Handle, Offering
from rota.core import InvalidSpec
from rota.core import JobState as S
from rota.control import setup
from rota.scheduler import build_policy
from rota.server import ServerConfig, open_control_plane
from rota.server.backends import check_flags, register, unregister
from rota.store import Submission


@pytest.fixture
def example():
    factory = ExampleFactory()
    register(factory)
    yield factory
    unregister(NAME)


def test_a_registered_backend_runs_a_job_to_the_end(example, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    values = {"--example-node": "box-7"}
    factory = check_flags(NAME, values)
    config = ServerConfig(tmp_path / "data", factory.inventory(values),
                          build_policy("default"), port=0, backend=NAME,
                          backend_options=factory.options(values))
    plane = open_control_plane(config)
    try:
        store, backend = plane.store, plane.loop.backend
        assert not isinstance(backend, (EarlyEnding, Offering))  # the optional parts
        built = job("x").gpus(1).user(plane.operator).project(setup.DEFAULT_PROJECT)
        job_id = store.submit(Submission.from_job(
            built.queue(setup.DEFAULT_QUEUE).build(),
            run={"command": python("print('hello from', 'the example')")}))
        rec = drive(plane.loop, state_is(store, job_id, S.SUCCEEDED, S.FAILED),
                    "the job to end")
        assert rec.state is S.SUCCEEDED, rec
        assert [(n.name, b) for n, b, _ in store.list_nodes()] == [("box-7", NAME)]
        handle = Handle.from_dict(rec.backend_handle)
        assert [r.node for r in handle.replicas] == ["box-7"]
        assert b"".join(backend.read_log(handle, 0, "stdout", 0)) == b"hello from the example\n"
        assert factory.describe(plane) == [f"  backend {NAME}: node box-7"]
    finally:
        plane.sock.close()
        plane.close()


@pytest.mark.parametrize("backend, values, option, reason", [
    ("local", {"--example-node": "box-7"}, "--example-node",
     f"applies only with --backend {NAME}"),
    ("local", {"--example-node": "example-1"}, None, None),  # its default: not given
    (NAME, {"--job-pids": 10}, "--job-pids", "applies only with --backend local"),
    ("nope", {}, "backend", "unknown backend 'nope'"),
], ids=["its-option-elsewhere", "its-default-elsewhere", "another-option-with-it", "unknown"])
def test_options_belong_to_their_backend(example, backend, values, option, reason):
    if option is None:
        assert check_flags(backend, values).name == backend
        return
    with pytest.raises(InvalidSpec) as caught:
        check_flags(backend, values)
    assert (caught.value.field, caught.value.reason.split(";")[0][:len(reason)]) == (option,
                                                                                     reason)


def test_a_factory_names_its_option_in_a_bad_value(example):
    with pytest.raises(InvalidSpec) as caught:
        example.options({"--example-node": "box 7"})
    assert caught.value.field == "--example-node"
