"""``rota run`` and ``rota submit FILE`` through their fast path (``rota.cli.fastjobs``) and
through the Typer app, on the same real server: the same job made, the same lines printed (job
ids aside), the same exit status; the fast path loads no typer, rich, pydantic or domain model
for a valid job, and what it leaves to the Typer command (a mistake, an upload, a choice of
project it cannot make) is done there exactly as before. No timing is asserted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import FAST, TYPER, cycle
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.core import JobState

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("typer", "rich", "pydantic", "yaml", "rota.spec.job", "rota.scheduler", "rota.core",
         "rota.client.http", "http.client")


def both(server, tmp_path: Path, *args: str | Path, cwd: Path = ROOT, **env: str):
    """The command by ``main`` and by the Typer app; the first's loaded modules."""
    full = server.env(**env)
    where = tmp_path / "modules.json"
    argv = [str(a) for a in args]
    fast = subprocess.run([sys.executable, "-c", FAST, str(where), *argv], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env=full)
    typer = subprocess.run([sys.executable, "-c", TYPER, *argv], capture_output=True, text=True,
                           timeout=60, cwd=cwd, env=full)
    return fast, typer, set(json.loads(where.read_text()))


def ids_out(text: str) -> str:
    return re.sub(r"\b(job|jobs|array|show|logs) \d+", r"\1 ID", text)


def job_of(server, result) -> object:
    found = re.search(r"Submitted job (\d+)", result.stdout + result.stderr)
    assert found, (result.stdout, result.stderr)
    return server.store.get_job(found.group(1))


def made_alike(server, fast, typer) -> None:
    """Both made a job, the same one but for its id and time, and said so in the same words."""
    assert fast.returncode == typer.returncode == 0, (fast.stderr, typer.stderr)
    assert (ids_out(fast.stdout), ids_out(fast.stderr)) == \
        (ids_out(typer.stdout), ids_out(typer.stderr))
    a, b = job_of(server, fast), job_of(server, typer)
    assert a.id != b.id
    assert (a.name, a.run, a.job.request, a.job.replicas, a.job.project, a.job.queue,
            a.job.walltime_s) == (b.name, b.run, b.job.request, b.job.replicas, b.job.project,
                                  b.job.queue, b.job.walltime_s)


def fell_back(fast, typer, loaded) -> None:
    """The fast path left the command to the Typer app, which printed what it prints."""
    assert (fast.stdout, fast.stderr, fast.returncode) == \
        (typer.stdout, typer.stderr, typer.returncode)
    assert "typer" in loaded and "Traceback" not in fast.stderr


@pytest.mark.parametrize("args", [
    ["run", "--", "python", "train.py", "--lr", "3e-4"],
    ["run", "--gpus", "0.5", "--gpu-memory=20Gi", "--cpu", "2", "--memory", "2Gi", "--name",
     "nb", "--walltime", "4h", "--replicas", "2", "--queue", "default", "--project", "vision",
     "jupyter", "lab", "--port", "8888"],
    ["run", "--workdir", "/srv/not-here", "--", "true"],
    ["run", "--json", "--", "echo", "hi"],
    ["run", "--gpus", "h100:2", "--", "true"],
    ["run", "--gpus", "1", "--gpu-model", "*H100*", "--gpu-model", "*A100*", "--", "true"],
], ids=["plain", "every-option", "server-workdir", "json", "model-count", "model-patterns"])
def test_run_makes_the_job_the_typer_command_makes(server, tmp_path, args):
    fast, typer, loaded = both(server, tmp_path, *args)
    assert [m for m in HEAVY if m in loaded] == []
    if "--json" in args:
        a, b = json.loads(fast.stdout), json.loads(typer.stdout)
        assert set(a) == set(b) and a["request"] == b["request"] and a["id"] != b["id"]
        fast.stdout, typer.stdout = f"Submitted job {a['id']}", f"Submitted job {b['id']}"
    made_alike(server, fast, typer)


def test_run_runs_in_the_current_directory_with_a_server_on_this_machine(server, tmp_path):
    fast, typer, _ = both(server, tmp_path, "run", "--", "true", cwd=tmp_path)
    made_alike(server, fast, typer)
    assert job_of(server, fast).run["workdir"] == str(tmp_path)


@pytest.mark.parametrize("name, content", [
    ("job.yaml", "name: fast\nentrypoint: python x.py\nresources: {gpu: 1, memory: 2Gi}\n"
                 "env: {A: '1'}\nstart_at: 2026-12-01 10:00:00\n"),
    ("job.json", '{"name": "fast", "entrypoint": ["python", "x.py"], "walltime": "1h", '
                 '"resources": {"gpu": 0.5, "cpu": 1.5}}'),
], ids=["yaml", "json"])
def test_submit_makes_the_job_the_typer_command_makes(server, tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    fast, typer, loaded = both(server, tmp_path, "submit", path)
    assert [m for m in HEAVY if m in loaded] == []
    made_alike(server, fast, typer)


def test_submit_an_array_with_project_and_queue_options(server, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("name: sweep\nentrypoint: python sweep.py\n")
    fast, typer, loaded = both(server, tmp_path, "submit", path, "--array", "0-3%2",
                               "--project", "vision", "--queue", "default")
    assert "typer" not in loaded and fast.returncode == 0, fast.stderr
    assert ids_out(fast.stdout) == ids_out(typer.stdout)
    assert "4 tasks" in fast.stdout and "at most 2 at once" in fast.stdout


@pytest.mark.parametrize("content", [
    "name: x\ncolour: red\nresources: {gpu: 1.5, cpu: -1}\n",   # every mistake, locally
    "name: x\nqueue: nope\nentrypoint: a\n",                      # the server's
    "name: x\nentrypoint: a\ngpu: 1\n",                           # the compact form's key
    "name: x\nentrypoint: a\nupload: 0123456789abcdef0123456789abcdef\n",
    "entrypoint: a\n",                                            # no name
    "name: x\nentrypoint: a\nworkdir: nowhere\n",                 # nothing to upload
    "name: x\nentrypoint: a\nname: y\n",                          # a key twice
    "- a list\n",
], ids=["mistakes", "server-refuses", "core-key", "upload-key", "no-name", "no-workdir",
        "key-twice", "not-a-mapping"])
def test_a_job_file_the_fast_path_cannot_send_is_the_typer_commands(server, tmp_path,
                                                                      content):
    path = tmp_path / "job.yaml"
    path.write_text(content)
    fast, typer, loaded = both(server, tmp_path, "submit", path)
    fell_back(fast, typer, loaded)
    assert fast.returncode == 2 and fast.stderr.startswith("error: ")


def test_every_mistake_is_still_named_at_once(server, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: x\ncolour: red\nresources: {gpu: 1.5, cpu: -1}\n")
    fast, _, _ = both(server, tmp_path, "submit", path)
    fields = {line.split(": ")[2] for line in fast.stderr.strip().splitlines()}
    assert {"colour", "resources.gpu", "resources.cpu", "entrypoint"} <= fields, fast.stderr


@pytest.mark.parametrize("args", [
    ["run", "--gpus", "1.5", "--", "true"], ["run", "--replicas", "0", "--", "true"],
    ["run", "--gpus", "8", "--", "true"], ["run", "--queue", "nope", "--", "true"],
    ["run", "--workdir", "not-here", "--", "true"], ["run", "--replicas", "x", "--", "true"],
    ["run", "--help"], ["run"], ["submit", "--wait", "--array", "0-1", "f.yaml"],
    ["submit", "no-such-file.yaml"], ["submit", "--help"],
], ids=lambda a: " ".join(a))
def test_what_the_fast_path_does_not_send_is_the_typer_commands(server, tmp_path, args):
    fast, typer, loaded = both(server, tmp_path, *args)
    fell_back(fast, typer, loaded)
    assert fast.returncode != 0 or "--help" in args


def test_a_job_file_too_large_to_send_as_yaml_is_sent_by_the_typer_command(server, tmp_path):
    from rota.cli.fastjobs import MAX_FILE_BYTES
    path = tmp_path / "job.yaml"
    path.write_text("name: big\nentrypoint: 'true'\n#" + "x" * MAX_FILE_BYTES + "\n")
    fast, typer, loaded = both(server, tmp_path, "submit", path)
    assert "typer" in loaded
    made_alike(server, fast, typer)


def test_a_local_workdir_is_uploaded_by_the_typer_command(server, tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "main.py").write_text("print('hello')\n")
    path = tmp_path / "job.yaml"
    path.write_text("name: up\nentrypoint: python main.py\nworkdir: code\n")
    for args in (["submit", path], ["run", "--workdir", tmp_path / "code", "--", "true"]):
        fast, _, loaded = both(server, tmp_path, *args)
        assert fast.returncode == 0 and "typer" in loaded, fast.stderr
        assert "uploading code" in fast.stderr
        run = job_of(server, fast).run
        assert (server.data_dir / "uploads" / f"{run['upload']}.tar.gz").is_file()


@pytest.mark.parametrize("command", ["run", "submit"])
def test_a_project_rota_cannot_choose_is_left_to_the_typer_command(server, tmp_path, command):
    path = tmp_path / "job.yaml"
    path.write_text("name: x\nentrypoint: 'true'\n")
    args = ["run", "--", "true"] if command == "run" else ["submit", path]
    server.store.add_member("alice", "speech")
    try:
        fast, typer, loaded = both(server, tmp_path, *args)
    finally:
        server.store.remove_member("alice", "speech")
    fell_back(fast, typer, loaded)
    assert "--project: choose one of your projects" in fast.stderr


def test_the_configured_project_counts_where_the_file_names_none(server, tmp_path):
    """The configured default goes with the file's bytes; the file's own project wins."""
    server.store.add_member("alice", "speech")
    try:
        for content, project in (("name: x\nentrypoint: 'true'\n", "speech"),
                                 ("name: x\nentrypoint: 'true'\nproject: vision\n", "vision")):
            path = tmp_path / "job.yaml"
            path.write_text(content)
            fast, typer, loaded = both(server, tmp_path, "submit", path, ROTA_PROJECT="speech")
            assert "typer" not in loaded
            made_alike(server, fast, typer)
            assert job_of(server, fast).job.project == project
    finally:
        server.store.remove_member("alice", "speech")


@pytest.mark.parametrize("env", [{"ROTA_URL": "http://127.0.0.1:1", "ROTA_PROJECT": "vision"},
                                 {"ROTA_TOKEN": "rota_not-a-token"}],
                         ids=["no-server", "bad-token"])
def test_failures_say_the_same_line_and_status(server, tmp_path, env):
    """No server: the submit is tried five times, with a note before each retry."""
    fast, typer, loaded = both(server, tmp_path, "run", "--queue", "default", "--", "true",
                               **env)
    assert (fast.stdout, fast.stderr, fast.returncode) == \
        (typer.stdout, typer.stderr, typer.returncode)
    assert fast.returncode == 1 and "typer" not in loaded


def test_wait_follows_the_job_and_exits_with_its_status(server, tmp_path):
    """``--wait`` on the fast path: the job's output as it comes, then its exit status."""
    proc = subprocess.Popen([sys.executable, "-c", FAST, str(tmp_path / "modules.json"), "run",
                             "--wait", "--", "sh", "-c", "exit 3"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=server.env())
    line = proc.stderr.readline()
    job = re.search(r"Submitted job (\d+)", line).group(1)
    (tmp_path / "out").write_text("working\n")
    (tmp_path / "err").write_text("")
    handle = Handle("local", job, str(tmp_path), (ReplicaHandle(0, "gpu-0", ref=Proc(
        4242, 1, str(tmp_path), str(tmp_path / "out"), str(tmp_path / "err")).ref()),),
        ref={"boot_id": "boot"})
    cycle(server)  # placed on gpu-0
    server.store.transition(job, JobState.RUNNING, backend_handle=handle.to_dict())
    time.sleep(0.5)
    server.store.transition(job, JobState.FAILED, exit_code=3)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, (out, err)
    assert out == "working\n" and f"rota: job {job} failed" in err
    loaded = set(json.loads((tmp_path / "modules.json").read_text()))
    assert [m for m in ("typer", "rich", "pydantic") if m in loaded] == []


@pytest.mark.parametrize("code", [FAST, TYPER], ids=["fast", "typer"])
def test_wait_follows_every_replica_of_a_gang_each_line_labelled(server, tmp_path, code):
    """``--wait`` of a gang prints every replica's output, labelled with its rank."""
    extra = [str(tmp_path / "modules.json")] if code == FAST else []
    proc = subprocess.Popen([sys.executable, "-c", code, *extra, "run", "--replicas", "2",
                             "--wait", "--", "true"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=server.env())
    job = re.search(r"Submitted job (\d+)", proc.stderr.readline()).group(1)
    replicas = []
    for rank in (0, 1):
        (tmp_path / f"out{rank}").write_text(f"rank {rank} working\n")
        (tmp_path / f"err{rank}").write_text("")
        replicas.append(ReplicaHandle(rank, "gpu-0", ref=Proc(
            4242 + rank, 1, str(tmp_path), str(tmp_path / f"out{rank}"),
            str(tmp_path / f"err{rank}")).ref()))
    handle = Handle("local", job, str(tmp_path), tuple(replicas), ref={"boot_id": "boot"})
    cycle(server)
    server.store.transition(job, JobState.RUNNING, backend_handle=handle.to_dict())
    time.sleep(0.5)
    server.store.transition(job, JobState.SUCCEEDED, exit_code=0)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, (out, err)
    assert sorted(out.splitlines()) == ["0: rank 0 working", "1: rank 1 working"]


@pytest.mark.parametrize("argv, expected", [
    (["python", "x.py", "--lr", "3"], {"arguments": ["python", "x.py", "--lr", "3"]}),
    (["--gpus", "1", "-w", "--", "sh", "-c", "x"], {"gpus": "1", "wait": True,
                                                   "arguments": ["sh", "-c", "x"]}),
    (["--replicas=2", "torchrun", "--", "x"], {"replicas": 2,
                                               "arguments": ["torchrun", "--", "x"]}),
    (["--name", "a", "--name", "b", "-", "x"], {"name": "b", "arguments": ["-", "x"]}),
], ids=["command-ends-options", "double-dash", "later-double-dash-is-the-commands",
        "last-wins"])
def test_the_fast_parser_reads_rota_run_as_click_does(argv, expected):
    """The first word of the command ends rota run's options (click without interspersed
    arguments): what follows is the command's, a ``--`` included."""
    from rota.cli.fast import parse
    from rota.cli.fastjobs import RUN
    assert parse(argv, RUN, 1, rest=True) == expected


@pytest.mark.parametrize("argv", [[], ["--"], ["--gpus", "1"], ["--replicas", "-1", "x"],
                                  ["--replicas", "+2", "x"], ["--gpus", "--", "x"],
                                  ["--help"], ["--colour", "x"]], ids=lambda a: " ".join(a))
def test_the_fast_parser_leaves_rota_runs_odd_lines_to_typer(argv):
    from rota.cli.fast import Usage, parse
    from rota.cli.fastjobs import RUN
    with pytest.raises(Usage):
        parse(argv, RUN, 1, rest=True)


def test_a_gpu_model_on_the_command_line_is_the_jobs_gpu_model(server, tmp_path):
    """``--gpus MODEL:N`` as srun's ``--gres=gpu:MODEL:N``: a model containing MODEL (this
    server's GPUs are H100-80GB); a MODEL with wildcards is a pattern as it is; a model that
    no GPU here has is refused at submit, saying which models there are."""
    fast, typer, _ = both(server, tmp_path, "run", "--gpus", "h100:2", "--", "true")
    made_alike(server, fast, typer)
    gpu = job_of(server, fast).job.request.gpu
    assert (gpu.count, gpu.models) == (2, ("*h100*",))
    fast, typer, _ = both(server, tmp_path, "run", "--gpus", "H?00-*:1", "--", "true")
    made_alike(server, fast, typer)
    assert job_of(server, fast).job.request.gpu.models == ("H?00-*",)
    fast, typer, _ = both(server, tmp_path, "run", "--gpus", "a100:2", "--", "true")
    assert fast.returncode == typer.returncode != 0 and fast.stderr == typer.stderr
    assert "none of the GPU models here (H100-80GB) matches *a100*" in fast.stderr, fast.stderr


@pytest.mark.parametrize("args, said", [
    (["--gpus", "a100:2", "--gpu-model", "*H100*"], "--gpus: 'a100:2' names a GPU model and "
                                                    "--gpu-model names one too"),
    (["--gpus", "a100:two"], "--gpus: expected MODEL:COUNT with a number of GPUs after the "
                             "colon (a100:2), got 'a100:two'"),
], ids=["twice", "no-count"])
def test_a_gpu_model_given_wrongly_is_named_by_its_option(server, tmp_path, args, said):
    fast, typer, loaded = both(server, tmp_path, "run", *args, "--", "true")
    fell_back(fast, typer, loaded)
    assert fast.returncode != 0 and said in fast.stderr, fast.stderr


def test_a_mig_profile_no_gpu_here_has_is_refused_at_submit(server, tmp_path):
    """``--gpus 1g.10gb:2`` asks for two instances of MIG profile 1g.10gb; this server's GPUs
    are whole H100s, so the job is refused at submit, naming the profile, on both paths."""
    fast, typer, _ = both(server, tmp_path, "run", "--gpus", "1g.10gb:2", "--", "true")
    assert fast.returncode == typer.returncode != 0 and fast.stderr == typer.stderr
    assert "no GPU here has MIG instances of profile 1g.10gb" in fast.stderr, fast.stderr
