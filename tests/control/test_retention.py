"""Retention: a job that ended loses its working directory after ``workdirs_s`` and its logs
after ``logs_s``; an upload past ``uploads_s`` that no job still to run names is removed; jobs
still to run and recent uploads are never touched; settings that would drop logs before working
directories are refused."""

from __future__ import annotations

import json

import pytest
from controlkit import drive, state_is, submit

from rota.core import InvalidSpec, JobState
from rota.server.retention import DAY_S, Retention, disk_use, sweep


def fake_upload(data_dir, name: str, created_at: float) -> str:
    upload = name * 32
    root = data_dir / "uploads"
    root.mkdir(exist_ok=True)
    (root / f"{upload}.tar.gz").write_bytes(b"\x1f\x8b")
    (root / f"{upload}.json").write_text(json.dumps({"created_at": created_at}))
    return upload


def test_old_work_directories_then_logs_and_unused_uploads_are_removed(store, loop, data_dir,
                                                                         clock):
    done = submit(store, ["true"])
    drive(loop, state_is(store, done, JobState.SUCCEEDED), "the job to succeed")
    home = data_dir / "jobs" / done
    assert (home / "work").is_dir() and list(home.glob("attempt-*/replica-0/stdout.log"))
    old, named, new = (fake_upload(data_dir, c, clock.t) for c in "abc")
    waiting = submit(store, ["true"], gpus=99, upload=named)  # never fits: stays pending
    clock.advance(8 * DAY_S)
    (data_dir / "uploads" / f"{new}.json").write_text(json.dumps({"created_at": clock.t}))
    before = disk_use(data_dir)
    swept = sweep(store, data_dir, Retention(), clock.t)
    assert (swept.workdirs, swept.jobs, swept.uploads) == (1, 0, 1)
    assert not (home / "work").exists() and not (home / "checkpoints").exists()
    assert list(home.glob("attempt-*/replica-0/stdout.log"))  # logs stay longer
    assert sorted(p.name for p in (data_dir / "uploads").iterdir()) == sorted(
        f"{u}.{ext}" for u in (named, new) for ext in ("json", "tar.gz"))
    assert disk_use(data_dir) < before
    clock.advance(23 * DAY_S)
    assert sweep(store, data_dir, Retention(), clock.t).jobs == 1
    assert not home.exists()
    assert store.get_job(waiting).state is JobState.PENDING
    assert store.get_job(done).state is JobState.SUCCEEDED  # the record stays


def test_logs_are_kept_at_least_as_long_as_work_directories():
    with pytest.raises(InvalidSpec) as raised:
        Retention(workdirs_s=7 * DAY_S, logs_s=DAY_S)
    assert raised.value.field == "keep-logs"
    with pytest.raises(InvalidSpec):
        Retention(uploads_s=0)
