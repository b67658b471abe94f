"""The launch spec's stored form: every spec reads back equal from what it stores, the first
(unversioned) shape upgrades, and what cannot be read is refused naming the field."""

from __future__ import annotations

import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rota.core import InvalidSpec
from rota.core.runspec import IDLE_KEYS, SIGNAL_NAMES, SIGNALS, VERSION, RunSpec, read_run

TEXT = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
               min_size=1, max_size=20)
SECONDS = st.floats(0, 600, allow_nan=False)
SPECS = st.builds(
    RunSpec,
    command=st.lists(TEXT, min_size=1, max_size=5).map(tuple),
    workdir=st.none() | TEXT,
    env=st.dictionaries(TEXT, st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
                        max_size=4),
    upload=st.none() | st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,40}\Z"),
    checkpoint_dir=st.none() | TEXT,
    checkpoint_signal=st.sampled_from([int(s) for s in signal.Signals]),
    grace_s=st.none() | SECONDS,
    max_retries=st.integers(0, 1000),
    image=st.none() | TEXT,
    backoff_s=SECONDS,
    port=st.none() | st.integers(0, 65535),
    disk_mib=st.none() | st.integers(1, 2 ** 40),
    idle=st.none() | st.dictionaries(st.sampled_from(sorted(IDLE_KEYS)), st.none() | SECONDS),
)


@settings(max_examples=300, deadline=None)
@given(SPECS)
def test_every_spec_reads_back_equal_from_its_stored_form(spec: RunSpec) -> None:
    stored = spec.stored()
    assert stored["version"] == VERSION
    assert read_run(stored) == spec
    assert read_run(read_run(stored).stored()) == spec


def test_the_unversioned_shape_upgrades() -> None:
    spec = read_run({"command": "python train.py", "checkpoint": {"signal": "usr1"}})
    assert spec.command == ("/bin/sh", "-c", "python train.py")
    assert spec.checkpoint_signal == int(signal.SIGUSR1)
    assert spec.stored()["command"] == ["/bin/sh", "-c", "python train.py"]
    assert spec.stored()["checkpoint"]["signal"] == "SIGUSR1"
    assert read_run({"version": 1, "command": ["true"]}) == RunSpec(("true",))


@pytest.mark.parametrize("run, field", [
    pytest.param({"version": 3, "command": ["true"]}, "run.version", id="later-version"),
    pytest.param({"version": True, "command": ["true"]}, "run.version", id="bool-version"),
    pytest.param({"version": "2", "command": ["true"]}, "run.version", id="text-version"),
    pytest.param({"version": 2, "command": "true"}, "run.command", id="v2-string-command"),
    pytest.param({"version": 2, "command": ["true"], "idle": {"for_s": -1}}, "run.idle.for_s",
                 id="negative-idle"),
    pytest.param({"version": 2, "command": ["true"], "idle": {"after": 1}}, "run.idle.after",
                 id="unknown-idle-key"),
    pytest.param({"command": ["true"], "checkpoint": {"grace_s": float("nan")}},
                 "run.checkpoint.grace_s", id="nan-grace"),
    pytest.param(["true"], "run", id="not-a-mapping"),
])
def test_what_cannot_be_read_is_refused_naming_the_field(run: object, field: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        read_run(run)
    assert err.value.field == field


def test_the_spec_is_frozen_mappings_included() -> None:
    spec = read_run({"command": ["true"], "env": {"A": "1"}})
    with pytest.raises(AttributeError):
        spec.command = ("false",)  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.env["A"] = "2"  # type: ignore[index]


def test_the_signal_table_is_the_signal_modules() -> None:
    import signal

    assert dict(SIGNALS) == {name: int(n) for name, n in signal.Signals.__members__.items()}
    assert all(signal.Signals(n).name == name for n, name in SIGNAL_NAMES.items())
