"""The co-hosting experiment's parameters and its mixed workload (docs/cohosting.md).

Vocabulary:
- *side*: ``kubernetes`` (pods of the Alibaba ``openb`` list: one replica, a fraction of one
  GPU or whole GPUs, with CPU and memory) or ``slurm`` (gangs of the Philly job list: whole
  GPUs, ``philly.gang``'s replicas of up to 8 GPUs, no CPU or memory);
- *work*: one pod or gang: its side, arrival (seconds from 0), run time and request;
- *offered load* of a side: its GPU demand as a share of the cluster's GPUs, ``arrival rate x
  mean(GPUs x run time) / cluster GPUs``.

Workload of one seed: per side, arrivals form a Poisson process over ``[0, hours)`` at the rate
that offers the side's ``load``; each arrival is a row of the side's trace drawn at random
(with replacement, ``random.Random`` seeded by the seed and the side), with its request and its
run time: a pod's lifetime (deletion - creation), a Philly job's duration, both cut to
``max_run_h``. Rows that cannot take part are left out before drawing: pods without GPUs, pods
without both times or living under a second, Philly jobs of more than ``slurm.max_gpus`` GPUs.

Static split (``split``): the nodes are divided in proportion to the sides' offered loads,
``round(nodes x kubernetes load / (both loads))`` to Kubernetes, at least one node each.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.core import MILLI, GpuDevice, GpuRequest, InvalidSpec, Node, NodeName, ReplicaRequest
from rota.scheduler import build_policy
from rota.simulator.alibaba import DEVICE_MEMORY_MIB, TracePod
from rota.simulator.philly import PhillyJob, gang
from rota.simulator import expfile

KUBE, SLURM = "kubernetes", "slurm"
SIDES = (KUBE, SLURM)
REGIMES = ("static", "node", "gpu", "fraction")
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Work:
    id: str  # k<n> for pods, s<n> for gangs, in arrival order per side
    side: str
    arrival: float
    run: float
    request: ReplicaRequest
    replicas: int = 1
    source: str = ""  # the trace row: pod name or Philly job id

    @property
    def gpu_milli(self) -> int:
        """Milli-GPU the whole pod or gang holds while it runs."""
        return self.replicas * self.request.gpu.milli


@dataclass(frozen=True, slots=True)
class Side:
    load: float
    policy: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Experiment:
    """Every parameter of the experiment; the defaults are examples/cohosting/experiment.yaml."""

    nodes: int = 32
    node_cpu_milli: int = 96000  # openb's most common 8-GPU node (G2)
    node_memory_mib: int = 393216
    node_gpus: int = 8
    gpu_model: str = "G2"
    hours: float = 36.0
    warmup_h: float = 12.0  # measures leave out [0, warmup_h): the cluster fills up
    max_run_h: float = 12.0
    seeds: tuple[int, ...] = (1, 2, 3)
    regimes: tuple[str, ...] = REGIMES
    pods: str = "openb_pod_list_default.csv"
    slurm_max_gpus: int = 16
    sides: Mapping[str, Side] = field(default_factory=lambda: {
        KUBE: Side(0.4, {"preset": "besteffort"}), SLURM: Side(0.5, {"preset": "besteffort"})})

    @property
    def gpus(self) -> int:
        return self.nodes * self.node_gpus


def _number(data: Mapping, key: str, where: str, default: float, lo: float,
            integer: bool = False, lo_open: bool = False) -> Any:
    return expfile.number(data.get(key, default), f"{where}{key}", lo, lo_open, integer)


TOP = ("nodes", "node", "hours", "warmup_h", "max_run_h", "seeds", "regimes", KUBE, SLURM)


def parse_experiment(data: Any) -> Experiment:
    """An ``Experiment`` from a mapping as the experiment file writes it (docs/cohosting.md);
    raises ``InvalidSpec`` naming the field (``slurm.load``) and the reason."""
    data = expfile.keys(data, TOP, "")
    d = Experiment()
    node = expfile.keys(data.get("node"), ("cpu_milli", "memory_mib", "gpus", "model"), "node.")
    model = node.get("model", d.gpu_model)
    if not isinstance(model, str) or not model:
        raise InvalidSpec("node.model", f"expected a GPU model name, got {model!r}")
    seeds = expfile.seeds(data, d.seeds)
    regimes = expfile.choices(data, "regimes", d.regimes, REGIMES)
    kube = expfile.keys(data.get(KUBE), ("load", "policy", "pods"), f"{KUBE}.")
    slurm = expfile.keys(data.get(SLURM), ("load", "policy", "max_gpus"), f"{SLURM}.")
    pods = kube.get("pods", d.pods)
    if not isinstance(pods, str) or not pods:
        raise InvalidSpec(f"{KUBE}.pods", f"expected a pod list's file name, got {pods!r}")
    sides = {name: Side(_number(spec, "load", f"{name}.", d.sides[name].load, 0, lo_open=True),
                        _policy(spec.get("policy", d.sides[name].policy), name))
             for name, spec in ((KUBE, kube), (SLURM, slurm))}
    exp = Experiment(
        nodes=_number(data, "nodes", "", d.nodes, 2, integer=True),
        node_cpu_milli=_number(node, "cpu_milli", "node.", d.node_cpu_milli, 0, integer=True),
        node_memory_mib=_number(node, "memory_mib", "node.", d.node_memory_mib, 0, integer=True),
        node_gpus=_number(node, "gpus", "node.", d.node_gpus, 1, integer=True),
        gpu_model=model,
        hours=_number(data, "hours", "", d.hours, 0, lo_open=True),
        warmup_h=_number(data, "warmup_h", "", d.warmup_h, 0),
        max_run_h=_number(data, "max_run_h", "", d.max_run_h, 0, lo_open=True),
        seeds=seeds, regimes=regimes, pods=pods,
        slurm_max_gpus=_number(slurm, "max_gpus", f"{SLURM}.", d.slurm_max_gpus, 1, integer=True),
        sides=sides)
    if exp.warmup_h >= exp.hours:
        raise InvalidSpec("warmup_h", f"must be below hours ({exp.hours:g}), got {exp.warmup_h:g}")
    if exp.node_gpus < 8 and exp.slurm_max_gpus > 1:
        raise InvalidSpec("node.gpus", "Philly gangs are placed in replicas of up to 8 GPUs: "
                          f"nodes need 8, got {exp.node_gpus}")
    return exp


def _policy(spec: Any, side: str) -> Mapping[str, Any]:
    """A policy spec of ``rota.scheduler.build_policy``, without preemption: victims are not
    part of this experiment."""
    from rota.scheduler import build_policy

    if isinstance(spec, str):
        spec = {"preset": spec}
    if not isinstance(spec, Mapping):
        raise InvalidSpec(f"{side}.policy",
                          f"expected a preset name or a policy spec, got {spec!r}")
    try:
        policy = build_policy(spec)
    except InvalidSpec as exc:
        raise InvalidSpec(f"{side}.{exc.field}", exc.reason) from None
    if policy.preemption is not None:
        raise InvalidSpec(f"{side}.policy.preemption", "this experiment has no preemption; "
                          "set preemption: none")
    return dict(spec)


def cluster(exp: Experiment) -> tuple[Node, ...]:
    """``exp.nodes`` identical nodes of ``exp.node_gpus`` GPUs."""
    return tuple(Node(NodeName(f"node{i:03d}"), exp.node_cpu_milli, exp.node_memory_mib,
                      tuple(GpuDevice(k, exp.gpu_model, DEVICE_MEMORY_MIB)
                            for k in range(exp.node_gpus)))
                 for i in range(exp.nodes))


def split(exp: Experiment) -> int:
    """Nodes the static split gives Kubernetes (the first ones; Slurm has the rest)."""
    kube, slurm = exp.sides[KUBE].load, exp.sides[SLURM].load
    return min(exp.nodes - 1, max(1, round(exp.nodes * kube / (kube + slurm))))


def pod_rows(pods: list[TracePod], max_run_s: float) -> list[tuple[TracePod, float]]:
    """The pods that take part, with their run times."""
    return [(p, min(float(p.lifetime), max_run_s)) for p in pods
            if p.num_gpu and p.lifetime is not None and p.lifetime >= 1]


def gang_rows(jobs: list[PhillyJob], max_gpus: int, max_run_s: float
              ) -> list[tuple[PhillyJob, float]]:
    """The Philly jobs that take part, with their run times."""
    return [(j, min(j.duration, max_run_s)) for j in jobs if j.num_gpus <= max_gpus]


def arrivals(rows: list, gpus_of, load: float, cluster_gpus: int, horizon_s: float,
              rng: random.Random) -> list[tuple[float, Any, float]]:
    """(arrival, row, run) of a Poisson process offering ``load`` of ``cluster_gpus``."""
    if not rows:
        return []
    mean = sum(gpus_of(r) * run for r, run in rows) / len(rows)  # GPU-seconds per arrival
    rate = load * cluster_gpus / mean
    out, t = [], rng.expovariate(rate)
    while t < horizon_s:
        row, run = rows[rng.randrange(len(rows))]
        out.append((t, row, run))
        t += rng.expovariate(rate)
    return out


def workload(exp: Experiment, pods: list[tuple[TracePod, float]],
             gangs: list[tuple[PhillyJob, float]], seed: int) -> list[Work]:
    """One seed's mixed workload, sorted by arrival (see the module docstring)."""
    if not pods:
        raise InvalidSpec(f"{KUBE}.pods", "no pod of the list has GPUs and a lifetime")
    if not gangs:
        raise InvalidSpec(f"{SLURM}.max_gpus", "no Philly job is that small")
    horizon = exp.hours * HOUR
    out: list[Work] = []
    kube = arrivals(pods, lambda p: p.gpu_total / MILLI, exp.sides[KUBE].load, exp.gpus,
                     horizon, random.Random(2 * seed))
    for n, (t, p, run) in enumerate(kube):
        share = p.gpu_milli if p.num_gpu == 1 else MILLI
        out.append(Work(f"k{n}", KUBE, t, run, ReplicaRequest(
            p.cpu_milli, p.memory_mib, GpuRequest(p.num_gpu, share)), 1, p.name))
    slurm = arrivals(gangs, lambda j: j.num_gpus, exp.sides[SLURM].load, exp.gpus, horizon,
                      random.Random(2 * seed + 1))
    for n, (t, j, run) in enumerate(slurm):
        replicas, per = gang(j.num_gpus)
        out.append(Work(f"s{n}", SLURM, t, run, ReplicaRequest(0, 0, GpuRequest(per)),
                        replicas, j.id))
    out.sort(key=lambda w: (w.arrival, w.side, w.id))
    return out
