"""The datasets experiment's parameters (its file, checked) and its workload (docs/datasets.md).

Vocabulary:
- *regime*: how jobs are placed (``REGIMES``): ``oblivious`` (rota's binpack, datasets
  unseen), ``fluid-soft`` and ``fluid-required`` (Fluid-style dataset affinity: prefer, or
  require, nodes that hold a copy), ``rota`` (time to first batch with the delay bound);
- *section*: ``cluster``, ``datasets``, ``jobs``: numbers, each with its lower bound.

The model (every number is a parameter of the file; examples/datasets/experiment.yaml cites
where each comes from):
- ``datasets.count`` datasets; dataset ``k`` (1-based rank) is named by a job with
  probability proportional to ``1 / k ** zipf`` (Zipf popularity); its size is drawn
  log-uniformly between ``min_gb`` and ``max_gb``, independent of its rank;
- ``jobs.count`` jobs arrive as a Poisson process whose rate offers ``jobs.load`` of the
  cluster's GPUs; each reads one dataset; its compute time is lognormal
  (``duration_mu``, ``duration_sigma`` of the natural log of seconds, at most
  ``max_duration_h``) and its GPUs are 1, 2, 4, 8 or 16 with the weights ``gpus_1`` ...
  (16: a gang of two 8-GPU replicas);
- ``cluster.nodes`` nodes of ``gpus_per_node`` GPUs, each with a dataset cache of
  ``cache_tb`` terabytes filled from the source at ``bandwidth_gbps`` gigabits per second.

An unknown key, a value of the wrong type or out of its range is refused with ``InvalidSpec``
naming the field (``jobs.load``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.core import InvalidSpec
from rota.simulator import expfile

REGIMES = ("oblivious", "fluid-soft", "fluid-required", "rota")
GANG_GPUS = (1, 2, 4, 8, 16)
GB = 10 ** 9

# section -> key -> (default, lower bound, bound excluded, whole number)
SECTIONS: dict[str, dict[str, tuple[float, float, bool, bool]]] = {
    "cluster": {"nodes": (16, 1, False, True), "gpus_per_node": (8, 1, False, True),
                "cache_tb": (7.68, 0.0, True, False), "bandwidth_gbps": (10.0, 0.0, True, False)},
    "datasets": {"count": (100, 1, False, True), "zipf": (1.0, 0.0, False, False),
                 "min_gb": (10.0, 0.0, True, False), "max_gb": (1500.0, 0.0, True, False)},
    "jobs": {"count": (1000, 1, False, True), "load": (0.8, 0.0, True, False),
             "duration_mu": (6.99, -math.inf, False, False),
             "duration_sigma": (2.02, 0.0, False, False),
             "max_duration_h": (24.0, 0.0, True, False),
             "gpus_1": (0.950, 0.0, False, False), "gpus_2": (0.017, 0.0, False, False),
             "gpus_4": (0.018, 0.0, False, False), "gpus_8": (0.0135, 0.0, False, False),
             "gpus_16": (0.0019, 0.0, False, False)},
}


@dataclass(frozen=True)
class Experiment:
    seeds: tuple[int, ...] = tuple(range(1, 11))
    regimes: tuple[str, ...] = REGIMES
    values: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: {
        s: {k: v[0] for k, v in keys.items()} for s, keys in SECTIONS.items()})

    def __getitem__(self, section: str) -> Mapping[str, float]:
        return self.values[section]

    @property
    def gpus(self) -> int:
        c = self["cluster"]
        return int(c["nodes"] * c["gpus_per_node"])


def parse_experiment(data: Any) -> Experiment:
    """The experiment a file describes; every key it leaves out takes its default."""
    data = expfile.keys(data, ("seeds", "regimes", *SECTIONS), "")
    exp = Experiment()
    seeds = expfile.seeds(data, exp.seeds)
    regimes = expfile.choices(data, "regimes", REGIMES, REGIMES)
    values = {s: dict(v) for s, v in exp.values.items()}
    for section, keys in SECTIONS.items():
        for key, value in expfile.keys(data.get(section), tuple(keys), f"{section}.").items():
            _, low, strict, whole = keys[key]
            values[section][key] = expfile.number(value, f"{section}.{key}", low, strict, whole)
    _check_together(values)
    return Experiment(seeds, regimes, values)


def _check_together(values: dict[str, dict[str, float]]) -> None:
    d, j = values["datasets"], values["jobs"]
    if d["max_gb"] < d["min_gb"]:
        raise InvalidSpec("datasets.max_gb", f"must be at least min_gb ({d['min_gb']:g})")
    if sum(j[f"gpus_{g}"] for g in GANG_GPUS) <= 0:
        raise InvalidSpec("jobs.gpus_1", "the GPU weights must not all be 0")
    if 16 > values["cluster"]["gpus_per_node"] * values["cluster"]["nodes"] and j["gpus_16"]:
        raise InvalidSpec("jobs.gpus_16", "the cluster has fewer than 16 GPUs")


@dataclass(frozen=True, slots=True)
class DataJob:
    id: str
    submit: float
    gpus: int
    compute_s: float
    dataset: str


@dataclass(frozen=True, slots=True)
class Workload:
    sizes: Mapping[str, int]  # dataset name -> bytes, in popularity rank order
    jobs: tuple[DataJob, ...]


def workload(exp: Experiment, seed: int) -> Workload:
    """The seed's datasets and jobs (module docstring)."""
    rng = random.Random(seed)
    d, j = exp["datasets"], exp["jobs"]
    lo, hi = math.log(d["min_gb"] * GB), math.log(d["max_gb"] * GB)
    names = [f"ds{k:03d}" for k in range(1, int(d["count"]) + 1)]
    sizes = {n: int(math.exp(rng.uniform(lo, hi))) for n in names}
    weights = [1 / k ** d["zipf"] for k in range(1, len(names) + 1)]
    gpu_weights = [j[f"gpus_{g}"] for g in GANG_GPUS]
    cap = j["max_duration_h"] * 3600
    drawn = []
    for _ in range(int(j["count"])):
        gpus = rng.choices(GANG_GPUS, gpu_weights)[0]
        compute = min(cap, math.exp(rng.gauss(j["duration_mu"], j["duration_sigma"])))
        drawn.append((gpus, max(1.0, compute), rng.choices(names, weights)[0]))
    # the arrival rate that offers ``load`` of the GPUs: load x GPUs / mean GPU-seconds a job
    mean_gpu_s = sum(g * c for g, c, _ in drawn) / len(drawn)
    rate = j["load"] * exp.gpus / mean_gpu_s
    t, jobs = 0.0, []
    for k, (gpus, compute, name) in enumerate(drawn):
        t += rng.expovariate(rate)
        jobs.append(DataJob(str(k + 1), t, gpus, compute, name))
    return Workload(sizes, tuple(jobs))


def described(exp: Experiment) -> dict[str, Any]:
    return {"seeds": list(exp.seeds), "regimes": list(exp.regimes),
            **{s: dict(v) for s, v in exp.values.items()}}
