"""``rota up`` asks only the chosen backend's factory about this machine: a backend whose
nodes are a cluster's (Kubernetes) never probes this machine's GPUs, while the local backend
does. NVML is seen at its boundary: a ``pynvml`` that records each ``nvmlInit``
(``nvml_recorder/pynvml.py``), first on the path of the ``rota up`` process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RECORDER = Path(__file__).parent / "nvml_recorder"


def up(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    calls = tmp_path / "nvml-calls"
    env = dict(os.environ, ROTA_TEST_NVML_CALLS=str(calls),
               PYTHONPATH=os.pathsep.join(filter(None, [str(RECORDER),
                                                        os.environ.get("PYTHONPATH")])),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run([sys.executable, "-m", "rota.cli.main", "up", "--port", "0", *args],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_rota_up_with_kubernetes_never_probes_this_machines_gpus(tmp_path):
    done, calls = up(tmp_path, "--backend", "kubernetes", "--data-dir", str(tmp_path / "data"),
                     "--kubeconfig", str(tmp_path / "no-such-kubeconfig"))
    assert done.returncode != 0 and "--kubeconfig" in done.stderr, done.stderr  # got that far
    assert calls == []


@pytest.mark.parametrize("args", [(), ("--backend", "local")], ids=["default", "named"])
def test_rota_up_with_the_local_backend_asks_nvml(tmp_path, args):
    """The recorder is seen: the same start on the local backend asks NVML (and is stopped
    after: its data directory is a file)."""
    (tmp_path / "data").write_text("")
    done, calls = up(tmp_path, *args, "--data-dir", str(tmp_path / "data"))
    assert done.returncode != 0, done.stderr
    assert len(calls) == 1 and calls[0].startswith("nvmlInit"), (calls, done.stderr)
