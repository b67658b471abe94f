"""``Sessions``: the API's way inside running jobs. A backend without the capability, or a
handle another backend wrote, is refused as ``unsupported`` naming why; every channel opened
is counted as a live session until it is closed, once however often it is closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend_support import a_job, placement, run, wait_for
from example_backend import ExampleBackend
from rota.backends.base import BackendError
from rota.backends.local import LocalBackend, proc
from rota.backends.localstatus import live_child
from rota.control.sessions import Sessions


def test_a_backend_without_the_capability_is_refused(tmp_path: Path) -> None:
    backend = ExampleBackend(tmp_path, "n1")
    handle = backend.launch(a_job("x1"), placement([0]), run(["sleep", "30"], str(tmp_path)),
                            attempt=0)
    try:
        with pytest.raises(BackendError) as refused:
            Sessions(backend).open_exec(handle.to_dict(), 0, ["true"], False)
        assert refused.value.code == "unsupported"
        assert "the example backend cannot reach inside running jobs" in str(refused.value)
        with pytest.raises(BackendError):
            Sessions(backend).open_port(handle.to_dict(), 0, 8888)
    finally:
        backend.cancel(handle, 0)


def test_a_handle_of_another_backend_is_refused(backend: LocalBackend, tmp_path: Path) -> None:
    handle = backend.launch(a_job("x2"), placement([0]), run(["sleep", "30"], str(tmp_path)))
    foreign = {**handle.to_dict(), "backend": "slurm"}
    with pytest.raises(BackendError) as refused:
        Sessions(backend).open_exec(foreign, 0, ["true"], False)
    assert refused.value.code == "unsupported" and "launched by the slurm backend" in str(
        refused.value)
    backend.cancel(handle, 0)


def test_each_session_is_counted_until_it_is_closed(backend: LocalBackend,
                                                    tmp_path: Path) -> None:
    handle = backend.launch(a_job("x3"), placement([0]), run(["sleep", "30"], str(tmp_path)))
    wait_for(lambda: live_child(proc(handle.replicas[0])), "the replica to start")
    told: list[tuple[str, str]] = []
    sessions = Sessions(backend, lambda job: told.append(("opened", job)),
                        lambda job: told.append(("closed", job)))
    first = sessions.open_exec(handle.to_dict(), 0, ["sleep", "30"], False)
    second = sessions.open_exec(handle.to_dict(), 0, ["true"], False)
    assert told == [("opened", "x3"), ("opened", "x3")]
    first.close()
    first.close()
    assert told[2:] == [("closed", "x3")]
    assert second.read() == b"" and second.exit_code() == 0
    second.close()
    assert told[3:] == [("closed", "x3")]
    backend.cancel(handle, 0)
