"""A job's CPU, memory, process and disk limits on a real ``rota up`` with the local backend,
enforced by real cgroups (``rota.backends.cgroups``) and a real disk watcher.

- a job that uses more memory than it asked for is killed by the kernel's OOM killer in its
  own cgroup, and ``rota show`` and the API say so;
- a fork bomb stops at ``pids.max`` (``rota up --job-pids``) while the API keeps answering and
  another job keeps making progress;
- a job whose working directory holds more than its ``resources.disk`` is stopped, saying so;
- after ``kill -9`` of the control plane, a running job's cgroup is found again under its
  name, and its memory limit still holds.
Every job's cgroup is gone once the job ended.

Skipped, with the reason ``rota up`` itself gives, where this machine's cgroups cannot be
written (a non-root account, a container without delegation).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from requires import expected_cgroup_version
from serverkit import RotaServer
from waiting import SLOWDOWN, poll

from rota.backends import cgroups

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 90.0  # a loaded machine may be slow; never asserted on
PIDS = 64
wait_for = partial(poll, timeout=DEADLINE_S, every=0.1)

# holds 256 MiB once the file $GO exists (at once without GO)
HOG = ("import os, time\n"
       "go = os.environ.get('GO')\n"
       "open('started', 'w').write('')\n"
       "while go and not os.path.exists(go): time.sleep(0.05)\n"
       "block = bytearray(256 * 1024 * 1024)\n"
       "for k in range(0, len(block), 4096): block[k] = 1\n"
       "print('held 256 MiB', flush=True)\n")
# forks children that sleep, until fork fails or it made 300 (the bound without pids.max)
BOMB = ("import os, sys, time\n"
        "made = 0\n"
        "try:\n"
        "    while made < 300:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(20); os._exit(0)\n"
        "        made += 1\n"
        "except OSError as exc:\n"
        "    print(f'fork failed after {made}: {exc}', flush=True); time.sleep(2); sys.exit(3)\n"
        "print(f'made {made}', flush=True)\n")
# counts, once every 0.1 s, into the file ticks of its working directory
TICKER = ("import time\n"
          "n = 0\n"
          "while True:\n"
          "    n += 1; open('ticks.tmp', 'w').write(str(n))\n"
          "    __import__('os').replace('ticks.tmp', 'ticks'); time.sleep(0.1)\n")
# writes 8 MiB into its working directory, then waits
WRITER = ("import time\n"
          "open('big', 'wb').write(b'x' * 8 * 1024 * 1024)\n"
          "time.sleep(120)\n")


def _skip_without_cgroups(tmp: Path) -> None:
    found = cgroups.detect(tmp)
    if isinstance(found, str):
        pytest.skip(f"cgroups are not usable here: {found}")
    found.close()
    expected_cgroup_version(found.version)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[RotaServer]:
    root = tmp_path_factory.mktemp("limits")
    _skip_without_cgroups(root / "probe")
    server = RotaServer(root, extra=("--job-pids", str(PIDS)))
    try:
        server.start()
        yield server
    finally:
        server.close()


def submit(client: httpx.Client, code: str, env: dict[str, str] | None = None,
           **resources: Any) -> str:
    reply = client.post("/v1/jobs", json={
        "project": "default", "queue": "default", "entrypoint": [sys.executable, "-c", code],
        "env": env or {}, "checkpoint": {"grace": 1},
        "resources": {"cpu": "500m", "memory": "64Mi", **resources}})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    reply = client.get(f"/v1/jobs/{job_id}")
    assert reply.status_code == 200, reply.text
    return reply.json()


def ended(client: httpx.Client, job_id: str) -> dict[str, Any]:
    return wait_for(lambda: (lambda j: j if j["state"] in ("succeeded", "failed", "cancelled")
                             else None)(job(client, job_id)), f"job {job_id} to end")


def spec_of(server: RotaServer, job_id: str) -> dict[str, Any]:
    path = server.data_dir / "jobs" / job_id / "attempt-0" / "replica-0" / "spec.json"
    return json.loads(wait_for(lambda: path.exists() and path.read_text(), f"{path}"))


def leaf_dirs(server: RotaServer, job_id: str) -> list[Path]:
    """The directories of the job's cgroup (none: it was started without one, which the
    tests find out after what the job did)."""
    plan = spec_of(server, job_id).get("cgroup") or {"dirs": {}}
    return [Path(d) for d in plan["dirs"].values()]


def assert_removed(dirs: list[Path]) -> None:
    assert dirs, "the job was started without a cgroup"
    assert not any(d.exists() for d in dirs), "the job's cgroup outlived it"


def rota(server: RotaServer, *args: str) -> str:
    env = {**server.env, "ROTA_URL": server.url, "ROTA_TOKEN": server.token, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120 * SLOWDOWN)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return " ".join(done.stdout.split())


def test_rota_up_and_rota_nodes_say_how_limits_are_enforced(server) -> None:
    assert "jobs' CPU, memory and process limits: cpu/memory/pids: cgroup v" in server.output()
    assert "jobs' CPU, memory and process limits: cpu/memory/pids: cgroup v" in \
        rota(server, "nodes")


def test_a_job_over_its_memory_request_is_stopped_with_an_out_of_memory_reason(server) -> None:
    with server.client() as client:
        j = submit(client, HOG, memory="64Mi")
        dirs = leaf_dirs(server, j)
        done = ended(client, j)
    assert done["state"] == "failed", done
    assert "out of memory: used more than its 64 MiB memory request" in done["reason"], done
    assert "out of memory: used more than its 64 MiB memory request" in rota(server, "show", j)
    assert_removed(dirs)


def test_a_fork_bomb_stops_at_pids_max_while_the_api_and_another_job_carry_on(server) -> None:
    with server.client() as client:
        ticker = submit(client, TICKER)
        ticks = server.data_dir / "jobs" / ticker / "work" / "ticks"
        wait_for(ticks.exists, "the ticking job to tick")
        bomb = submit(client, BOMB, memory="512Mi")
        dirs = leaf_dirs(server, bomb)
        before = int(ticks.read_text())
        answered = 0
        while job(client, bomb)["state"] not in ("succeeded", "failed"):
            answered += 1  # each call above answered 200, or job() failed the test
            time.sleep(0.05)
        done = job(client, bomb)
        assert done["exit_code"] == 3, done
        log = client.get(f"/v1/jobs/{bomb}/logs").text
        assert "fork failed after" in log, log
        made = int(log.split("fork failed after ")[1].split(":")[0])
        assert made < PIDS, log
        assert answered > 0
        wait_for(lambda: int(ticks.read_text()) > before + 5, "the other job to go on ticking")
        assert job(client, ticker)["state"] == "running"
        client.post(f"/v1/jobs/{ticker}/cancel")
        ended(client, ticker)
    assert_removed(dirs)


def test_a_job_over_its_disk_limit_is_stopped_saying_so(server) -> None:
    with server.client() as client:
        j = submit(client, WRITER, disk="2Mi")
        done = ended(client, j)
    assert done["state"] in ("failed", "cancelled"), done
    assert "wrote more than its 2 MiB disk limit" in done["reason"], done
    assert "wrote more than its 2 MiB disk limit" in rota(server, "show", j)


def test_after_kill9_a_running_jobs_cgroup_is_adopted_and_its_limit_holds(
        server, tmp_path: Path) -> None:
    go = tmp_path / "go"
    with server.client() as client:
        j = submit(client, HOG, env={"GO": str(go)}, memory="64Mi")
        dirs = leaf_dirs(server, j)
        wait_for((server.data_dir / "jobs" / j / "work" / "started").exists, "the job to start")
    server.kill9()
    server.start()
    adopted = [d.is_dir() for d in dirs]  # while the job still runs
    limits = [int((d / name).read_text()) for d in dirs
              for name in ("memory.max", "memory.limit_in_bytes") if (d / name).exists()]
    with server.client() as client:
        assert job(client, j)["state"] == "running"
        go.write_text("")
        done = ended(client, j)
    assert "out of memory: used more than its 64 MiB memory request" in done["reason"], done
    assert dirs and all(adopted), "the running job has no cgroup after the restart"
    assert limits == [64 * 1024 * 1024]
    assert_removed(dirs)
