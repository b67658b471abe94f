"""Datasets end to end on the local backend: how soon a job that reads a dataset from a
throttled S3-compatible source starts reading, cold (its launch copies the dataset into the
node cache), warm (a second job, on the cached copy), against a job that reads the same files
from local disk, and when prefetch copied it while the job was queued behind another.

What runs: a real ``rota up`` (``tests/rotaup.py``, four virtual GPUs) whose environment points
at the S3-compatible test server (``.ci/s3``: gofakes3, sending at most ``--bandwidth`` bytes
per second), a dataset of ``--size`` bytes in ``--files`` objects, declared with
``s3://bench/data``. Each job records ``time.time()`` when it opens its first file and when it
has read every byte; "start" is from the moment the client submits it (the prefetch case: from
the moment the job ahead of it ends) to its first open. The warm and local-disk runs are
repeated (``--repeat``, alternately) and their medians reported. Usage::

    eval "$(bash .ci/s3)"; python bench/datasets.py --size 2Gi --bandwidth 200M

Figures: bench/RESULTS.md ("Datasets from S3: cold, warm, local disk, prefetch").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from rota.core.datasets import parse_bytes  # noqa: E402
from rotaup import RotaUp  # noqa: E402
from s3server import s3_server  # noqa: E402

READER = """
import json, os, sys, time
root = sys.argv[1] if sys.argv[1].startswith("/") else os.path.join(os.environ["ROTA_DATASETS"],
                                                                    sys.argv[1])
first, total = None, 0
for name in sorted(os.listdir(root)):
    with open(os.path.join(root, name), "rb") as f:
        first = first or time.time()
        while chunk := f.read(1 << 20):
            total += len(chunk)
json.dump({"first": first, "end": time.time(), "bytes": total}, open(os.environ["OUT"], "w"))
"""


def seed(where: Path, size: int, files: int) -> Path:
    data = where / "bench" / "data"
    data.mkdir(parents=True)
    each = size // files
    block = os.urandom(1 << 20)
    for k in range(files):
        with open(data / f"part-{k:04d}", "wb") as f:
            left = each
            while left:
                f.write(block[:min(left, len(block))])
                left -= min(left, len(block))
    return data


def job(argv: list[str], out: Path, datasets: list[str], **extra: Any) -> dict[str, Any]:
    return {"project": "default", "queue": "default", "entrypoint": argv,
            "env": {"OUT": str(out)}, "datasets": datasets,
            "resources": {"gpu": extra.pop("gpu", 1), "cpu": "100m", "memory": "256Mi"},
            **extra}


def wait_file(path: Path, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.is_file() and path.stat().st_size:
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise TimeoutError(f"no result in {path} after {timeout} s")


def timed(api, body: dict[str, Any], out: Path, timeout: float) -> dict[str, float]:
    began = time.time()
    made = api.post("/v1/jobs", json=body)
    made.raise_for_status()
    seen = wait_file(out, timeout)
    return {"start_s": seen["first"] - began, "read_s": seen["end"] - seen["first"],
            "bytes": seen["bytes"]}


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over ``runs``, and the start times of them all."""
    return {**{k: statistics.median(r[k] for r in runs) for k in runs[0]},
            "starts_s": [round(r["start_s"], 3) for r in runs]}


def run(size: int, files: int, bandwidth: int, timeout: float,
        repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rota-bench-datasets-") as tmp:
        tmp_path = Path(tmp)
        local = seed(tmp_path / "seed", size, files)
        argv = [sys.executable, "-c", READER]
        with s3_server(tmp_path / "seed", tmp_path / "s3", bandwidth) as s3:
            (tmp_path / "up").mkdir()
            up = RotaUp(tmp_path / "up", "--gpus", "4xH100-80GB", "--dataset-cache-size",
                        str(4 * size + (1 << 30)), env={**os.environ, **s3.env},
                        start_timeout_s=120)
            up.start()
            try:
                api = up.client(timeout=600)
                for name, version in (("bench", "1"), ("queued", "1")):
                    api.post("/v1/datasets", json={
                        "name": name, "project": "default", "source": "s3://bench/data",
                        "version": version}).raise_for_status()
                out = tmp_path / "out"
                out.mkdir()
                figures: dict[str, Any] = {
                    "cold": timed(api, job([*argv, "bench"], out / "cold", ["bench"]),
                                  out / "cold", timeout)}
                warm, disk = [], []
                for k in range(repeat):  # alternately, so that the load falls on both alike
                    warm.append(timed(api, job([*argv, "bench"], out / f"warm{k}", ["bench"]),
                                      out / f"warm{k}", timeout))
                    disk.append(timed(api, job([*argv, str(local)], out / f"local{k}", []),
                                      out / f"local{k}", timeout))
                figures["warm"], figures["local_disk"] = median(warm), median(disk)
                figures["prefetch"] = queued(api, argv, tmp_path, out,
                                             up.data_dir / "dataset-cache", timeout)
                figures["object_reads"] = s3.object_reads()
            finally:
                up.close()
    return figures


def queued(api, argv, tmp_path: Path, out: Path, cache: Path,
           timeout: float) -> dict[str, float]:
    """A job on all four GPUs (walltime 1 h) until a gate opens; behind it, one that reads
    dataset ``queued``: the gate opens once prefetch made its copy (it appears complete in the
    cache); start is from then to the queued job's first open."""
    gate = tmp_path / "gate"
    hold = ["/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"]
    api.post("/v1/jobs", json=job(hold, out / "hold", [], gpu=4,
                                  walltime="1h")).raise_for_status()
    time.sleep(3)
    submitted = time.time()
    api.post("/v1/jobs", json=job([*argv, "queued"], out / "queued", ["queued"],
                                  gpu=4)).raise_for_status()
    end = time.monotonic() + timeout
    while not (cache / "queued@1").is_dir():
        if time.monotonic() > end:
            raise TimeoutError("prefetch made no copy")
        time.sleep(0.1)
    copied = time.time()
    time.sleep(2)
    opened = time.time()
    gate.touch()
    seen = wait_file(out / "queued", timeout)
    return {"copied_after_submit_s": copied - submitted, "start_s": seen["first"] - opened,
            "read_s": seen["end"] - seen["first"], "bytes": seen["bytes"]}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="2Gi", help="the dataset's bytes (default 2Gi)")
    parser.add_argument("--files", type=int, default=32, help="objects it is made of")
    parser.add_argument("--bandwidth", default="200M", help="the S3 server's bytes/s")
    parser.add_argument("--repeat", type=int, default=5,
                        help="warm and local-disk runs, alternately (medians reported)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    if not os.environ.get("ROTA_TEST_S3_SERVER"):
        sys.exit('ROTA_TEST_S3_SERVER is not set: eval "$(bash .ci/s3)" first')
    size, bandwidth = parse_bytes(args.size, "--size"), parse_bytes(args.bandwidth,
                                                                    "--bandwidth")
    load = os.getloadavg()[0]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    figures = run(size, args.files, bandwidth, args.timeout, args.repeat)
    cold, warm, disk = figures["cold"], figures["warm"], figures["local_disk"]
    print(json.dumps({
        "size": size, "files": args.files, "bandwidth": bandwidth,
        "machine": f"{cpu_model()}, {os.cpu_count()} CPUs",
        "load_before": load, "load_after": os.getloadavg()[0],
        "commit": commit,
        **figures,
        "cold_over_warm": cold["start_s"] / warm["start_s"],
        "warm_over_local_disk": warm["start_s"] / disk["start_s"]}, indent=2))


if __name__ == "__main__":
    main()
