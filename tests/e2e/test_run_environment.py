"""``rota run`` against a real ``rota up`` (local backend, real processes): the job runs in the
caller's directory with the caller's environment and virtual environment, never with the
control plane's own variables nor the caller's token, and the replicas of a gang meet through
torchrun's variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from serverkit import RotaServer

PLANE = {"ROTA_PLANE_SECRET": "plane-rota-secret", "PLANE_CLOUD_KEY": "plane-cloud-secret"}
DUMP = "import json, os, sys; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> RotaServer:
    found = RotaServer(tmp_path_factory.mktemp("plane"))
    found.env.update(PLANE)  # the control plane's own: no job may see them
    try:
        found.start()
        yield found
    finally:
        found.close()


def rota(server: RotaServer, *args: str, cwd: Path, **mine: str) -> subprocess.CompletedProcess:
    """``rota ARGS`` as a caller whose environment is the test's, with ``mine`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    env.update(XDG_CONFIG_HOME=server.env["XDG_CONFIG_HOME"], ROTA_URL=server.url,
               ROTA_TOKEN=server.token, **mine)
    if "PYTHONPATH" in server.env:
        env.setdefault("PYTHONPATH", server.env["PYTHONPATH"])
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_job_runs_with_your_environment_and_never_the_control_planes(server, tmp_path):
    done = rota(server, "run", "--wait", "--", sys.executable, "-c", DUMP, cwd=tmp_path,
                MY_SETTING="from-the-caller")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    env = seen["env"]
    assert (seen["cwd"], env["MY_SETTING"]) == (str(tmp_path), "from-the-caller")
    assert env["PATH"] == os.environ["PATH"]  # the caller's, not the control plane's
    assert not set(PLANE) & set(env), sorted(env)
    assert env["ROTA_TOKEN"] != server.token  # the attempt's own, never the caller's
    done = rota(server, "run", "--wait", "--export", "NONE", "--env", "ONLY=this", "--",
                sys.executable, "-c", DUMP, cwd=tmp_path, MY_SETTING="from-the-caller")
    env = json.loads(done.stdout)["env"]
    assert env["ONLY"] == "this" and "MY_SETTING" not in env and not set(PLANE) & set(env)


def test_python_is_your_virtual_environments(server, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = rota(server, "run", "--wait", "--", "python", "-c", "import sys; print(sys.prefix)",
                cwd=tmp_path, VIRTUAL_ENV=str(venv),
                PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(venv)


MEET = """
import os, socket, sys
e = os.environ
mine = " ".join(e[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                               "NODE_RANK"))
same = (e["MASTER_ADDR"], e["MASTER_PORT"], e["RANK"]) == (
    e["ROTA_MASTER_ADDR"], e["ROTA_MASTER_PORT"], e["ROTA_REPLICA_RANK"])
if e["RANK"] == "0":   # as torch's TCP store: rank 0 listens at MASTER_ADDR:MASTER_PORT
    with socket.create_server((e["MASTER_ADDR"], int(e["MASTER_PORT"]))) as s:
        conn, _ = s.accept()
        other = conn.makefile().readline().strip()
    open("met", "w").write(f"{mine} {same}\\n{other}\\n")
else:
    import time
    for _ in range(300):
        try:
            c = socket.create_connection((e["MASTER_ADDR"], int(e["MASTER_PORT"])))
            break
        except OSError:
            time.sleep(0.1)
    c.sendall(f"{mine} {same}\\n".encode())
    c.close()
"""


def test_a_gangs_replicas_meet_through_torchruns_variables(server, tmp_path):
    done = rota(server, "run", "--wait", "--replicas", "2", "--", sys.executable, "-c", MEET,
                cwd=tmp_path, RANK="7", MASTER_PORT="1")  # the caller's own are not sent
    assert done.returncode == 0, (done.stdout, done.stderr)
    # RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK, and whether they are rota's
    assert (tmp_path / "met").read_text().splitlines() == ["0 2 0 1 0 True", "1 2 0 1 1 True"]
