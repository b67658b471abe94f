"""Reading a job's ``run`` mapping: what is accepted, and every refusal names its field."""

from __future__ import annotations

import signal

import pytest

from rota.control.runspec import RunSpec, parse_run
from rota.core import InvalidSpec


def test_full_run_mapping() -> None:
    spec = parse_run({"command": ["python", "train.py"], "workdir": "/w", "env": {"A": "1"},
                      "upload": "up-1", "checkpoint": {"dir": "/c", "signal": "usr1",
                                                       "grace_s": 12},
                      "restart": {"max_retries": 2}, "idle": None})
    assert spec == RunSpec(("python", "train.py"), "/w", {"A": "1"}, "up-1", "/c",
                           int(signal.SIGUSR1), 12.0, 2)


def test_string_command_goes_through_the_shell() -> None:
    assert parse_run({"command": "echo hi"}).command == ("/bin/sh", "-c", "echo hi")


@pytest.mark.parametrize("run, field", [
    pytest.param({}, "run.command", id="missing-command"),
    pytest.param({"command": []}, "run.command", id="empty-command"),
    pytest.param({"command": ["a", 2]}, "run.command[1]", id="non-string-arg"),
    pytest.param({"command": ["a"], "env": {"A": 1}}, "run.env.A", id="non-string-env"),
    pytest.param({"command": ["a"], "upload": "../x"}, "run.upload", id="traversal-upload-id"),
    pytest.param({"command": ["a"], "checkpoint": {"signal": "SIGNOPE"}},
                 "run.checkpoint.signal", id="bad-signal"),
    pytest.param({"command": ["a"], "checkpoint": {"grace_s": -1}},
                 "run.checkpoint.grace_s", id="negative-grace"),
    pytest.param({"command": ["a"], "restart": {"max_retries": -1}},
                 "run.restart.max_retries", id="negative-retries"),
    pytest.param({"command": ["a"], "restart": 3}, "run.restart", id="restart-not-mapping"),
    pytest.param({"command": ["a"], "workdir": ""}, "run.workdir", id="empty-workdir"),
    pytest.param({"command": ["a"], "entrypoint": "x"}, "run.entrypoint", id="unknown-key"),
])
def test_refusals_name_the_field(run: dict, field: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        parse_run(run)
    assert err.value.field == field
