"""How soon work started directly on Slurm or Kubernetes is in rota's inventory, and what
watching for it costs.

    eval "$(.ci/slurm)"; eval "$(.ci/kube)"               # the fixtures
    python bench/mirror.py slurm --jobs 30
    python bench/mirror.py kubernetes --pods 30
    python bench/mirror.py all --json

- slurm: ``rota up --backend slurm`` (rota up's defaults: a pass every 2 s, the nodes read
  every 10 s, the watcher every 0.5 s) on the fixture cluster; then, one after the other,
  ``--jobs`` plain ``sbatch --nodelist=node2 --gres=gpu:h100:1`` jobs. For each, one thread
  asks ``squeue`` every 50 ms until Slurm says the job runs, another asks rota's ``GET
  /v1/nodes`` every 50 ms until the job holds its GPU there; the figure is the difference,
  p50, p99 and the largest (the 50 ms polls bound its resolution). Each job is then
  cancelled, and the time until rota shows its GPU free again is measured the same way.
  Cost: the watcher's one extra ``squeue`` per period (``watch.FOREIGN_SQUEUE``), timed
  alone, with the cluster's jobs as they are and again with ``--queued`` more held jobs in
  Slurm's queue (wall time and the CPU time of the ``squeue`` process).
- kubernetes: ``rota up --backend kubernetes`` on a kwok node of 4 GPUs of its own; ``--pods``
  Pods of another scheduler, each created already bound (``spec.nodeName``) to that node and
  asking for one ``nvidia.com/gpu``, one after the other; from the creation's answer to
  rota's ``GET /v1/nodes`` showing it, and from the deletion's answer to showing it gone.

Every run uses temporary directories and removes what it created.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from rota.backends.kube.api import NODES, KubeApi, connect, pods_path  # noqa: E402
from rota.backends.slurm.watch import FOREIGN_SQUEUE  # noqa: E402
from rotaup import RotaUp  # noqa: E402

GPU_TYPES = "h100=H100-80GB,a100=A100-40GB"
POLL_S = 0.05


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def figures(values: list[float]) -> dict[str, float]:
    return {"p50_s": round(percentile(values, 50), 3), "p99_s": round(percentile(values, 99), 3),
            "max_s": round(max(values), 3), "n": len(values)}


def until(check: Callable[[], bool], timeout_s: float = 60.0) -> float:
    """Ask ``check`` every ``POLL_S`` until it holds; the monotonic time it first held."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if check():
            return time.monotonic()
        time.sleep(POLL_S)
    raise TimeoutError("timed out")


class Plane(RotaUp):
    """``rota up`` with its defaults but ``flags``, and an operator's client."""

    def __init__(self, root: Path, *flags: str) -> None:
        super().__init__(root, *flags, pythonpath=str(ROOT / "src"), start_timeout_s=120)
        self.start()
        self.api = self.client(timeout=30)

    def holders(self, node: str) -> set[str]:
        found = [n for n in self.api.get("/v1/nodes").json() if n["name"] == node]
        return {f["holder"] for n in found for f in n["foreign"]}


def squeue_cost(runs: int = 20) -> dict[str, float]:
    """Wall and CPU seconds of one ``FOREIGN_SQUEUE``, median of ``runs``."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run(FOREIGN_SQUEUE, capture_output=True, check=True)
        walls.append(time.perf_counter() - began)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {"wall_ms": round(percentile(walls, 50) * 1000, 1),
            "cpu_ms": round(percentile(cpus, 50) * 1000, 1)}


def slurm(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="rota-bench-mirror-"))
    plane = Plane(root, "--backend", "slurm", "--slurm-gpu-types", GPU_TYPES)
    seen, freed = [], []
    try:
        for k in range(args.jobs):
            out = subprocess.run(["sbatch", "--parsable", "--nodelist=node2",
                                  "--gres=gpu:h100:1", f"--job-name=mirror-{k}",
                                  "--output=/dev/null", "--wrap", "sleep 600"],
                                 capture_output=True, text=True, check=True).stdout
            job = out.strip().split(";")[0]
            holder = f"slurm job {job} ({os.environ.get('USER', 'root')})"
            runs = until(lambda: subprocess.run(
                ["squeue", "--noheader", "--format=%T", "--jobs", job], capture_output=True,
                text=True).stdout.strip() == "RUNNING")
            shown = until(lambda: any(h.startswith(f"slurm job {job} ")
                                      for h in plane.holders("node2")))
            seen.append(max(0.0, shown - runs))
            subprocess.run(["scancel", job], check=True)
            gone = until(lambda: not subprocess.run(
                ["squeue", "--noheader", "--format=%i", "--jobs", job], capture_output=True,
                text=True).stdout.strip())
            cleared = until(lambda: not any(h.startswith(f"slurm job {job} ")
                                            for h in plane.holders("node2")))
            freed.append(max(0.0, cleared - gone))
            progress(f"slurm: {k + 1}/{args.jobs} ({holder})")
    finally:
        plane.end()
        shutil.rmtree(root, ignore_errors=True)
    cost = {"as_is": squeue_cost()}
    held = []
    try:
        for start in range(0, args.queued, 500):
            for _ in range(min(500, args.queued - start)):
                held.append(subprocess.run(
                    ["sbatch", "--parsable", "--hold", "--job-name=mirror-queued",
                     "--output=/dev/null", "--wrap", "true"],
                    capture_output=True, text=True, check=True).stdout.strip().split(";")[0])
        cost[f"with_{args.queued}_queued"] = squeue_cost()
    finally:
        for start in range(0, len(held), 500):
            subprocess.run(["scancel", *held[start:start + 500]], capture_output=True)
    return {"seen": figures(seen), "freed": figures(freed), "squeue": cost}


def kubernetes(args: argparse.Namespace) -> dict[str, Any]:
    kubeconfig = os.environ.get("ROTA_TEST_KUBECONFIG") or os.environ["KUBECONFIG"]
    api = KubeApi(connect(kubeconfig))
    run = f"mirror-{uuid.uuid4().hex[:8]}"
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": run}})
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "4"}
    api.create(NODES, {"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": run, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                    "labels": {"type": "kwok", "rota.dev/bench": run}},
                       "status": {"capacity": resources, "allocatable": dict(resources)}})
    root = Path(tempfile.mkdtemp(prefix="rota-bench-mirror-"))
    plane = Plane(root, "--backend", "kubernetes", "--kubeconfig", kubeconfig,
                  "--kube-namespace", run, "--kube-default-image", "busybox",
                  "--kube-node-selector", f"rota.dev/bench={run}")
    seen, freed = [], []
    try:
        until(lambda: any(n["name"] == run for n in plane.api.get("/v1/nodes").json()), 120)
        for k in range(args.pods):
            name = f"direct-{k}"
            api.create(pods_path(run), {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeName": run, "schedulerName": "default-scheduler",
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "busybox",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
            created = time.monotonic()
            shown = until(lambda: any(f"pod {run}/{name} " in h for h in plane.holders(run)))
            seen.append(shown - created)
            api.delete(f"{pods_path(run)}/{name}", grace_s=0)
            deleted = time.monotonic()
            cleared = until(lambda: not any(f"pod {run}/{name} " in h
                                            for h in plane.holders(run)))
            freed.append(cleared - deleted)
            progress(f"kubernetes: {k + 1}/{args.pods}")
    finally:
        plane.end()
        shutil.rmtree(root, ignore_errors=True)
        api.delete(f"/api/v1/namespaces/{run}")
        api.delete(f"{NODES}/{run}")
    return {"seen": figures(seen), "freed": figures(freed)}


def progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{text}\033[K", end="", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=("slurm", "kubernetes", "all"))
    parser.add_argument("--jobs", type=int, default=30, help="plain sbatch jobs, one by one")
    parser.add_argument("--queued", type=int, default=2000,
                        help="held jobs in Slurm's queue for the second squeue timing")
    parser.add_argument("--pods", type=int, default=30, help="Pods of another scheduler")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": f"{platform.node()}, {os.cpu_count()} cores",
                               "load_before": round(os.getloadavg()[0], 2)}
    if args.engine in ("slurm", "all"):
        results["slurm"] = slurm(args)
    if args.engine in ("kubernetes", "all"):
        results["kubernetes"] = kubernetes(args)
    results["load"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
