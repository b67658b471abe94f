"""``rota up --detach`` returns once the server answers; ``rota down`` stops it; jobs survive.

This is the README's first command on a fresh machine: start in the background, run a job,
read its output. No secret of the control plane shows on the way.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

from backend_support import kill_everything_under


def rota(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_up_detached_runs_a_job_and_down_stops_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "share"))
    data = tmp_path / "data"
    try:
        up = rota(env, "up", "-d", "--port", "0", "--data-dir", str(data), "--gpus",
                  "2xH100-80GB", "--interval", "0.5", cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        assert "running in the background" in up.stdout and "rota down" in up.stdout
        assert "rota control plane at" in up.stdout  # the banner, and no log record beside it
        record = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ rota"
        assert not re.search(record, up.stdout, re.M), up.stdout
        assert re.search(r"^\d{4}-\d\d-\d\d .* rota\.control: ", (data / "rota-up.log").read_text(),
                         re.M)  # where they went
        again = rota(env, "up", "-d", "--port", "0", "--data-dir", str(data), cwd=tmp_path)
        assert again.returncode == 1 and "already running" in again.stderr
        ran = rota(env, "run", "--gpus", "0.5", "--", "sh", "-c", "echo hello $CUDA_VISIBLE_DEVICES",
                   cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = rota(env, "logs", "1", cwd=tmp_path).stdout
            if "hello 0" in out:
                break
            time.sleep(0.3)
        assert "hello 0" in out
        down = rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        assert down.returncode == 0 and "stopped the control plane" in down.stdout
        assert "no control plane is running" in rota(env, "down", "--data-dir", str(data),
                                                     cwd=tmp_path).stdout
    finally:
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        kill_everything_under(data)


def _fresh_database(base: str) -> str:
    """A new database on the test server, so that this control plane shares no table."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    name = f"rota_e2e_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


def _drop_database(base: str, url: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def _cmdlines() -> str:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            out.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(out)


def test_no_secret_reaches_a_log_stdout_ps_or_a_job(tmp_path):
    """The operator token stays in the credentials file; a database password given in
    ROTA_DB_URL shows nowhere: not in what rota up prints, its log, ps, nor a job's
    environment. (With PostgreSQL: the test server trusts local connections, so any
    password is accepted and the one given here is only there to be looked for.)"""
    pg = os.environ.get("ROTA_TEST_POSTGRES_URL")
    password = "sekrit-pw-4711"
    env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "share"))
    database = _fresh_database(pg) if pg else None
    if database:
        env["ROTA_DB_URL"] = database.replace("rota@", f"rota:{password}@", 1)
    data = tmp_path / "data"
    try:
        up = rota(env, "up", "-d", "--port", "0", "--data-dir", str(data), "--gpus",
                  "1xH100-80GB", "--interval", "0.5", cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        token = json.loads((tmp_path / "config" / "rota" / "credentials.json").read_text())["token"]
        ran = rota(env, "run", "--", "sh", "-c", "env; cat /proc/$PPID/cmdline", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        job = ran.stdout.split()[2]
        deadline = time.monotonic() + 60
        while "PATH=" not in (out := rota(env, "logs", job, cwd=tmp_path).stdout):
            assert time.monotonic() < deadline, "the job's output"
            time.sleep(0.3)
        log = data / "rota-up.log"
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        seen = {"rota up's output": up.stdout + up.stderr, "its log": log.read_text(),
                "a job's environment": out, "ps": _cmdlines()}
        for where, text in seen.items():
            assert token not in text, f"the operator token is in {where}"
            assert password not in text, f"the database password is in {where}"
        if pg:
            assert "store: postgresql+psycopg://rota:***@" in up.stdout
    finally:
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        kill_everything_under(data)
        if database:
            _drop_database(pg, database)
