"""``rota up --mig-plan``: the calendar's geometry in effect is carried out on this machine's
GPU through NVML (a fake ``pynvml`` first on the path of the ``rota up`` process, one whole
H100), ``rota nodes`` shows the new instances, and a job runs on one of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from backend_support import kill_everything_under

FAKE_NVML = Path(__file__).parent / "nvml_mig"


def rota(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def plan() -> str:
    """By day since two minutes ago, by night in six hours (UTC)."""
    now = datetime.now(timezone.utc)
    day, night = now - timedelta(minutes=2), now + timedelta(hours=6)
    return (f"geometries:\n  day: [4g.40gb, 3x1g.10gb]\n  night: whole\ncalendar:\n"
            f"  - {{at: '{day:%H:%M}', zone: UTC, geometry: day}}\n"
            f"  - {{at: '{night:%H:%M}', zone: UTC, geometry: night}}\n")


def profiles(env: dict[str, str], cwd: Path) -> list[str | None]:
    nodes = json.loads(rota(env, "nodes", "--json", cwd=cwd).stdout)
    return [(g.get("mig") or {}).get("profile") for g in nodes[0]["gpus"]]


def test_rota_up_cuts_the_gpu_as_the_calendar_says(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "share"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(FAKE_NVML),
                                                        os.environ.get("PYTHONPATH")])))
    data = tmp_path / "data"
    (tmp_path / "mig.yaml").write_text(plan())
    try:
        up = rota(env, "up", "-d", "--port", "0", "--data-dir", str(data), "--mig-plan",
                  str(tmp_path / "mig.yaml"), cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        deadline = time.monotonic() + 60
        while profiles(env, tmp_path) != ["4g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"]:
            assert time.monotonic() < deadline, profiles(env, tmp_path)
            time.sleep(0.2)
        ran = rota(env, "run", "--wait", "--gpus", "1g.10gb", "--memory", "256Mi", "--",
                   "sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert "devices=MIG-fake-00-0" in ran.stdout
    finally:
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        kill_everything_under(data)


def test_a_bad_plan_is_refused_naming_its_field(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"))
    (tmp_path / "mig.yaml").write_text(plan().replace("3x1g.10gb", "8x1g.10gb"))
    done = rota(env, "up", "--port", "0", "--data-dir", str(tmp_path / "data"), "--mig-plan",
                str(tmp_path / "mig.yaml"), "--gpus", "1xH100-80GB", cwd=tmp_path)
    assert done.returncode != 0
    assert "--mig-plan: mig.geometries.day: is valid on no GPU" in done.stderr, done.stderr
