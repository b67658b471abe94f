"""rota on Slurm against plain ``sbatch``, side by side on the fixture cluster.

    eval "$(.ci/slurm)"                                  # the fixture: 4 nodes, 16 GPUs
    python bench/slurm.py throughput --jobs 1000 --seconds 5
    python bench/slurm.py fairness --first 160 --second 16 --seconds 5
    python bench/slurm.py all --json                     # both, the standard sizes

- throughput: ``--jobs`` one-GPU jobs (1 CPU, 100 MiB) that each sleep ``--seconds``, submitted
  one after the other as fast as the submitter goes: through ``sbatch`` (one process per job,
  as a script would) and through rota (``POST /v1/jobs`` to a ``rota up --backend slurm``,
  which queues them and submits each to Slurm, pinned where it placed it, once it fits).
  Submits/s: jobs / time of the submitting loop (for rota, also the rate at which it handed
  jobs to Slurm: jobs / (last Slurm submit time - first)). Submit-to-running: from the moment
  the client submitted a job to the moment its command started (the command writes the time
  first thing; for rota inside its ``srun`` step), p50 and p99 over all jobs: with 16 GPUs,
  most of it is waiting for a GPU, so it measures how quickly each system refills freed GPUs.
  Drain: from the first submit to the end of the last job. Refill: the median time a freed
  GPU stood idle, from a job's end to the start of the next job's command on its node (each
  command writes its node too; see ``refill_gaps``): what each system adds per GPU turn; with
  ``--json`` also its 90th percentile and mean (the drain is about the first start plus the
  turns' lengths and gaps) and the first start (from the first submit).
- fairness: project ``a`` submits ``--first`` jobs, then project ``b`` submits ``--second``.
  Slurm (priority/basic, as the fixture and many small sites run it) starts them in the order
  they came, one partition queue for all; rota (``--policy fair``: dominant-resource fairness
  between projects) gives freed GPUs to ``b`` first, since ``a`` holds them all. The figure is
  ``b``'s submit-to-running time under each.

Every run uses temporary directories and cancels what it left in Slurm. The control plane
runs with ``--interval`` seconds between passes (default 2, rota up's default): Slurm tells
nobody when a job ends, so rota sees a freed GPU at its next pass.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from rota.backends.slurm.attempts import instance  # noqa: E402
from rotaup import RotaUp  # noqa: E402
GPU_TYPES = "h100=H100-80GB,a100=A100-40GB"
COMMAND = ('echo "$0 start $(date +%s.%N) $SLURMD_NODENAME" >> {starts}; sleep {seconds}; '
           'echo "$0 end $(date +%s.%N) $SLURMD_NODENAME" >> {starts}')


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def fresh(work: Path) -> Path:
    """A directory of its own for one run's start and end times: the job names of two runs
    may be the same (every control plane numbers its jobs from 1)."""
    where = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    where.chmod(0o755)
    return where


def read_times(starts: Path, nodes: dict[str, str] | None = None
               ) -> tuple[dict[str, float], dict[str, float]]:
    """When each job's command started and ended; ``nodes`` gets the node it ran on."""
    begun, ended = {}, {}
    for line in starts.read_text().splitlines() if starts.exists() else ():
        name, what, when, *node = line.split()
        (begun if what == "start" else ended)[name] = float(when)
        if nodes is not None and node:
            nodes[name] = node[0]
    return begun, ended


def refill_gaps(begun: dict[str, float], ended: dict[str, float],
                nodes: dict[str, str]) -> list[float]:
    """Per node, the time from each job's end to the start of the job that took its place:
    the k-th start on a node after its first ``slots`` (the most jobs it ran at once) is
    matched with the (k - slots)-th end there. All jobs ask for the same (one GPU), so this
    is the time a freed GPU stood idle."""
    gaps: list[float] = []
    for node in set(nodes.values()):
        names = [n for n in nodes if nodes[n] == node and n in begun and n in ended]
        events = sorted([(begun[n], 1) for n in names] + [(ended[n], -1) for n in names])
        slots = max((sum(d for _, d in events[:k + 1]) for k in range(len(events))), default=0)
        starts = sorted(begun[n] for n in names)
        ends = sorted(ended[n] for n in names)
        gaps.extend(s - e for s, e in zip(starts[slots:], ends))
    return gaps


def wait_ended(starts: Path, names: set[str], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if names <= set(read_times(starts)[1]):
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out: {len(names - set(read_times(starts)[1]))} jobs never ended")


def summary(submitted: dict[str, float], starts: Path, submit_s: float) -> dict[str, Any]:
    nodes: dict[str, str] = {}
    begun, ended = read_times(starts, nodes)
    waits = [begun[n] - t for n, t in submitted.items()]
    first = min(submitted.values())
    gaps = refill_gaps(begun, ended, nodes)
    return {"jobs": len(submitted), "submits_per_s": round(len(submitted) / submit_s, 1),
            "p50_s": round(percentile(waits, 50), 2), "p99_s": round(percentile(waits, 99), 2),
            "drain_s": round(max(ended[n] for n in submitted) - first, 1),
            "first_start_s": round(min(begun[n] for n in submitted) - first, 2),
            "refill_p50_s": round(percentile(gaps, 50), 2) if gaps else None,
            "refill_p90_s": round(percentile(gaps, 90), 2) if gaps else None,
            "refill_mean_s": round(sum(gaps) / len(gaps), 2) if gaps else None}


# -- plain sbatch ------------------------------------------------------------------------------

def plain(groups: list[tuple[str, int]], seconds: float, work: Path) -> dict[str, dict]:
    """sbatch every job of every (name, count) group in turn; per group, the summary."""
    starts = fresh(work) / "plain-starts"
    submitted: dict[str, dict[str, float]] = {}
    began = time.monotonic()
    for group, count in groups:
        for k in range(count):
            name = f"plain-{group}-{k}"
            submitted.setdefault(group, {})[name] = time.time()
            subprocess.run(["sbatch", "--parsable", "--gres=gpu:1", "--cpus-per-task=1",
                            "--mem=100M", f"--job-name={name}", "--output=/dev/null",
                            "--wrap", COMMAND.format(starts=starts, seconds=seconds)
                            .replace("$0", name)], check=True, capture_output=True)
    submit_s = time.monotonic() - began
    every = {n for g in submitted.values() for n in g}
    wait_ended(starts, every, timeout=3600)
    return {g: summary(s, starts, submit_s) for g, s in submitted.items()}


# -- rota --------------------------------------------------------------------------------------

class Plane(RotaUp):
    """``rota up --backend slurm`` started on the fixture cluster, and an operator's client."""

    def __init__(self, root: Path, interval: float, policy: str) -> None:
        super().__init__(root, "--backend", "slurm", "--slurm-gpu-types", GPU_TYPES,
                         "--interval", str(interval), "--policy", policy,
                         pythonpath=str(ROOT / "src"), start_timeout_s=120)
        self.start()
        self.api = self.client(timeout=60)

    def project(self, name: str) -> None:
        self.api.post("/v1/projects", json={"name": name}).raise_for_status()
        me = self.api.get("/v1/whoami").json()["user"]
        self.api.post(f"/v1/users/{me}/projects", json={"project": name}).raise_for_status()

    def close(self) -> None:
        self.end()
        mine = f"@{instance(self.data_dir)}"
        out = subprocess.run(["squeue", "--noheader", "--format=%i|%k"], capture_output=True,
                             text=True).stdout
        live = [line.split("|")[0] for line in out.splitlines() if line.endswith(mine)]
        if live:
            subprocess.run(["scancel", *live], capture_output=True)


def through_rota(groups: list[tuple[str, int]], seconds: float, work: Path, interval: float,
                 policy: str) -> dict[str, dict]:
    starts = fresh(work) / "rota-starts"
    root = Path(tempfile.mkdtemp(prefix="rota-bench-slurm-", dir=work))
    plane = Plane(root, interval, policy)
    try:
        for group, _ in groups:
            if group != "default":
                plane.project(group)
        submitted: dict[str, dict[str, float]] = {}
        began = time.monotonic()
        for group, count in groups:
            for _ in range(count):
                sent = time.time()
                reply = plane.api.post("/v1/jobs", json={
                    "project": group, "queue": "default", "workdir": str(work),
                    "entrypoint": ["sh", "-c", COMMAND.format(starts=starts, seconds=seconds)
                                   .replace("$0", "rota-$ROTA_JOB_ID")],
                    "resources": {"gpu": 1, "cpu": 1, "memory": "100Mi"}})
                reply.raise_for_status()
                submitted.setdefault(group, {})[f"rota-{reply.json()['id']}"] = sent
        submit_s = time.monotonic() - began
        every = {n for g in submitted.values() for n in g}
        wait_ended(starts, every, timeout=3600)
        out = {g: summary(s, starts, submit_s) for g, s in submitted.items()}
        out[groups[0][0]]["slurm_submits_per_s"] = slurm_rate(plane.data_dir, len(every))
        return out
    finally:
        plane.close()


def slurm_rate(data: Path, jobs: int, timeout_s: float = 60.0) -> float:
    """Jobs handed to Slurm per second: from sacct's submit times of this plane's ``jobs``
    jobs, once accounting has recorded every one's comment (slurmdbd stores them a while after
    the jobs ended; a rate from some of them would be wrong)."""
    mine = f"@{instance(data)}"
    end = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(["sacct", "--noheader", "--parsable2", "--allocations",
                              "--starttime=now-1days", "--format=Submit,Comment"],
                             capture_output=True, text=True, env={**os.environ,
                                                                  "SLURM_TIME_FORMAT": "%s"})
        times = [float(s) for s, c in (line.split("|", 1) for line in out.stdout.splitlines())
                 if c.endswith(mine)]
        if len(times) >= jobs or time.monotonic() > end:
            break
        time.sleep(1.0)
    if len(times) < jobs:
        raise SystemExit(f"sacct recorded {len(times)} of the {jobs} jobs rota submitted "
                         f"within {timeout_s:g} s: no rate to give")
    return round(len(times) / max(1.0, max(times) - min(times)), 1)


# -- runs --------------------------------------------------------------------------------------

def throughput(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    groups = [("default", args.jobs)]
    return {"plain": plain(groups, args.seconds, work)["default"],
            "rota": through_rota(groups, args.seconds, work, args.interval, "default")["default"]}


def fairness(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    groups = [("a", args.first), ("b", args.second)]
    return {"plain": plain(groups, args.seconds, work),
            "rota": through_rota(groups, args.seconds, work, args.interval, "fair")}


def machine() -> str:
    cpus = os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    slurm = subprocess.run(["sinfo", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{platform.node()}: {cpus} CPUs, load {load}, {slurm}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["throughput", "fairness", "all"])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--first", type=int, default=160)
    parser.add_argument("--second", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit('SLURM_CONF is not set: eval "$(.ci/slurm)" first')
    work = Path(tempfile.mkdtemp(prefix="rota-bench-slurm-"))
    work.chmod(0o755)
    try:
        results: dict[str, Any] = {"machine": machine()}
        if args.what in ("throughput", "all"):
            results["throughput"] = throughput(args, work)
        if args.what in ("fairness", "all"):
            results["fairness"] = fairness(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2) if args.json else report(results, args))


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"machine: {results['machine']}", ""]
    if "throughput" in results:
        t = results["throughput"]
        lines += [f"{args.jobs} one-GPU jobs of {args.seconds:g} s on 16 GPUs "
                  f"(rota --interval {args.interval:g})", "",
                  "| | submits/s | submit-to-running p50 | p99 | drain | refill p50 |",
                  "|---|---|---|---|---|---|"]
        for who in ("plain", "rota"):
            r = t[who]
            extra = (f" (to Slurm: {r['slurm_submits_per_s']}/s)"
                     if "slurm_submits_per_s" in r else "")
            lines.append(f"| {who} | {r['submits_per_s']}{extra} | {r['p50_s']} s | "
                         f"{r['p99_s']} s | {r['drain_s']} s | {r['refill_p50_s']} s |")
        lines.append("")
    if "fairness" in results:
        f = results["fairness"]
        lines += [f"fairness: project a submits {args.first} jobs, then b submits "
                  f"{args.second}", "", "| | b: p50 | b: p99 | a: p50 |", "|---|---|---|---|"]
        for who in ("plain", "rota"):
            lines.append(f"| {who} | {f[who]['b']['p50_s']} s | {f[who]['b']['p99_s']} s | "
                         f"{f[who]['a']['p50_s']} s |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
