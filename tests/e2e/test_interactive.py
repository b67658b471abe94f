"""Working inside running jobs on a real ``rota up`` (local backend), through the API with the
user's token: ``rota forward`` tunnels a job's port, ``rota exec`` runs a command in it and
exits with its status, ``rota shell`` holds an allocation for a shell and ends it with the
shell, ``rota attach`` streams output as it is written; refusals are the API's errors; and a
live session counts as interaction for idle reclamation."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from commands import rota_command
from terminal import Terminal, on_terminal
from waiting import poll


def _rota(server, *args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*rota_command(), *args], env=server.env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, **kwargs)


def _submit(server, command: list[str], workdir: Path, **extra) -> str:
    with server.client() as op:
        answer = op.post("/v1/jobs", json={"project": "default", "queue": "default",
                                           "entrypoint": command, "workdir": str(workdir),
                                           **extra})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])


def _state(server, job: str) -> dict:
    with server.client() as op:
        return op.get(f"/v1/jobs/{job}").json()


def _running(server, job: str) -> None:
    poll(lambda: _state(server, job)["state"] == "running", f"job {job} to run", timeout=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_forward_tunnels_a_port_of_a_running_job(rota_server, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("served from inside job\n")
    port = _free_port()
    job = _submit(rota_server, [sys.executable, "-m", "http.server", str(port), "--bind",
                                "127.0.0.1"], tmp_path)
    _running(rota_server, job)
    forward = subprocess.Popen([*rota_command(), "forward", job, f"{port}:0"],
                               env=rota_server.env, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = forward.stdout.readline()
        assert line.startswith("Forwarding http://127.0.0.1:"), line + forward.stderr.read()
        url = line.split()[1]

        def fetched() -> str | None:
            try:
                with urllib.request.urlopen(f"{url}/notes.txt", timeout=10) as answer:
                    return answer.read().decode()
            except OSError:
                return None  # the job's server does not listen yet
        assert poll(fetched, "the job's server through the tunnel", timeout=60) == \
            "served from inside job\n"
    finally:
        forward.send_signal(signal.SIGINT)
        forward.wait(timeout=30)
        _rota(rota_server, "cancel", job, cwd=tmp_path)


def test_forward_to_a_local_port_in_use_says_which_to_choose(rota_server, tmp_path: Path) -> None:
    # on the local backend the job listens on this machine: the same local port is taken
    port = _free_port()
    job = _submit(rota_server, [sys.executable, "-m", "http.server", str(port), "--bind",
                                "127.0.0.1"], tmp_path)
    _running(rota_server, job)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    poll(listening, "the job's server to listen", timeout=60)
    taken = _rota(rota_server, "forward", job, str(port), cwd=tmp_path)
    assert taken.returncode != 0
    local = port + 10000 if port < 55536 else 0
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr, taken.stderr
    assert f"rota forward {job} {port}:{local}, or {port}:0 for any free one" in taken.stderr
    _rota(rota_server, "cancel", job, cwd=tmp_path)


def test_exec_runs_in_the_job_and_exits_with_its_status(rota_server, tmp_path: Path) -> None:
    job = _submit(rota_server, ["sleep", "300"], tmp_path, env={"MINE": "set-in-job"})
    _running(rota_server, job)
    ran = _rota(rota_server, "exec", job, "--", "sh", "-c",
                'echo "$ROTA_JOB_ID $MINE"; pwd; echo oops >&2; exit 3', cwd=Path("/"))
    assert ran.returncode == 3, ran.stderr
    assert ran.stdout.split("\n") == [f"{job} set-in-job", str(tmp_path), "oops", ""]
    terminal = _rota(rota_server, "exec", "--tty", job, "--", "sh", "-c", "tty", cwd=tmp_path)
    assert terminal.returncode == 0 and "/dev/pts/" in terminal.stdout, terminal.stderr
    # a command on a terminal reading a piped stdin to its end: the end is typed as Ctrl-D
    sort = _rota(rota_server, "exec", "--tty", job, "--", "sort", cwd=tmp_path,
                 input="pear\napple\n")
    assert sort.returncode == 0, sort.stderr
    assert sort.stdout.replace("\r\n", "\n").endswith("apple\npear\n"), sort.stdout
    _rota(rota_server, "cancel", job, cwd=tmp_path)


def test_a_client_that_goes_away_ends_its_command(rota_server, tmp_path: Path) -> None:
    job = _submit(rota_server, ["sleep", "300"], tmp_path)
    _running(rota_server, job)
    mark = tmp_path / "pid"
    client = subprocess.Popen([*rota_command(), "exec", job, "--", "sh", "-c",
                               f"echo $$ > {mark}.new; mv {mark}.new {mark}; sleep 300"],
                              env=rota_server.env, cwd=tmp_path, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = int(poll(lambda: mark.exists() and mark.read_text(), "the command to start",
                   timeout=60))
    client.kill()  # no goodbye: the connection just drops
    client.wait()

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    poll(gone, "the command to be ended", timeout=60)
    assert _state(rota_server, job)["state"] == "running"  # the job itself runs on
    _rota(rota_server, "cancel", job, cwd=tmp_path)


def test_shell_holds_an_allocation_until_the_shell_exits(rota_server, tmp_path: Path) -> None:
    jobs: list[str] = []

    def session(terminal: Terminal) -> None:
        assert terminal.read_until(b"holds the allocation"), terminal.seen
        jobs.append(terminal.seen.split(b"rota: job ")[1].split()[0].decode())
        _running(rota_server, jobs[0])
        terminal.type(b"echo inside-$ROTA_JOB_ID-$PWD; exit 4\n")
    seen, status = on_terminal([*rota_command(), "shell", "--cpu", "0.5"], rota_server.env,
                               tmp_path, session)
    [job] = jobs
    assert f"inside-{job}-{tmp_path}".encode() in seen and b"(the shell exited)" in seen, seen
    assert status == 4
    ended = _state(rota_server, job)
    assert ended["state"] == "cancelled" and ended["kind"] == "interactive"


def test_attach_streams_output_as_it_is_written(rota_server, tmp_path: Path) -> None:
    go = tmp_path / "go"
    job = _submit(rota_server, ["sh", "-c", f"echo first; while [ ! -e {go} ]; do sleep 0.1; "
                                            "done; echo second >&2; exit 2"], tmp_path)
    attach = subprocess.Popen([*rota_command(), "attach", job], env=rota_server.env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert attach.stdout.readline() == "first\n"  # while the job still runs
        assert _state(rota_server, job)["state"] == "running"
        go.touch()
        out, err = attach.communicate(timeout=60)
    finally:
        if attach.poll() is None:
            attach.kill()
    assert attach.returncode == 2 and "second" in err


def test_sessions_are_refused_with_the_apis_errors(rota_server, tmp_path: Path) -> None:
    from rota.client.credentials import Credentials
    from rota.client.errors import ApiError
    from rota.client.streams import open_session
    with rota_server.client() as op:
        assert op.post("/v1/projects", json={"name": "secret"}).status_code == 201
        member = op.post("/v1/tokens", json={"name": "m", "role": "member"}).json()["token"]
    hidden = _submit(rota_server, ["sleep", "300"], tmp_path, project="secret")
    ended = _submit(rota_server, ["true"], tmp_path)
    _running(rota_server, hidden)
    poll(lambda: _state(rota_server, ended)["state"] == "succeeded", "a job to end", timeout=60)

    def refusal(token: str, path: str, **params) -> ApiError:
        session = open_session(Credentials(rota_server.url, token, "test"), path, params)
        with pytest.raises(ApiError) as refused:
            session.recv()
        return refused.value
    own = rota_server.token
    told = _rota(rota_server, "exec", hidden, "--", "sh", "-c", "echo $ROTA_TOKEN", cwd=tmp_path)
    job_token = told.stdout.strip()  # the job's own token, as a command inside it finds it
    assert job_token, told.stderr
    cases = [  # (token, path, params) -> (status, code)
        ((job_token, f"/v1/jobs/{hidden}/exec", {"command": "true"}), (403, "forbidden")),
        ((member, f"/v1/jobs/{hidden}/exec", {"command": "true"}), (404, "not_found")),
        ((own, f"/v1/jobs/{ended}/exec", {"command": "true"}), (409, "not_running")),
        ((own, f"/v1/jobs/{hidden}/forward", {"port": 0}), (422, "invalid_spec")),
        ((own, f"/v1/jobs/{hidden}/exec", {}), (422, "invalid_spec")),
        (("not-a-token", f"/v1/jobs/{hidden}/exec", {"command": "true"}),
         (401, "unauthenticated")),
    ]
    for (token, path, params), expected in cases:
        got = refusal(token, path, **params)
        assert (got.status, got.code) == expected, (path, params, got.message)
    refused = _rota(rota_server, "forward", hidden, "0", cwd=tmp_path)
    assert refused.returncode == 2 and "PORT[:LOCAL]" in refused.stderr
    nothing = _free_port()
    with_nothing = subprocess.Popen([*rota_command(), "forward", hidden, f"{nothing}:0"],
                                    env=rota_server.env, cwd=tmp_path, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
    try:
        url = with_nothing.stdout.readline().split()[1]
        with pytest.raises(OSError) as dropped:
            urllib.request.urlopen(url, timeout=30).read()
        assert not isinstance(dropped.value, TimeoutError)  # closed, not left hanging
    finally:
        with_nothing.send_signal(signal.SIGINT)
        _, err = with_nothing.communicate(timeout=30)
    assert f"nothing listens on port {nothing} of replica 0 of job {hidden}" in err
    _rota(rota_server, "cancel", hidden, cwd=tmp_path)


def test_a_live_session_counts_as_interaction(rota_server, tmp_path: Path) -> None:
    job = _submit(rota_server, ["sleep", "300"], tmp_path, kind="interactive",
                  idle={"inactive_for": "3s"})
    _running(rota_server, job)
    # silent for twice the idle period, but a session is open the whole time
    quiet = _rota(rota_server, "exec", job, "--", "sleep", "6", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert _state(rota_server, job)["state"] == "running"
    # without one, the job is reclaimed once the period has passed (watched through the list,
    # since reading the job itself is a person's interaction too)
    def listed() -> dict:
        with rota_server.client() as op:
            items = op.get("/v1/jobs", params={"state": ["cancelled"]}).json()["items"]
        return next((j for j in items if str(j["id"]) == job), {})
    ended = poll(listed, "the job to be reclaimed", timeout=60)
    assert "no output and no API call for 3s" in ended["reason"], json.dumps(ended)
