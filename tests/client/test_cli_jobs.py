"""The ``rota`` console script against a real server on loopback: submit (with an upload and
its progress bar), run, ps, show, logs, cancel, queues, nodes, usage, with and without
``--json``; errors name the field and exit 2 without a traceback; a member sees only its
projects' jobs. Tests in this module share one server; each uses the jobs it created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import cycle, ok
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.core import JobState

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "jobs").glob("*.yaml"))


@pytest.fixture(scope="module")
def examples(server) -> dict[str, dict]:
    """Every example job file, submitted with --json (which uploads its workdir). The files name
    project ``default``, which ``rota up`` creates; this server's user is in ``vision``."""
    out = {}
    for path in EXAMPLES:
        job = json.loads(ok(server.rota("submit", path, "--json", "--project", "vision")))
        out[path.stem] = job
    return out


def test_every_example_passes_validation_and_is_accepted(server, examples):
    assert set(examples) == {"one-gpu", "notebook-half-gpu", "gang-two-replicas", "checkpointed"}
    runs = {name: server.store.get_job(job["id"]).run for name, job in examples.items()}
    assert runs["checkpointed"]["command"] == ["python", "train.py", "--epochs", "100"]
    assert runs["checkpointed"]["checkpoint"] == {"dir": "checkpoints", "signal": "SIGUSR1",
                                                  "grace_s": 120.0}
    assert runs["notebook-half-gpu"]["upload"] is None  # no workdir: nothing uploaded
    for name in ("one-gpu", "gang-two-replicas", "checkpointed"):
        upload = server.data_dir / "uploads" / f"{runs[name]['upload']}.tar.gz"
        assert upload.is_file() and runs[name]["workdir"] is None
    assert examples["gang-two-replicas"]["replicas"] == 2
    assert examples["notebook-half-gpu"]["request"]["gpu"]["share"] == 500


def test_submit_uploads_with_a_progress_bar_and_says_what_next(server, tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "main.py").write_text("print('hello')\n")
    (tmp_path / "job.yaml").write_text("name: hello\nproject: vision\nqueue: default\n"
                                       "entrypoint: python main.py\nworkdir: code\n")
    result = server.rota("submit", tmp_path / "job.yaml")
    out = ok(result)
    assert "uploading code" in result.stderr and "bytes" in result.stderr
    assert out.startswith("Submitted job ") and "rota show" in out


@pytest.mark.parametrize("content, field", [
    ("name: x\nproject: vision\nqueue: default\nentrypoint: a\nresources: {gpu: 1.5}\n",
     "resources.gpu"),
    ("name: x\nproject: vision\nqueue: default\nentrypoint: a\ncolour: red\n", "colour"),
    ("name: x\nproject: vision\nqueue: default\n", "entrypoint"),
    ("name: x\nproject: vision\nqueue: default\nentrypoint: a\nworkdir: nowhere\n", "workdir"),
    ("name: x\nproject: vision\nqueue: nope\nentrypoint: a\n", "queue"),       # server-side
    ("name: x\nproject: speech\nqueue: default\nentrypoint: a\n", "project"),  # not a member
], ids=["gpu", "unknown-key", "no-entrypoint", "missing-workdir", "queue", "project"])
def test_a_bad_job_file_names_the_field_and_exits_2(server, tmp_path, content, field):
    path = tmp_path / "job.yaml"
    path.write_text(content)
    result = server.rota("submit", path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert line.startswith("error: ") and f"{field}: " in line, line


@pytest.mark.parametrize("workdir", ["../../..", "code/../..", "'~/code'", "out-link",
                                     "out-link/x"],
                         ids=["climbs", "climbs-after-a-detour", "home", "link-out",
                              "through-a-link-out"])
def test_a_job_files_workdir_may_not_lead_out_of_its_directory(server, tmp_path, workdir):
    """A job file someone hands you cannot make you upload what lies outside its directory."""
    here = tmp_path / "a" / "b"
    (here / "code").mkdir(parents=True)
    (here / "out-link").symlink_to(tmp_path)
    (tmp_path / "x").mkdir()
    (here / "job.yaml").write_text("name: x\nproject: vision\nqueue: default\nentrypoint: a\n"
                                   f"workdir: {workdir}\n")
    before = set((server.data_dir / "uploads").glob("*"))
    result = server.rota("submit", here / "job.yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {here / 'job.yaml'}: workdir: "), result.stderr
    assert "uploading" not in result.stderr
    assert set((server.data_dir / "uploads").glob("*")) == before


def test_an_absolute_workdir_is_a_directory_on_the_server_not_an_upload(server, tmp_path):
    (tmp_path / "job.yaml").write_text("name: x\nproject: vision\nqueue: default\n"
                                       f"entrypoint: a\nworkdir: {tmp_path}\n")
    job = json.loads(ok(server.rota("submit", tmp_path / "job.yaml", "--json")))
    run = server.store.get_job(job["id"]).run
    assert run["workdir"] == str(tmp_path) and run["upload"] is None
    ok(server.rota("cancel", job["id"]))


def test_run_with_a_workdir_that_is_not_here_names_a_directory_on_the_server(server):
    job = json.loads(ok(server.rota("run", "--workdir", "/srv/not-on-this-client", "--json",
                                    "--", "true")))
    run = server.store.get_job(job["id"]).run
    assert run["workdir"] == "/srv/not-on-this-client" and run["upload"] is None
    ok(server.rota("cancel", job["id"]))


def test_run_ps_show_and_cancel(server):
    job = json.loads(ok(server.rota("run", "--gpus", "0.5", "--gpu-memory", "10Gi", "--json",
                                    "--", "python", "-c", "print(1)")))
    assert (job["name"], job["project"], job["queue"]) == ("python", "vision", "default")
    assert server.store.get_job(job["id"]).run["command"] == ["python", "-c", "print(1)"]
    listed = json.loads(ok(server.rota("ps", "--json")))
    assert job["id"] in [j["id"] for j in listed]
    table = ok(server.rota("ps"))
    assert "ID" in table and "STATE" in table and "0.5 (10 GiB)" in table
    shown = ok(server.rota("show", job["id"]))
    assert "Why pending" in shown and "submitted by alice" in shown
    assert ok(server.rota("cancel", job["id"])).startswith(f"Cancelled job {job['id']}")
    assert job["id"] not in [j["id"] for j in json.loads(ok(server.rota("ps", "--json")))]
    assert job["id"] in [j["id"] for j in json.loads(ok(server.rota("ps", "-A", "--json")))]
    bad = server.rota("run", "--gpus", "1.5", "--", "true")
    assert bad.returncode == 2 and "--gpus: " in bad.stderr


def test_show_explains_placement_and_waiting_after_a_cycle(server, examples):
    cycle(server)  # 4 GPUs, quota 3 GPUs: some examples run, the 4-GPU one waits on quota
    big = json.loads(ok(server.rota("show", examples["checkpointed"]["id"], "--json")))
    assert big["state"] == "pending" and big["wait_reasons"]
    text = ok(server.rota("show", examples["checkpointed"]["id"]))
    assert "Why pending (the latest scheduling cycle):" in text
    assert "Estimated start:" in text
    placed = [j for j in json.loads(ok(server.rota("ps", "--json"))) if j["placement"]]
    assert placed
    with_gpu = [j for j in placed if j["request"]["gpu"]["count"]]
    where = ok(server.rota("show", with_gpu[0]["id"]))
    assert "Placement: gpu-0: GPU" in where
    nodes = json.loads(ok(server.rota("nodes", "--json")))
    allocated = [a for g in nodes[0]["gpus"] for a in g["allocations"]]
    assert {a["job"] for a in allocated} <= {j["id"] for j in placed} and allocated
    assert "gpu-0" in ok(server.rota("nodes"))
    holding = [j for j in placed if j["state"] in ("scheduled", "running", "preempting")]
    cpu = sum(j["request"]["cpu_milli"] * j["replicas"] for j in holding)
    mib = sum(j["request"]["memory_mib"] * j["replicas"] for j in holding)
    assert nodes[0]["allocated"] == {"cpu_milli": cpu, "memory_mib": mib} and cpu > 0
    row = next(line for line in ok(server.rota("nodes")).splitlines() if "gpu-0" in line)
    assert f"{cpu / 1000:g}/64" in row and f"{round(mib / 1024, 1):g}/512 GiB" in row
    queues = json.loads(ok(server.rota("queues", "--json")))
    h100 = queues[0]["quotas"]["h100"]
    assert h100["nominal"]["gpu"] == 3000 and 0 < h100["usage"]["gpu"] <= 3000
    assert "default" in ok(server.rota("queues"))
    assert queues[0]["weight"] == 1 and queues[0]["preemption"]["within_queue"] == \
        "lower-priority"
    wide = ok(server.rota("queues", "-o", "wide")).splitlines()
    assert "BORROW LIMIT" in wide[0] and "PREEMPTION" in wide[0] and "SLURM" in wide[0]
    assert "within: lower-priority" in "\n".join(wide) and "3" in wide[1]
    bad = server.rota("queues", "-o", "tall")
    assert bad.returncode == 2 and "--output: expected wide, got 'tall'" in bad.stderr


def test_logs_of_a_running_job(server, tmp_path):
    job = json.loads(ok(server.rota("run", "--json", "--name", "echo", "--", "echo", "hi")))
    cycle(server)
    (tmp_path / "out").write_text("hello from rank 0\n")
    (tmp_path / "err").write_text("a warning\n")
    handle = Handle("local", job["id"], str(tmp_path), (
        ReplicaHandle(0, "gpu-0", ref=Proc(4242, 1, str(tmp_path), str(tmp_path / "out"),
                                           str(tmp_path / "err")).ref()),), ref={"boot_id": "boot"})
    server.store.transition(job["id"], JobState.RUNNING, backend_handle=handle.to_dict())
    assert ok(server.rota("logs", job["id"])) == "hello from rank 0\n"
    assert ok(server.rota("logs", job["id"], "--stderr")) == "a warning\n"
    server.store.transition(job["id"], JobState.SUCCEEDED, exit_code=0)
    assert ok(server.rota("logs", job["id"], "-f")) == "hello from rank 0\n"
    bad = server.rota("logs", job["id"], "--replica", "3")
    assert bad.returncode == 2 and "replica: " in bad.stderr


def test_logs_of_an_earlier_attempt(server, tmp_path):
    """Each attempt keeps its handle: rota logs --attempt N reads an ended attempt's logs, as
    its backend kept them, while rota logs reads the current one."""
    from rota.core import End
    job = json.loads(ok(server.rota("run", "--json", "--name", "twice", "--", "true")))

    def launch(n: int) -> None:
        where = tmp_path / f"attempt-{n}"
        where.mkdir()
        (where / "out").write_text(f"attempt {n} here\n")
        (where / "err").write_text("")
        cycle(server)
        handle = Handle("local", job["id"], str(where), (ReplicaHandle(0, "gpu-0", ref=Proc(
            4242, 1, str(where), str(where / "out"), str(where / "err")).ref()),),
            ref={"boot_id": "boot"})
        server.store.transition(job["id"], JobState.RUNNING, backend_handle=handle.to_dict())

    launch(0)
    server.store.transition(job["id"], JobState.PENDING, end=End.NODE_LOST, reason="lost")
    launch(1)
    assert ok(server.rota("logs", job["id"])) == "attempt 1 here\n"
    assert ok(server.rota("logs", job["id"], "--attempt", "0")) == "attempt 0 here\n"
    assert ok(server.rota("logs", job["id"], "--attempt", "1")) == "attempt 1 here\n"
    beyond = server.rota("logs", job["id"], "--attempt", "5")
    assert beyond.returncode == 2 and "has had attempts 0 to 1, not 5" in beyond.stderr
    both = server.rota("logs", job["id"], "--attempt", "0", "-f")
    assert both.returncode == 2 and "--follow, --attempt" in both.stderr
    server.store.transition(job["id"], JobState.SUCCEEDED, exit_code=0)


def test_a_member_does_not_see_another_projects_jobs(server, examples):
    theirs = json.loads(ok(server.rota("ps", "-A", "--json", user="bob")))
    assert all(j["project"] == "speech" for j in theirs)
    hidden = server.rota("show", examples["one-gpu"]["id"], user="bob")
    assert hidden.returncode == 1 and "no job" in hidden.stderr
    assert server.rota("cancel", examples["one-gpu"]["id"], user="bob").returncode == 1


def test_usage_per_project(server):
    server.store.add_usage("vision", 7200.0, server.store.clock())
    assert json.loads(ok(server.rota("usage", "--json")))["vision"] == pytest.approx(7200, rel=0.01)
    table = ok(server.rota("usage"))
    assert "vision" in table and "2.00" in table


def test_run_against_a_server_on_this_machine_runs_in_the_current_directory(server, tmp_path):
    # like srun: with the server on loopback, `rota run -- python3 train.py` runs where you are
    job = json.loads(ok(server.rota("run", "--json", "--", "python3", "hi.py", cwd=tmp_path)))
    assert server.store.get_job(job["id"]).run["workdir"] == str(tmp_path)
    up = tmp_path / "code"
    up.mkdir()
    (up / "hi.py").write_text("print('hi')\n")
    job = json.loads(ok(server.rota("run", "--json", "--workdir", up, "--", "true", cwd=tmp_path)))
    run = server.store.get_job(job["id"]).run
    assert run["workdir"] is None and run["upload"]


def test_submit_an_array_and_ps_folds_it_into_one_line(server, tmp_path):
    (tmp_path / "job.yaml").write_text("name: sweep\nproject: vision\nqueue: default\n"
                                       "entrypoint: python sweep.py\n")
    result = server.rota("submit", tmp_path / "job.yaml", "--array", "0-9%3")
    out = ok(result)
    assert out.startswith("Submitted array ") and "10 tasks" in out and "at most 3" in out
    first = out.split()[2].rstrip(":")
    table = ok(server.rota("ps"))
    (line,) = [row for row in table.splitlines() if row.strip().startswith(f"{first}[")]
    assert f"{first}[0-9%3]" in line and "10 pending" in line
    listed = json.loads(ok(server.rota("ps", "--json")))
    assert len([j for j in listed if j["array_id"] == first]) == 10
    bad = server.rota("submit", tmp_path / "job.yaml", "--array", "5-1")
    assert bad.returncode == 2 and "array: " in bad.stderr
