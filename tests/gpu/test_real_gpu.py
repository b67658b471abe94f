"""On a machine with NVIDIA GPUs, a real ``rota up`` that finds them through NVML (no ``--gpus``):
its inventory, a job pinned to its GPU, two half-GPU jobs on one GPU at once, the GPU-memory
watcher stopping a job over its share, the shipped training example with PyTorch on the GPU
preempted and resumed with the uninterrupted result, and, where an MPS daemon can be started,
a fractional job held to its memory by MPS, and the metrics showing a busy GPU through NVML. Everywhere else (no driver, as in CI, where tests
fake the GPU at the NVML boundary) the module is skipped. PyTorch is needed by all but the
inventory test, in the Python that runs the tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from rota.backends.gpus import model_name
from rota.backends.nvml import Nvml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from serverkit import RotaServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "checkpointing" / "train.py"
ENDED = ("succeeded", "failed", "cancelled", "rejected")


def _devices() -> list:
    nvml = Nvml.load()
    if nvml is None:
        return []
    try:
        return nvml.devices()
    finally:
        nvml.close()


DEVICES = _devices()
pytestmark = [pytest.mark.may_skip,  # CI has no GPU
              pytest.mark.skipif(not DEVICES, reason="no NVIDIA GPU (NVML found none)")]


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


needs_torch = pytest.mark.skipif(not _has_torch(), reason="PyTorch is not installed")


def rota(server: RotaServer, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**server.env, "ROTA_URL": server.url, "ROTA_TOKEN": server.token, "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def show(server: RotaServer, job: str) -> dict:
    done = rota(server, "show", job, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def until(server: RotaServer, job: str, states: tuple[str, ...], timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        shown = show(server, job)
        if shown["state"] in states or time.monotonic() > deadline:
            assert shown["state"] in states, (shown, rota(server, "logs", job).stdout)
            return shown
        time.sleep(0.3)


def submit(server: RotaServer, directory: Path, body: dict) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{body['name']}.yaml"
    path.write_text(json.dumps(body))  # JSON is YAML
    done = rota(server, "submit", str(path), "--json", cwd=directory)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def python_job(name: str, code: str, **extra) -> dict:
    return {"name": name, "entrypoint": [sys.executable, "-c", textwrap.dedent(code)],
            "workdir": ".", **extra}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[RotaServer]:
    s = RotaServer(tmp_path_factory.mktemp("gpu"), gpus=None)
    try:
        s.start()
        yield s
    finally:
        s.close()


def test_rota_nodes_lists_the_gpus_nvml_reports(server):
    nodes = json.loads(rota(server, "nodes", "--json").stdout)
    assert len(nodes) == 1
    gpus = nodes[0]["gpus"]
    assert [g["index"] for g in gpus] == [d.index for d in DEVICES]
    assert [g["model"] for g in gpus] == [model_name(d.name) for d in DEVICES]
    assert [g["memory_mib"] for g in gpus] == [d.memory_mib for d in DEVICES]
    assert all(g["healthy"] for g in gpus), gpus
    assert DEVICES[0].name in nodes[0]["labels"]["nvidia.com/gpu.product"]
    table = rota(server, "nodes").stdout
    assert model_name(DEVICES[0].name) in table, table


@needs_torch
def test_a_one_gpu_job_sees_exactly_its_gpu(server, tmp_path):
    job = submit(server, tmp_path, python_job("pinned", """
        import os, torch
        print(os.environ["CUDA_VISIBLE_DEVICES"], torch.cuda.device_count(),
              torch.cuda.get_device_properties(0).uuid)
        """, resources={"gpu": 1}))
    final = until(server, job, ENDED)
    logs = rota(server, "logs", job).stdout
    assert final["state"] == "succeeded", logs
    visible, count, uuid = logs.split()
    assert count == "1" and int(visible) in {d.index for d in DEVICES}, logs
    # CUDA numbers devices as NVML does (CUDA_DEVICE_ORDER): the GPU it sees is the one rota gave
    assert DEVICES[int(visible)].uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-")


@needs_torch
def test_two_half_gpu_jobs_compute_on_one_gpu_at_the_same_time(server, tmp_path):
    meet = tmp_path / "meet"
    meet.mkdir()
    code = f"""
        import os, pathlib, time, torch
        me = os.environ["ROTA_JOB_ID"]
        x = torch.ones(1024, 1024, device="cuda")
        pathlib.Path({str(meet)!r}, me).write_text(os.environ["CUDA_VISIBLE_DEVICES"])
        deadline = time.monotonic() + 60
        while len(os.listdir({str(meet)!r})) < 2 and time.monotonic() < deadline:
            x = x @ x / 1024
        torch.cuda.synchronize()
        print("met", len(os.listdir({str(meet)!r})), os.environ["ROTA_GPU_SHARE"])
        """
    jobs = [submit(server, tmp_path / n, python_job(n, code, resources={"gpu": 0.5}))
            for n in ("left", "right")]
    for job in jobs:
        final = until(server, job, ENDED)
        logs = rota(server, "logs", job).stdout
        assert final["state"] == "succeeded" and logs.split() == ["met", "2", "0.5"], logs
    assert len({(meet / j).read_text() for j in jobs}) == 1


@needs_torch
def test_a_job_over_its_gpu_memory_is_stopped_with_the_reason(server, tmp_path):
    job = submit(server, tmp_path, python_job("greedy", """
        import time, torch
        blocks = [torch.empty(1024 ** 3, dtype=torch.uint8, device="cuda") for _ in range(6)]
        print("holding 6 GiB", flush=True)
        time.sleep(120)
        """, resources={"gpu": 0.25, "gpu_memory": "2Gi"}))
    final = until(server, job, ENDED, timeout=90)
    assert final["state"] == "failed", final
    assert "gpu-memory-exceeded" in json.dumps(final), rota(server, "show", job).stdout


@needs_torch
def test_the_torch_example_preempted_on_the_gpu_ends_with_the_uninterrupted_result(
        server, tmp_path):
    args = ["--torch", "--steps", "1500", "--every", "200", "--step-seconds", "0.01"]
    alone = tmp_path / "alone"
    alone.mkdir()
    expected = subprocess.run([sys.executable, str(TRAIN), *args], cwd=alone, text=True,
                              capture_output=True, timeout=300, check=True).stdout
    expected = expected.strip().splitlines()[-1]
    assert expected.startswith("result: "), expected
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(TRAIN, work / "train.py")
    low = submit(server, work, {
        "name": "low", "entrypoint": [sys.executable, "train.py", *args], "workdir": ".",
        "checkpoint": {"signal": "SIGUSR1", "grace": "30s"}, "resources": {"gpu": 1}})
    deadline = time.monotonic() + 120
    while "checkpoint at step" not in rota(server, "logs", low).stdout:
        assert time.monotonic() < deadline, show(server, low)
        time.sleep(0.5)
    high = submit(server, tmp_path / "high", python_job(
        "high", "import torch; print(torch.ones(1, device='cuda').item())",
        priority=10, resources={"gpu": 1}))
    assert until(server, high, ENDED)["state"] == "succeeded"
    final = until(server, low, ENDED, timeout=240)
    logs = rota(server, "logs", low).stdout
    assert final["state"] == "succeeded", logs
    assert final["attempts"] >= 1, final
    assert "preempted" in rota(server, "show", low).stdout
    assert "resumed from step" in logs, logs
    assert logs.strip().splitlines()[-1] == expected


@needs_torch
def test_metrics_show_a_busy_gpu_through_nvml(server, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    job = submit(server, tmp_path, python_job("busy", """
        import time, torch
        x = torch.randn(8192, 8192, device="cuda")
        hold = torch.empty(3 * 1024 ** 3, dtype=torch.uint8, device="cuda")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            x = (x @ x).clamp_(-1, 1)
        torch.cuda.synchronize()
        """, resources={"gpu": 1}))
    until(server, job, ("running",))
    index = None
    deadline = time.monotonic() + 35
    while time.monotonic() < deadline:
        with server.client() as c:
            text = c.get("/metrics").text
        found = {(s.name, s.labels.get("gpu")): s.value
                 for f in text_string_to_metric_families(text) for s in f.samples}
        busy = [g for (name, g), v in found.items()
                if name == "rota_gpu_utilization_ratio" and v > 0.5]
        if busy:
            index = busy[0]
            break
        time.sleep(1)
    assert index is not None, text
    assert found[("rota_gpu_memory_used_bytes", index)] > 3 * 1024 ** 3
    assert found[("rota_gpu_allocated_ratio", index)] == 1.0
    rota(server, "cancel", job)


def _mps_control() -> str | None:
    return shutil.which("nvidia-cuda-mps-control")


@needs_torch
@pytest.mark.skipif(_mps_control() is None, reason="no nvidia-cuda-mps-control")
def test_mps_holds_a_fractional_job_to_its_memory(tmp_path):
    pipes, logs = tmp_path / "mps-pipe", tmp_path / "mps-log"
    pipes.mkdir(mode=0o777)
    logs.mkdir(mode=0o777)
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipes),
           "CUDA_MPS_LOG_DIRECTORY": str(logs)}
    started = subprocess.run([_mps_control(), "-d"], env=env, capture_output=True, text=True)
    if started.returncode != 0:
        pytest.skip(f"the MPS daemon did not start: {started.stderr}")
    (tmp_path / "rota").mkdir()
    s = RotaServer(tmp_path / "rota", gpus=None)
    s.env.update(CUDA_MPS_PIPE_DIRECTORY=str(pipes), CUDA_MPS_LOG_DIRECTORY=str(logs))
    try:
        s.start()
        code = """
            import sys, torch
            try:
                torch.empty(int(sys.argv[1]) * 1024 ** 3, dtype=torch.uint8, device="cuda")
            except torch.OutOfMemoryError:
                print("out of memory")
            else:
                print("allocated")
            """
        jobs = {}
        for gib in (1, 6):
            body = python_job(f"mps{gib}", code, resources={"gpu": 0.25, "gpu_memory": "4Gi"})
            body["entrypoint"] += [str(gib)]
            jobs[gib] = submit(s, tmp_path / f"j{gib}", body)
        for gib, job in jobs.items():
            final = until(s, job, ENDED)
            assert final["state"] == "succeeded", rota(s, "logs", job).stdout
        assert rota(s, "logs", jobs[1]).stdout.strip() == "allocated"
        assert rota(s, "logs", jobs[6]).stdout.strip() == "out of memory"
    finally:
        s.close()
        subprocess.run([_mps_control()], input="quit\n", env=env, text=True, timeout=30)
