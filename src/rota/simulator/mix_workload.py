"""The mixed workload of one seed: training gangs, notebook sessions, inference services
(docs/efficiency.md).

Vocabulary:
- *gang*: a training job of the Philly list (at most ``training.max_gpus`` GPUs, one node),
  its run time cut to ``training.max_run_h``; gangs arrive as a Poisson process offering
  ``training.load`` of the cluster's GPUs (``cohost_workload.arrivals``);
- *session*: a notebook, open from its arrival for an exponential time (mean
  ``notebooks.session_h``, cut to ``max_session_h``); inside it the user alternates *bursts*
  (GPU work, exponential, mean ``burst_min``) and idle gaps (coding, reading: exponential, mean
  ``burst_min x (1 - active_share) / active_share``), starting with a burst; sessions arrive
  as a Poisson process of ``sessions_per_h``;
- *service*: a model served all day: its share of a GPU (the ``gpu_milli`` of a
  latency-sensitive (``qos`` LS) one-GPU pod of the Alibaba list, drawn at random), its peak
  request rate (log-uniform in ``[peak_rps_min, peak_rps_max]``), its replicas
  (``ceil(peak / replica_rps)``), and the requests of each tick: Poisson of the diurnal rate
  ``peak x (trough + (1 - trough) (1 + cos(2 pi (hour - peak_hour) / 24)) / 2)`` at the
  tick's start.

Randomness comes only from ``random.Random`` and ``numpy`` generators seeded by the seed and
the class of work, so a seed draws the same workload for every configuration.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rota.core import MILLI, InvalidSpec
from rota.simulator.cohost_workload import arrivals
from rota.simulator.mix_config import Experiment
from rota.simulator.philly import PhillyJob

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Gang:
    id: str
    arrival: float
    run: float  # seconds of run time
    gpus: int


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    arrival: float
    end: float
    bursts: tuple[tuple[float, float], ...]  # (start, end), in order, inside [arrival, end)


@dataclass(frozen=True, slots=True)
class Service:
    id: str
    share: int  # milli-GPU its model needs (the LS pod's)
    peak_rps: float
    replicas: int


@dataclass(frozen=True, slots=True)
class Workload:
    gangs: tuple[Gang, ...]
    sessions: tuple[Session, ...]
    services: tuple[Service, ...]
    requests: np.ndarray  # (ticks, services): requests arriving in each tick


def service_shares(path: Path | str) -> list[int]:
    """The ``gpu_milli`` of every latency-sensitive (``qos`` LS) pod of one GPU in a pod list."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and "qos" not in rows[0]:
        raise InvalidSpec("pods", f"{path} has no qos column: it cannot say which pods are "
                          "latency-sensitive")
    return [int(r["gpu_milli"]) for r in rows
            if r.get("qos") == "LS" and r.get("num_gpu") == "1" and 0 < int(r["gpu_milli"]) <= MILLI]


def gang_rows(jobs: list[PhillyJob], max_gpus: int, max_run_s: float
              ) -> list[tuple[PhillyJob, float]]:
    """The Philly jobs that take part, with their run times."""
    return [(j, min(j.duration, max_run_s)) for j in jobs if j.num_gpus <= max_gpus]


def diurnal(t: float, trough: float, peak_hour: float) -> float:
    """The share of its peak a service's request rate has at time ``t`` (seconds)."""
    hour = (t / HOUR) % 24.0
    return trough + (1.0 - trough) * (1.0 + math.cos(2 * math.pi * (hour - peak_hour) / 24)) / 2


def workload(exp: Experiment, gangs: list[tuple[PhillyJob, float]], shares: list[int],
             seed: int) -> Workload:
    """One seed's workload (see the module docstring)."""
    if not gangs:
        raise InvalidSpec("training.max_gpus", "no Philly job is that small")
    if not shares and exp["services"]["count"]:
        raise InvalidSpec("pods", "the pod list has no latency-sensitive one-GPU pod")
    horizon = exp.hours * HOUR
    drawn = arrivals(gangs, lambda j: j.num_gpus, exp["training"]["load"], exp.gpus, horizon,
                     random.Random(3 * seed))
    out = tuple(Gang(f"t{n}", t, run, j.num_gpus) for n, (t, j, run) in enumerate(drawn))
    sessions = _sessions(exp, horizon, random.Random(3 * seed + 1))
    services = _services(exp, shares, random.Random(3 * seed + 2))
    return Workload(out, sessions, services, _requests(exp, services, seed))


def _sessions(exp: Experiment, horizon: float, rng: random.Random) -> tuple[Session, ...]:
    nb = exp["notebooks"]
    rate = nb["sessions_per_h"] / HOUR
    burst = nb["burst_min"] * 60.0
    gap = burst * (1.0 - nb["active_share"]) / nb["active_share"]
    out: list[Session] = []
    t = rng.expovariate(rate) if rate else math.inf
    while t < horizon:
        end = t + min(rng.expovariate(1.0 / (nb["session_h"] * HOUR)), nb["max_session_h"] * HOUR)
        bursts, at = [], t
        while at < end:
            stop = min(end, at + rng.expovariate(1.0 / burst))
            bursts.append((at, stop))
            at = stop + (rng.expovariate(1.0 / gap) if gap else 0.0)
        out.append(Session(f"n{len(out)}", t, end, tuple(bursts)))
        t += rng.expovariate(rate)
    return tuple(out)


def _services(exp: Experiment, shares: list[int], rng: random.Random) -> tuple[Service, ...]:
    sv = exp["services"]
    lo, hi = math.log(sv["peak_rps_min"]), math.log(sv["peak_rps_max"])
    out = []
    for i in range(int(sv["count"])):
        share = shares[rng.randrange(len(shares))]
        peak = math.exp(rng.uniform(lo, hi))
        out.append(Service(f"s{i}", share, peak, max(1, math.ceil(peak / sv["replica_rps"]))))
    return tuple(out)


def ticks(exp: Experiment) -> int:
    """Ticks in ``[0, hours)``."""
    return math.ceil(exp.hours * HOUR / exp.tick_s)


def _requests(exp: Experiment, services: tuple[Service, ...], seed: int) -> np.ndarray:
    sv = exp["services"]
    n = ticks(exp)
    times = np.arange(n) * exp.tick_s
    shape = np.array([diurnal(t, sv["trough"], sv["peak_hour"]) for t in times])
    peaks = np.array([s.peak_rps for s in services], dtype=float)
    rng = np.random.default_rng(3 * seed + 2)
    return rng.poisson(np.outer(shape, peaks) * exp.tick_s) if len(services) else \
        np.zeros((n, 0), dtype=int)
