"""What a new user meets first, against a real server on loopback (``conftest.Server``): the
queue chosen for a job, job files without project and queue, every mistake of a file at once,
tables that fit the terminal without breaking a word, a drain named as the reason to wait, both
log streams and their tail, ``rota show``'s tail of a failed job's errors, ``rota logs -f``
ending with the job's outcome, ``ps -o``/``--user``/``--watch``, cancelling several jobs,
defaults from the environment and the config file, one default memory, ``rota token create``
printing the secret alone on stdout. This module has a server of its own; tests build on the
queues the first ones create."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from cli_support import cycle, ok
from commands import rota_command
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.core import FlavorQuota, JobState, Queue


def run_json(server, *args: str, **kw) -> dict:
    return json.loads(ok(server.rota("run", "--json", *args, **kw)))


def with_logs(server, tmp_path, job_id: str, out: str, err: str) -> None:
    """The job running with these files as its replica 0's output and errors."""
    cycle(server)
    (tmp_path / "out").write_text(out)
    (tmp_path / "err").write_text(err)
    handle = Handle("local", job_id, str(tmp_path), (
        ReplicaHandle(0, "gpu-0", ref=Proc(4242, 1, str(tmp_path), str(tmp_path / "out"),
                                           str(tmp_path / "err")).ref()),), ref={"boot_id": "boot"})
    server.store.transition(job_id, JobState.RUNNING, backend_handle=handle.to_dict())


@pytest.fixture(scope="module")
def queues(server):
    """The docs' three queues: default for everyone, one per project bound to it."""
    server.store.put_queue(Queue("research", {"h100": FlavorQuota({"gpu": 1000})}), ("vision",))
    server.store.put_queue(Queue("product", {"h100": FlavorQuota({"gpu": 1000})}), ("speech",))
    return server


def test_the_default_queue_is_chosen_among_those_the_project_may_use(queues):
    first = run_json(queues, "--", "true")
    assert first["queue"] == "default"
    ok(queues.rota("cancel", first["id"]))
    queues.store.delete_queue("default")
    try:
        job = run_json(queues, "--", "true")
        assert job["queue"] == "research"  # the only queue of vision's
        ok(queues.rota("cancel", job["id"]))
        queues.store.put_queue(Queue("spare", {"h100": FlavorQuota({"gpu": 1000})}), ("vision",))
        bad = queues.rota("run", "--", "true")
        assert bad.returncode == 2
        assert "research, spare" in bad.stderr and "product" not in bad.stderr, bad.stderr
        assert "ROTA_QUEUE" in bad.stderr
    finally:
        queues.store.put_queue(Queue("default", {"h100": FlavorQuota({"gpu": 3000})}))


def test_environment_and_config_file_set_the_default_project_and_queue(queues):
    env = queues.env(ROTA_QUEUE="research")
    assert run_json(queues, "--", "true", env=env)["queue"] == "research"
    config = queues.home / "config" / "rota"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('queue = "research"\nproject = "vision"\n')
    try:
        assert run_json(queues, "--", "true")["queue"] == "research"
        assert run_json(queues, "--queue", "default", "--", "true")["queue"] == "default"
        (config / "config.toml").write_text('qeue = "research"\n')
        bad = queues.rota("run", "--", "true")
        assert bad.returncode == 2 and "qeue: unknown key" in bad.stderr, bad.stderr
    finally:
        (config / "config.toml").unlink()


def test_a_job_file_may_leave_out_project_and_queue(queues, tmp_path):
    (tmp_path / "job.yaml").write_text("name: x\nentrypoint: echo hi\n")
    job = json.loads(ok(queues.rota("submit", tmp_path / "job.yaml", "--json")))
    assert (job["project"], job["queue"]) == ("vision", "default")


def test_every_mistake_of_a_job_file_is_named_at_once(queues, tmp_path):
    (tmp_path / "job.yaml").write_text("name: x\ncolour: red\nresources: {gpu: 1.5, cpu: -1}\n")
    bad = queues.rota("submit", tmp_path / "job.yaml")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    fields = {line.split(": ")[2] for line in bad.stderr.strip().splitlines()}
    assert {"colour", "resources.gpu", "resources.cpu", "entrypoint"} <= fields, bad.stderr
    assert all(line.startswith("error: ") for line in bad.stderr.strip().splitlines())


def test_run_and_a_job_file_default_to_the_same_memory(queues, tmp_path):
    (tmp_path / "job.yaml").write_text("name: x\nentrypoint: echo hi\n")
    from_file = json.loads(ok(queues.rota("submit", tmp_path / "job.yaml", "--json")))
    from_run = run_json(queues, "--", "true")
    assert from_file["request"]["memory_mib"] == from_run["request"]["memory_mib"] == 1024


WORD = re.compile(r"[A-Za-z]+")


@pytest.mark.parametrize("columns", ["80", "60"])
def test_tables_never_break_a_word(queues, columns):
    env = queues.env(COLUMNS=columns)
    run_json(queues, "--name", "a-rather-long-job-name", "--", "true")
    for command in (("ps",), ("ps", "-o", "wide"), ("queues",), ("nodes",), ("user", "list")):
        result = queues.rota(*command, user="root" if command[0] == "user" else "alice", env=env
                             if command[0] != "user" else queues.env("root", COLUMNS=columns))
        text = ok(result)
        assert all(len(line) <= int(columns) for line in text.splitlines()), (command, text)
        words = set(WORD.findall(text))
        for broken in ("researc", "unlimi", "PENDIN", "pendin", "PROJEC"):
            assert broken not in words, (command, text)


def test_ps_output_columns_user_filter_and_several_cancels(queues):
    mine = run_json(queues, "--name", "mine", "--", "true")
    theirs = run_json(queues, "--name", "theirs", "--", "true", user="bob")
    wide = ok(queues.rota("ps", "-o", "wide"))
    assert "QUEUE" in wide.splitlines()[0] and "USER" in wide.splitlines()[0]
    picked = ok(queues.rota("ps", "-o", "id,state"))
    assert picked.split()[:2] == ["ID", "STATE"] and f"{mine['id']}" in picked
    rows = json.loads(ok(queues.rota("ps", "--user", "bob", "--json", user="root")))
    assert {j["user"] for j in rows} == {"bob"} and theirs["id"] in [j["id"] for j in rows]
    bad = queues.rota("ps", "-o", "id,colour")
    assert bad.returncode == 2 and "colour" in bad.stderr
    other = run_json(queues, "--", "true")
    out = ok(queues.rota("cancel", mine["id"], other["id"]))
    assert f"Cancelled job {mine['id']}" in out and f"Cancelled job {other['id']}" in out
    missing = queues.rota("cancel", theirs["id"], "999999")
    assert missing.returncode == 1 and "999999" in missing.stderr


def test_ps_watch_prints_until_interrupted(queues):
    # Ctrl-C as in a terminal: SIGINT at its default even where the tests themselves were
    # started with it ignored (a command started in the background of a shell)
    proc = subprocess.Popen([*rota_command(), "ps", "--watch", "--interval", "0.2"],
                            env=queues.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stdout.readline()
        assert first.split()[:2] == ["ID", "NAME"], first
        job = run_json(queues, "--name", "watched", "--", "true")
        deadline = time.monotonic() + 30
        seen = ""
        while job["id"] not in seen and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        assert job["id"] in seen
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err


def test_logs_show_both_streams_and_their_tail(queues, tmp_path):
    job = run_json(queues, "--", "true")
    with_logs(queues, tmp_path, job["id"], "one\ntwo\nthree\n", "warn 1\nwarn 2\n")
    both = queues.rota("logs", job["id"])
    assert ok(both) == "one\ntwo\nthree\n" and both.stderr == "warn 1\nwarn 2\n"
    tail = queues.rota("logs", job["id"], "--tail", "1")
    assert ok(tail) == "three\n" and tail.stderr == "warn 2\n"
    assert ok(queues.rota("logs", job["id"], "--stderr", "--tail", "1")) == "warn 2\n"


@pytest.mark.parametrize("state, code, status", [(JobState.FAILED, 127, 127),
                                                 (JobState.SUCCEEDED, 0, 0),
                                                 (JobState.FAILED, None, 1)])
def test_logs_follow_exits_with_the_jobs_outcome(queues, tmp_path, state, code, status):
    job = run_json(queues, "--", "true")
    with_logs(queues, tmp_path, job["id"], "out\n", "sh: 1: torchrun: not found\n")
    queues.store.transition(job["id"], state, exit_code=code)
    result = queues.rota("logs", job["id"], "-f")
    assert result.returncode == status and result.stdout == "out\n", result
    assert "torchrun: not found" in result.stderr
    if status:
        assert f"job {job['id']} failed" in result.stderr


def test_show_gives_the_last_lines_of_a_failed_jobs_errors(queues, tmp_path):
    job = run_json(queues, "--", "torchrun", "train.py")
    errors = "".join(f"noise {k}\n" for k in range(30)) + "sh: 1: torchrun: not found\n"
    with_logs(queues, tmp_path, job["id"], "", errors)
    queues.store.transition(job["id"], JobState.FAILED, exit_code=127)
    text = ok(queues.rota("show", job["id"]))
    assert "standard error" in text and "torchrun: not found" in text
    assert "noise 29" in text and "noise 5\n" not in text


def test_a_drained_node_is_named_as_why_a_job_waits(queues):
    queues.store.set_node("gpu-0", schedulable=False, drain=True, reason="bad fan")
    try:
        job = run_json(queues, "--name", "drained", "--", "true")
        cycle(queues)
        text = ok(queues.rota("show", job["id"], env=queues.env(COLUMNS="80")))
        assert re.search(r"gpu-0 is drain(ing|ed) \(bad fan\)", text), text
        assert "CPU free" not in text
        assert "rota node uncordon NAME" in text
    finally:
        queues.store.set_node("gpu-0", schedulable=True)
    ok(queues.rota("cancel", job["id"]))


def test_nodes_show_cpu_and_memory(queues):
    header = ok(queues.rota("nodes")).splitlines()[0].split()
    assert "CPU" in header and "MEMORY" in header
    row = ok(queues.rota("nodes")).splitlines()[1].split()
    assert any(re.fullmatch(r"[0-9.]+/64", cell) for cell in row), row  # allocated of 64 CPUs
    assert any(re.fullmatch(r"[0-9.]+/[0-9.]+ GiB", " ".join(row[k:k + 2]))
               for k in range(len(row) - 1)), row  # memory allocated of the node's


def test_token_create_prints_the_secret_alone_on_stdout(queues):
    result = queues.rota("token", "create", "ci", user="root")
    assert re.fullmatch(r"rota_\S+\n", ok(result)), result.stdout
    assert "shown only now" in result.stderr


@pytest.mark.parametrize("args, field, words", [
    (("--gpus", "8"), "resources.gpu", "largest eligible node has 4 GPUs"),
    (("--cpu", "100"), "resources.cpu", "largest eligible node has 64 CPUs"),
    (("--queue", "a100-only", "--gpus", "1"), "resources.gpu", "No quota flavour covers it"),
], ids=["gpus", "cpus", "no-flavour"])
def test_a_job_that_can_never_run_is_refused_at_submit(queues, args, field, words):
    from rota.core import Flavor
    queues.store.put_flavor(Flavor("a100", ("*A100*",)))
    queues.store.put_queue(Queue("a100-only", {"a100": FlavorQuota({"gpu": 8000})}))
    before = len(queues.store.snapshot(queues.store.clock()).jobs)
    bad = queues.rota("run", *args, "--", "true")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert f"{field}: " in bad.stderr and words in bad.stderr, bad.stderr
    assert len(queues.store.snapshot(queues.store.clock()).jobs) == before
