"""The control loop with a real store, a real local backend and real processes: bind ->
launch -> running -> succeeded; failures and the restart budget; cancel; commands that cannot
start; uploads; usage."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from controlkit import drive, python, reasons, state_is, submit, workdir
from rota.backends.procs import is_running, read_json
from rota.core import JobState

S = JobState
WAIT_FOR_GO = ("import os, time\n"
               "open('started', 'w').write(os.environ['ROTA_ATTEMPT'])\n"
               "while not os.path.exists('go'): time.sleep(0.02)\n")


def test_bound_job_is_launched_runs_and_succeeds(store, loop, data_dir, clock) -> None:
    job = submit(store, python(WAIT_FOR_GO + "open('out', 'w').write(os.environ['ROTA_JOB_ID'])"))
    report = loop.step()
    assert report.launched == [job]
    rec = store.get_job(job)
    assert rec.state is S.RUNNING and rec.backend_handle["job_id"] == job
    drive(loop, (workdir(data_dir, job) / "started").exists, "the command to start")
    clock.advance(10)  # 1 GPU x 10 s
    loop.step()
    assert store.get_job(job).state is S.RUNNING
    (workdir(data_dir, job) / "go").write_text("")
    rec = drive(loop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    assert rec.exit_code == 0
    assert (workdir(data_dir, job) / "out").read_text() == job
    assert store.usage(clock.now())["p"] == pytest.approx(10.0)


@pytest.mark.parametrize("retries, runs, final", [
    pytest.param(0, 1, S.FAILED, id="no-budget-fails-at-once"),
    pytest.param(2, 3, S.FAILED, id="two-retries-then-fails"),
])
def test_failing_job_is_retried_within_its_budget(store, loop, data_dir, clock, retries, runs,
                                                  final) -> None:
    # each run appends its attempt number and exits 3; the clock moves past each backoff
    code = "import os\nopen('runs', 'a').write(os.environ['ROTA_ATTEMPT'])\nraise SystemExit(3)"
    job = submit(store, python(code), restart={"max_retries": retries})
    rec = drive(loop, state_is(store, job, final), f"the job to be {final}",
                tick=lambda: clock.advance(5))
    assert rec.exit_code == 3
    assert rec.attempts == retries
    assert (workdir(data_dir, job) / "runs").read_text() == "".join(map(str, range(runs)))
    retried = [r for r in reasons(store, job) if r.startswith("retry ")]
    assert len(retried) == retries
    assert "replica 0 exited with code 3" in rec.reason


def test_job_that_succeeds_on_retry_ends_succeeded(store, loop, data_dir, clock) -> None:
    code = "import os\nraise SystemExit(0 if os.environ['ROTA_ATTEMPT'] == '1' else 1)"
    job = submit(store, python(code), restart={"max_retries": 3})
    rec = drive(loop, state_is(store, job, S.SUCCEEDED), "the retry to succeed",
                tick=lambda: clock.advance(5))
    assert (rec.attempts, rec.exit_code) == (1, 0)


def test_cancel_stops_the_processes_then_cancels(store, loop, data_dir) -> None:
    job = submit(store, python(WAIT_FOR_GO), grace_s=5)
    loop.step()
    drive(loop, (workdir(data_dir, job) / "started").exists, "the command to start")
    child = read_json(Path(store.get_job(job).backend_handle["replicas"][0]["ref"]["dir"]) / "child.json")
    store.request_cancel(job, by="alice")
    rec = drive(loop, state_is(store, job, S.CANCELLED), "the job to be cancelled")
    assert rec.reason == "cancelled on request"
    assert not is_running(child["pid"], child["start_ticks"])


def test_cancel_of_a_bound_job_before_launch_never_starts_it(store, loop) -> None:
    job = submit(store, python(WAIT_FOR_GO))
    loop._schedule(loop.clock.now())  # bound, not launched yet
    store.request_cancel(job, by="alice")
    loop.step()
    rec = store.get_job(job)
    assert rec.state is S.CANCELLED and rec.backend_handle is None


@pytest.mark.parametrize("run, field", [
    pytest.param({}, "run.command", id="no-command"),
    pytest.param({"command": ["echo", 1]}, "run.command[1]", id="not-a-string"),
    pytest.param({"command": ["true"], "env": {"1BAD": "x"}}, "run.env.1BAD", id="bad-env"),
    pytest.param({"command": ["true"], "workdir": "/no/such/dir"}, "run.workdir", id="workdir"),
    pytest.param({"command": ["true"], "upload": "missing"}, "run.upload", id="no-archive"),
])
def test_job_that_cannot_be_started_as_written_fails_naming_the_field(store, loop, run,
                                                                      field) -> None:
    run = dict(run)
    job = submit(store, run.pop("command", None), **run)
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to fail")
    assert f"cannot be started as written: {field}:" in rec.reason


def test_missing_program_fails_without_retrying(store, loop) -> None:
    job = submit(store, ["/no/such/program"], restart={"max_retries": 5})
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to fail")
    assert rec.exit_code == 127 and rec.attempts == 0
    assert rec.reason.startswith("the command could not be started")
    assert "/no/such/program" in rec.reason


def _archive(data_dir: Path, upload: str, files: dict[str, bytes],
             links: dict[str, str] | None = None) -> None:
    (data_dir / "uploads").mkdir(exist_ok=True)
    with tarfile.open(data_dir / "uploads" / f"{upload}.tar.gz", "w:gz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)


def test_upload_is_extracted_into_the_working_directory(store, loop, data_dir) -> None:
    _archive(data_dir, "u1", {"pkg/train.py": b"open('done', 'w').write('trained')\n"})
    job = submit(store, python("exec(open('pkg/train.py').read())"), upload="u1")
    drive(loop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    assert (workdir(data_dir, job) / "done").read_text() == "trained"


@pytest.mark.parametrize("files, links, why", [
    pytest.param({"../evil": b"x"}, None, "unsafe member", id="dotdot"),
    pytest.param({"/etc/evil": b"x"}, None, "unsafe member", id="absolute"),
    pytest.param({}, {"link": "../../outside"}, "unsafe link", id="escaping-symlink"),
    pytest.param({}, {"link": "/etc/passwd"}, "unsafe link", id="absolute-symlink"),
])
def test_unsafe_upload_fails_the_job_and_writes_nothing(store, loop, data_dir, files, links,
                                                        why) -> None:
    _archive(data_dir, "bad", files, links)
    job = submit(store, ["true"], upload="bad")
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to fail")
    assert "run.upload" in rec.reason and why in rec.reason
    assert not (data_dir / "evil").exists() and not workdir(data_dir, job).exists()


def test_a_slow_unpack_holds_up_no_pass(store, loop, data_dir, monkeypatch) -> None:
    """Unpacking an upload happens outside the passes: while one job's archive is being
    unpacked (held here until the test lets it go), another job launches and ends, and the
    first launches once its directory is ready."""
    import threading
    from rota.control import runspec
    release, began = threading.Event(), threading.Event()
    extract = runspec.extract_upload

    def slow(archive, dest):
        began.set()
        assert release.wait(60), "the test never released the unpack"
        extract(archive, dest)
    monkeypatch.setattr(runspec, "extract_upload", slow)
    _archive(data_dir, "big", {"data.txt": b"payload"})
    uploaded = submit(store, python("open('seen', 'w').write(open('data.txt').read())"),
                      upload="big")
    loop.step()                                           # the unpack starts, the pass ends
    assert began.wait(30) and store.get_job(uploaded).state is S.SCHEDULED
    plain = submit(store, ["true"])
    drive(loop, state_is(store, plain, S.SUCCEEDED), "the other job to run and end")
    assert store.get_job(uploaded).state is S.SCHEDULED
    release.set()
    drive(loop, state_is(store, uploaded, S.SUCCEEDED), "the uploaded job to run once unpacked")
    assert (workdir(data_dir, uploaded) / "seen").read_text() == "payload"


def test_job_env_and_checkpoint_dir_reach_the_command(store, loop, data_dir) -> None:
    code = "import os\nopen('env', 'w').write(os.environ['GREETING'] + os.environ['ROTA_CHECKPOINT_DIR'])"
    job = submit(store, python(code), env={"GREETING": "hi"}, checkpoint={"dir": "/ckpt"})
    drive(loop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    assert (workdir(data_dir, job) / "env").read_text() == "hi/ckpt"


def test_string_command_runs_through_the_shell(store, loop, data_dir) -> None:
    job = submit(store, "echo $((6 * 7)) > answer")
    drive(loop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    assert (workdir(data_dir, job) / "answer").read_text().strip() == "42"
    assert os.path.exists(store.get_job(job).backend_handle["replicas"][0]["ref"]["stdout"])


def test_stopping_a_stopped_loop_does_nothing(store, loop) -> None:
    loop.stop()
    loop.stop()  # the exit watcher's descriptors are closed once, not twice
