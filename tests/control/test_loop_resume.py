"""The shipped example training script, examples/checkpointing/train.py, preempted by a
higher-priority job through the real control loop: it checkpoints on the signal, is requeued,
resumes where it stopped, and ends with exactly the result of a run never interrupted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from controlkit import drive, state_is, submit, workdir
from rota.core import End, JobState as S

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "checkpointing" / "train.py"
ARGS = ["--steps", "300", "--every", "50", "--step-seconds", "0.01"]


def uninterrupted(tmp: Path) -> dict:
    tmp.mkdir()
    subprocess.run([sys.executable, str(EXAMPLE), *ARGS], cwd=tmp, check=True, timeout=120,
                   env={"ROTA_CHECKPOINT_DIR": str(tmp / "ckpt"), "PATH": "/usr/bin:/bin"},
                   capture_output=True)
    return json.loads((tmp / "result.json").read_text())


def log_of(data_dir: Path, job: str, attempt: int) -> str:
    return (data_dir / "jobs" / job / f"attempt-{attempt}" / "replica-0" / "stdout.log").read_text()


def test_a_preempted_run_resumes_and_ends_with_the_uninterrupted_result(
        store, loop, data_dir, clock, tmp_path):
    expected = uninterrupted(tmp_path / "alone")
    low = submit(store, [sys.executable, str(EXAMPLE), *ARGS], gpus=4, grace_s=30,
                 checkpoint={"signal": "SIGUSR1"})
    state = lambda: data_dir / "jobs" / low / "checkpoints" / "state.json"  # noqa: E731
    drive(loop, lambda: state().exists(), "the first periodic checkpoint")
    high = submit(store, ["true"], gpus=4, priority=10)
    drive(loop, state_is(store, low, S.PREEMPTING), "the low-priority job to be preempted")
    drive(loop, lambda: "(on signal SIGUSR1)" in log_of(data_dir, low, 0),
          "the save the checkpoint signal asked for")
    clock.advance(31)  # the grace period is over: it is stopped and requeued
    drive(loop, state_is(store, high, S.SUCCEEDED), "the high-priority job to run")
    done = drive(loop, state_is(store, low, S.SUCCEEDED), "the resumed job to finish")
    resumed = log_of(data_dir, low, 1)
    stopped_at = int(resumed.split("resumed from step ")[1].split()[0])
    assert 0 < stopped_at < 300, resumed
    assert json.loads((workdir(data_dir, low) / "result.json").read_text()) == expected
    assert [a.end for a in store.attempts(low)] == [End.PREEMPTED, End.SUCCEEDED]
    assert done.attempts == 1 and done.failures == 0
