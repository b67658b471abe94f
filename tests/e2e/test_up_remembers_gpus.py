"""``rota up --gpus SPEC`` is remembered in the data directory: a later ``rota up`` without
``--gpus`` (or ``--node-file``) declares the same virtual GPUs and says so, instead of
finding none and rejecting every GPU job; ``--gpus none`` forgets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from backend_support import kill_everything_under


def rota(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def gpus_of(env: dict[str, str], cwd: Path) -> list[str]:
    nodes = json.loads(rota(env, "nodes", "--json", cwd=cwd).stdout)
    return [d["model"] for n in nodes for d in n["gpus"]]


def test_the_gpus_of_the_last_rota_up_are_declared_again_until_forgotten(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "share"))
    data = tmp_path / "data"
    start = ("up", "-d", "--port", "0", "--data-dir", str(data))
    try:
        first = rota(env, *start, "--gpus", "2xH100-80GB", cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert gpus_of(env, tmp_path) == ["H100-80GB", "H100-80GB"]
        assert "as the last rota up --gpus declared them" not in first.stdout
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        again = rota(env, *start, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert "2 x H100-80GB, as the last rota up --gpus declared them (--gpus none forgets " \
               "them)" in again.stdout
        assert gpus_of(env, tmp_path) == ["H100-80GB", "H100-80GB"]
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        forgot = rota(env, *start, "--gpus", "none", cwd=tmp_path)
        assert forgot.returncode == 0, forgot.stderr
        assert "as the last rota up" not in forgot.stdout and not (data / "local-gpus").exists()
    finally:
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        kill_everything_under(data)
