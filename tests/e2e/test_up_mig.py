"""``rota up --node-file`` with a GPU in MIG mode: ``rota nodes`` shows its instances, and
``rota run --gpus 1g.5gb`` runs a job on one, which sees it by its MIG UUID."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from backend_support import kill_everything_under

NODE = """\
name: box
cpu: 4
memory: 8Gi
gpus:
  - {model: A100-40GB, memory: 40Gi}
  - model: A100-40GB
    memory: 40Gi
    mig:
      - {profile: 4g.20gb, start: 0}
      - {profile: 2g.10gb, start: 4}
      - {profile: 1g.5gb, start: 6, uuid: MIG-0c4f1a2e-1g}
"""


def rota(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_job_runs_on_a_mig_instance_of_a_node_file(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "share"))
    data = tmp_path / "data"
    (tmp_path / "node.yaml").write_text(NODE)
    try:
        up = rota(env, "up", "-d", "--port", "0", "--data-dir", str(data), "--node-file",
                  str(tmp_path / "node.yaml"), cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        nodes = json.loads(rota(env, "nodes", "--json", cwd=tmp_path).stdout)
        assert [(g["index"], (g.get("mig") or {}).get("profile")) for g in nodes[0]["gpus"]] == [
            (0, None), (2000, "4g.20gb"), (2004, "2g.10gb"), (2006, "1g.5gb")]
        ran = rota(env, "run", "--wait", "--gpus", "1g.5gb", "--memory", "256Mi", "--",
                   "sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert "devices=MIG-0c4f1a2e-1g" in ran.stdout
    finally:
        rota(env, "down", "--data-dir", str(data), cwd=tmp_path)
        kill_everything_under(data)
