"""``rota up --detach`` returns once the server answers; ``rota down`` stops it; jobs survive.

This is the README's first command on a fresh machine: start in the background, run a job,
read its output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
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
