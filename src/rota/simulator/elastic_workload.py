"""The elastic capacity experiment's parameters (its file) and its workload (docs/elastic.md).

Workload: the jobs one Philly virtual cluster (``vc``) submitted in ``hours`` hours from
``start`` (a bursty day: ``6c71a0`` on 2017-10-17 submits 313 jobs, 96 of them in one hour and
none in nine others), at their real submission times (seconds from ``start``), with their
real GPU counts, and their run times cut to ``max_run_h``; jobs of more than ``max_gpus``
GPUs are left out (a single node holds a job here). Philly records no CPU or memory: a job asks
``cpu_per_gpu_milli`` and ``memory_per_gpu_mib`` per GPU. Its walltime is its run time times a
factor drawn from U(1, ``walltime_noise``) (``random.Random`` of the seed), as users
overestimate; the forecast behind ``wait`` decisions reads it.

The cluster: ``base_nodes`` nodes of ``node`` (in both regimes, never removed), and
- ``node-only``: a node group of the same shape, ``max_nodes`` added nodes at most, scaled as
  cluster-autoscaler does (``rota.simulator.elastic_autoscaler``);
- ``pool``: rota's planner (``rota.scheduler.elastic``) with a GPU pool reaching every base
  node (``pool.slots`` GPUs each) and the same node group.
A node is ready ``node_start_s`` (U(lo, hi), of the seed) after it is asked for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Mapping

from rota.core import GpuRequest, InvalidSpec, ReplicaRequest
from rota.simulator.philly import PhillyJob, parse_time
from rota.simulator import expfile

REGIMES = ("node-only", "pool")
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Work:
    id: str
    arrival: float
    run: float
    walltime: float
    request: ReplicaRequest
    source: str = ""  # the Philly row


@dataclass(frozen=True, slots=True)
class Experiment:
    """Every parameter; the defaults are examples/elastic/experiment.yaml."""

    vc: str = "6c71a0"
    start: str = "2017-10-17"
    hours: float = 24.0
    max_run_h: float = 4.0
    max_gpus: int = 8
    cpu_per_gpu_milli: int = 4000
    memory_per_gpu_mib: int = 32768
    walltime_noise: float = 1.5
    seeds: tuple[int, ...] = (1, 2, 3)
    regimes: tuple[str, ...] = REGIMES
    policy: str = "besteffort"
    base_nodes: int = 2
    node_cpu_milli: int = 128000
    node_memory_mib: int = 1048576
    node_gpus: int = 8
    gpu_model: str = "H100-80GB"
    gpu_memory_mib: int = 81920
    node_cost_h: float = 32.0
    max_nodes: int = 16
    node_start_s: tuple[float, float] = (240.0, 360.0)
    scan_s: float = 10.0
    unneeded_s: float = 600.0
    delay_after_add_s: float = 600.0
    pool_gpus: int = 32
    pool_slots: int = 16
    attach_s: float = 30.0
    detach_s: float = 10.0
    pool_cost_gpu_h: float = 4.0
    detach_grace_s: float = 300.0


def _number(data: Mapping, key: str, default: float, lo: float, integer: bool = False,
            lo_open: bool = False) -> Any:
    return expfile.number(data.get(key, default), key, lo, lo_open, integer)


INTEGERS = ("max_gpus", "cpu_per_gpu_milli", "memory_per_gpu_mib", "base_nodes",
            "node_cpu_milli", "node_memory_mib", "node_gpus", "gpu_memory_mib", "max_nodes",
            "pool_gpus", "pool_slots")
POSITIVE = ("hours", "max_run_h", "scan_s", "walltime_noise")
NUMBERS = ("node_cost_h", "unneeded_s", "delay_after_add_s", "attach_s", "detach_s",
           "pool_cost_gpu_h", "detach_grace_s")
TEXT = ("vc", "start", "gpu_model", "policy")
KEYS = (*TEXT, *INTEGERS, *POSITIVE, *NUMBERS, "seeds", "regimes", "node_start_s")


def parse_experiment(data: Any) -> Experiment:
    """An ``Experiment`` from the experiment file's mapping (flat keys, as
    examples/elastic/experiment.yaml writes them); raises ``InvalidSpec`` naming the key."""
    data = expfile.keys(data, KEYS, "")
    d, values = Experiment(), {}
    for key in TEXT:
        value = data.get(key, getattr(d, key))
        if not isinstance(value, str) or not value:
            raise InvalidSpec(key, f"expected a non-empty string, got {value!r}")
        values[key] = value
    for key in INTEGERS:
        values[key] = _number(data, key, getattr(d, key), 1 if key != "base_nodes" else 0,
                              integer=True)
    for key in POSITIVE:
        values[key] = _number(data, key, getattr(d, key), 0, lo_open=True)
    for key in NUMBERS:
        values[key] = _number(data, key, getattr(d, key), 0)
    if values["walltime_noise"] < 1:
        raise InvalidSpec("walltime_noise", f"must be >= 1, got {values['walltime_noise']!r}")
    seeds = expfile.seeds(data, d.seeds)
    regimes = expfile.choices(data, "regimes", d.regimes, REGIMES)
    start = data.get("node_start_s", list(d.node_start_s))
    if (not isinstance(start, list) or len(start) != 2
            or any(isinstance(s, bool) or not isinstance(s, (int, float)) for s in start)
            or not 0 <= start[0] <= start[1]):
        raise InvalidSpec("node_start_s", f"expected [low, high] seconds, 0 <= low <= high, "
                                          f"got {start!r}")
    try:
        parse_time(values["start"])
    except ValueError:
        raise InvalidSpec("start", f"expected a date such as 2017-10-17, got "
                                   f"{values['start']!r}") from None
    if values["max_gpus"] > values["node_gpus"]:
        raise InvalidSpec("max_gpus", f"must be at most node_gpus ({values['node_gpus']}): "
                                      "a job runs on one node")
    return Experiment(**values, seeds=seeds, regimes=regimes,
                      node_start_s=(float(start[0]), float(start[1])))


def workload(exp: Experiment, jobs: list[PhillyJob], seed: int) -> list[Work]:
    """The experiment's jobs (module docstring), in submission order."""
    t0 = parse_time(exp.start)
    end = t0 + exp.hours * HOUR
    rows = [j for j in jobs if j.vc == exp.vc and t0 <= j.submit < end
            and j.num_gpus <= exp.max_gpus]
    if not rows:
        raise InvalidSpec("vc", f"VC {exp.vc} submitted no job of at most {exp.max_gpus} GPUs "
                                f"in the {exp.hours:g} h from {exp.start}")
    rng = random.Random(seed)
    out = []
    for n, j in enumerate(rows):
        run = min(j.duration, exp.max_run_h * HOUR)
        request = ReplicaRequest(exp.cpu_per_gpu_milli * j.num_gpus,
                                 exp.memory_per_gpu_mib * j.num_gpus, GpuRequest(j.num_gpus))
        out.append(Work(f"j{n}", j.submit - t0, run, run * rng.uniform(1, exp.walltime_noise),
                        request, j.id))
    return out
