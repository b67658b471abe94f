"""rota and kube-scheduler side by side, binding one-GPU Pods on kwok GPU nodes of a real API
server, in one run.

Each scheduler in turn gets the same cluster (``--nodes`` kwok nodes of ``--gpus`` GPUs at node
grain, labelled for this run) and the same Pods: ``--pods`` Pods asking for one
``nvidia.com/gpu``, one CPU and 1Gi, created by ``--workers`` threads as fast as the API server
takes them. What is measured, from a watch of the run's namespace:

- bound: Pods given a node (at most nodes x GPUs: the rest wait, as they must; a run ends
  when all GPUs are bound or when no Pod was bound for ``IDLE_S``: on a loaded machine kwok
  may let some nodes' leases lapse, and nothing is placed on a NotReady node);
- notready: the run's nodes that were not Ready at its end;
- pods/s: bound Pods / seconds from the first creation to the last binding;
- latency: from the moment a Pod's creation was sent to the watch event that shows it bound,
  p50 and p99 over the bound Pods.

Schedulers:

- ``kube-scheduler``: the upstream scheduler the fixture started (``.ci/kube --with-scheduler``),
  with its configuration's defaults, among them its API client's rate limit (50 requests/s,
  burst 100);
- ``kube-scheduler-unthrottled``: the same binary started here with a profile of its own and
  that limit raised to 5,000/s, so that the limit alone does not decide the comparison;
- ``rota``: ``rota up --backend kubernetes`` started here (SQLite store, policy ``fair``: DRF,
  quotas, preemption, backfill), the Pods carrying ``schedulerName: rota`` and the label of a
  queue with a GPU quota of the cluster's size: each Pod becomes a job (intake), is scheduled
  under the quota and fair share, and its Pod is bound.

Needs the test fixture: ``eval "$(.ci/kube --with-scheduler)"``; then
``python bench/kube.py`` (``--json`` for the figures only). The nodes and the namespace are
deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from rota.backends.kube.api import NODES, KubeApi, KubeError, connect, pods_path  # noqa: E402
from rotaup import ROTA, RotaUp  # noqa: E402

BENCH_LABEL = "rota.dev/bench"
UNTHROTTLED = "bench-unthrottled"
IDLE_S = 60.0  # no Pod bound for that long: the run is over
SCHEDULER_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: %s, qps: 5000, burst: 5000}
profiles: [{schedulerName: %s}]
"""


def node(name: str, run: str, gpus: int) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", BENCH_LABEL: run,
                                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                    "nvidia.com/gpu.memory": "81920"}},
            "status": {"capacity": resources, "allocatable": dict(resources)}}


def pod(name: str, run: str, scheduler: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"rota.dev/queue": "bench"}},
            "spec": {"schedulerName": scheduler, "nodeSelector": {BENCH_LABEL: run},
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "infinity"],
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


class Watcher:
    """When each Pod of ``namespace`` was first seen bound (monotonic seconds)."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._version = self.api.list(pods_path(self.namespace)).resource_version
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            for event in self.api.watch(pods_path(self.namespace), self._version, 60):
                obj = event["object"]
                self._version = obj["metadata"].get("resourceVersion", self._version)
                if event["type"] in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                    self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
                if self._stop.is_set():
                    return


def measure(api: KubeApi, namespace: str, run: str, scheduler: str, pods: int, workers: int,
            expected: int, timeout_s: float, args_nodes: int) -> dict[str, Any]:
    watcher = Watcher(api, namespace)
    watcher.start()
    sent: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"p-{i:05d}"
        sent[name] = time.monotonic()
        api.create(pods_path(namespace), pod(name, run, scheduler))
    start = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, range(pods)))
    created_s = time.monotonic() - start
    end = time.monotonic() + timeout_s
    last, seen = time.monotonic(), 0
    while len(watcher.bound) < expected and time.monotonic() < end:
        time.sleep(0.5)
        if len(watcher.bound) != seen:
            last, seen = time.monotonic(), len(watcher.bound)
            progress(f"{scheduler}: {seen} bound")
        elif time.monotonic() - last > IDLE_S:  # nodes gone NotReady: nothing more fits
            break
    time.sleep(2.0)  # anything bound beyond the GPUs there are would show now
    watcher.stop()
    bound = dict(watcher.bound)
    latencies = sorted(bound[n] - sent[n] for n in bound)
    span = (max(bound.values()) - start) if bound else float("nan")
    return {"scheduler": scheduler, "pods": pods, "bound": len(bound),
            "notready": args_nodes - ready(api, run),
            "create_s": round(created_s, 1), "span_s": round(span, 1),
            "pods_per_s": round(len(bound) / span, 1) if bound else 0.0,
            "p50_s": round(pct(latencies, 0.50), 2), "p99_s": round(pct(latencies, 0.99), 2)}


def progress(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def clear(api: KubeApi, namespace: str) -> None:
    def deleted() -> bool:
        try:
            api.request("DELETE", pods_path(namespace), body={"gracePeriodSeconds": 0},
                        timeout=120.0)
        except KubeError as exc:  # a loaded API server ends a long collection delete at its
            progress(f"deleting the Pods: {exc}; asking again")  # request timeout (60 s)
            return False
        return not api.list(pods_path(namespace), limit=1).items
    wait(deleted, "the Pods to be deleted", 900)


def wait(predicate, what: str, timeout_s: float) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if value := predicate():
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


class RotaPlane(RotaUp):
    """``rota up --backend kubernetes`` (policy ``fair``) started in a subprocess, and the rota
    command against it."""

    def __init__(self, root: Path, kubeconfig: str, namespace: str, run: str) -> None:
        super().__init__(root, "--backend", "kubernetes", "--kubeconfig", kubeconfig,
                         "--kube-namespace", namespace, "--kube-node-selector",
                         f"{BENCH_LABEL}={run}", "--policy", "fair",
                         pythonpath=str(ROOT / "src"), start_timeout_s=180)
        self.start()

    def rota(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*ROTA, *args], env=self.env, text=True, capture_output=True,
                              timeout=300)

    def setup(self, project: str, gpus: int) -> None:
        queues = self.root / "queues.yaml"
        queues.write_text(f"queues:\n  - name: bench\n    quota:\n"
                          f"      any: {{nominal: {{gpu: {gpus}}}}}\n")
        for args in (("project", "create", project), ("queue", "apply", str(queues))):
            done = self.rota(*args)
            if done.returncode:
                raise SystemExit(f"rota {' '.join(args)}: {done.stderr}")

    def close(self) -> None:
        self.stop(timeout=60)


def unthrottled_scheduler(root: Path, kubeconfig: str) -> subprocess.Popen[bytes]:
    # the binaries of the fixture that runs (its exports name them), never a guess at a cache
    bin_dir = os.environ.get("ROTA_KUBE_BIN")
    binary = Path(bin_dir or ".") / "kube-scheduler"
    if not bin_dir or not binary.is_file():
        raise SystemExit("no kube-scheduler of the fixture (ROTA_KUBE_BIN): run "
                         "eval \"$(.ci/kube --with-scheduler)\" first")
    config = root / "scheduler.yaml"
    config.write_text(SCHEDULER_CONFIG % (kubeconfig, UNTHROTTLED))
    log = open(root / "kube-scheduler.log", "ab")
    return subprocess.Popen([str(binary), "--config", str(config), "--secure-port", "0"],
                            stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--only", action="append",
                        choices=["kube-scheduler", "kube-scheduler-unthrottled", "rota"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kubeconfig = os.environ.get("ROTA_TEST_KUBECONFIG") or os.environ["KUBECONFIG"]
    api = KubeApi(connect(kubeconfig))
    run = f"bench-{uuid.uuid4().hex[:8]}"
    root = Path(tempfile.mkdtemp(prefix="rota-bench-kube-"))
    names = [f"{run}-{i:04d}" for i in range(args.nodes)]
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": run}})
    results, load = [], [os.getloadavg()[0]]
    try:
        with ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(lambda n: api.create(NODES, node(n, run, args.gpus)), names))
        wait(lambda: ready(api, run) >= args.nodes, "kwok to make the nodes Ready", 900)
        expected = min(args.pods, args.nodes * args.gpus)
        for scheduler in args.only or ["kube-scheduler", "kube-scheduler-unthrottled", "rota"]:
            helper = None
            if scheduler == "rota":
                helper = RotaPlane(root, kubeconfig, run, run)
                helper.setup(run, args.nodes * args.gpus)
            elif scheduler == "kube-scheduler-unthrottled":
                helper = unthrottled_scheduler(root, kubeconfig)
                time.sleep(5)
            name = {"kube-scheduler": "default-scheduler", "rota": "rota"}.get(scheduler,
                                                                                UNTHROTTLED)
            try:
                progress(f"{scheduler}: creating {args.pods} Pods")
                result = measure(api, run, run, name, args.pods, args.workers, expected,
                                 args.timeout, args.nodes)
            finally:
                if isinstance(helper, RotaPlane):
                    helper.close()
                elif helper is not None:
                    helper.terminate()
                    helper.wait(30)
            results.append({**result, "scheduler": scheduler})
            progress(f"{scheduler}: {json.dumps(results[-1])}")  # kept if a later one fails
            clear(api, run)
            load.append(os.getloadavg()[0])
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{run}")
        with ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(lambda n: api.delete(f"{NODES}/{n}"), names))
    report(args, results, load, root)


def ready(api: KubeApi, run: str) -> int:
    count, cont = 0, None
    while True:
        page = api.list(NODES, limit=500, cont=cont, selector=f"{BENCH_LABEL}={run}")
        count += sum(any(c["type"] == "Ready" and c["status"] == "True"
                         for c in (n.get("status") or {}).get("conditions") or [])
                     for n in page.items)
        if not page.next:
            return count
        cont = page.next


def report(args, results: list[dict[str, Any]], load: list[float], root: Path) -> None:
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(),
               "load_1m": [round(x, 1) for x in load], "logs": str(root)}
    if args.json:
        print(json.dumps({"nodes": args.nodes, "gpus": args.gpus, "pods": args.pods,
                          "machine": machine, "results": results}, indent=2))
        return
    print(f"{args.nodes} kwok nodes x {args.gpus} GPUs, {args.pods} one-GPU Pods; {machine}")
    print("| scheduler | bound | not Ready | create s | span s | pods/s | p50 s | p99 s |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        print(f"| {r['scheduler']} | {r['bound']} | {r['notready']} | {r['create_s']} | "
              f"{r['span_s']} | "
              f"{r['pods_per_s']} | {r['p50_s']} | {r['p99_s']} |")


if __name__ == "__main__":
    main()
