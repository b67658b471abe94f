"""The MIG repartitioning experiment's parameters (its file) and its diurnal workload
(docs/mig.md, *Demand-driven repartitioning: the experiment*).

Three classes of work, each drawn from a shared trace's hour-of-day arrivals:

- ``notebook`` and ``inference``: the Alibaba GPU-sharing trace's pods of one GPU share
  (``gpu_milli`` below 1000; ``openb_pod_list_default.csv``). A pod asks for the smallest MIG
  profile with at least its share (of the 7 compute slices: ``1g.10gb`` up to 1/7, ``2g.20gb``
  2/7, ``3g.40gb`` 3/7, ``4g.40gb`` 4/7) or, above 4/7, a whole GPU; up to 2/7 it is a
  ``notebook``, above an ``inference`` pod. Its run time is its deletion less its creation.
- ``training``: the Philly jobs (``philly.csv``) of at most ``max_gpus`` GPUs, whole GPUs on
  one node, with their run times.

Run times are cut to ``max_run_h`` (and raised to a minute). A trace's hour of day is its
creation (seconds from the trace's start) or submission time modulo a day; neither trace says
which time zone its hours are in, so each class's 24-hour profile is turned so that its
busiest 12 hours begin at ``day_start`` (notebooks and inference) or ``night_start``
(training): by day the fractional pods, by night the training, as the experiment supposes.

Volume: over a day the work offers ``load`` times the cluster's GPU-hours, a share
``fractional_share`` of it from the Alibaba pods; the expected arrivals per day of each
source follow from its mean GPU-hours per job (share x run time, from the trace). Each hour
of each day draws its arrivals from a Poisson law of the hour's mean (numpy's generator of the
seed), each one a trace item of that source and hour of day (drawn with replacement), at a
uniform time within the hour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.core import InvalidSpec
from rota.core.mig import COMPUTE_SLICES, profile_milli
from rota.core.migplan import WHOLE, Geometry, parse_geometry
from rota.simulator.alibaba import TracePod
from rota.simulator.philly import PhillyJob
from rota.simulator import expfile

REGIMES = ("static", "twice-daily", "demand")
CLASSES = ("notebook", "inference", "training")
HOUR, DAY = 3600.0, 86400.0
PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb")   # of an H100-80GB, by compute slices
DEFAULT_GEOMETRIES = {
    "whole": WHOLE, "small": "7x1g.10gb", "notebook": ["3x2g.20gb", "1g.10gb"],
    "mixed": ["4g.40gb", "2g.20gb", "1g.10gb"], "half": ["4g.40gb", "3g.40gb"],
    "pair": ["3g.40gb", "3g.40gb"],
}


@dataclass(frozen=True, slots=True)
class ClassSpec:
    priority: float
    preemptible: bool
    checkpoint_s: float   # a preemptible job saves this often (what an eviction loses)


@dataclass(frozen=True, slots=True)
class Experiment:
    """Every parameter; the defaults are examples/mig/experiment.yaml."""

    nodes: int = 8
    gpus_per_node: int = 8
    gpu_model: str = "H100-80GB"
    days: int = 2
    drain_h: float = 12.0
    load: float = 0.7
    fractional_share: float = 0.5
    max_run_h: float = 8.0
    max_gpus: int = 8
    day_start_h: float = 8.0
    night_start_h: float = 20.0
    seeds: tuple[int, ...] = tuple(range(1, 11))
    regimes: tuple[str, ...] = REGIMES
    policy: str = "besteffort"
    downtime_s: float = 60.0
    min_interval_h: float = 1.0
    horizon_h: float = 2.0
    plan_every_s: float = 900.0
    classes: Mapping[str, ClassSpec] = field(default_factory=lambda: {
        "notebook": ClassSpec(3.0, False, 0.0), "inference": ClassSpec(3.0, False, 0.0),
        "training": ClassSpec(1.0, True, 1800.0)})
    geometries: Mapping[str, Geometry] = field(default_factory=lambda: {
        n: parse_geometry(n, g, f"geometries.{n}") for n, g in DEFAULT_GEOMETRIES.items()})


@dataclass(frozen=True, slots=True)
class Work:
    id: str
    klass: str
    arrival: float
    run: float
    shape: str      # a MIG profile or whole
    gpus: int       # whole GPUs (training); 1 for an instance


@dataclass(frozen=True, slots=True)
class Source:
    """One trace's items as this experiment reads them: (hour of day, class, shape, GPUs, run)."""

    items: tuple[tuple[int, str, str, int, float], ...]

    def gpu_hours(self) -> float:
        return sum(_size(s, g) * run for _, _, s, g, run in self.items) / len(self.items) / HOUR


def _size(shape: str, gpus: int) -> float:
    return gpus if shape == WHOLE else int(shape[0]) / COMPUTE_SLICES


def pod_shape(gpu_milli: int) -> str:
    """The smallest profile with at least the pod's share (as rota charges a profile:
    ``profile_milli``, 143 for a ``1g``), or whole above 4/7."""
    for name in PROFILES:
        if gpu_milli <= profile_milli(name):
            return name
    return WHOLE


def fractional_source(pods: list[TracePod], exp: Experiment) -> Source:
    items = []
    for p in pods:
        if p.num_gpu != 1 or p.gpu_milli >= 1000 or p.created is None or p.deleted is None:
            continue
        shape = pod_shape(p.gpu_milli)
        klass = "notebook" if shape in PROFILES[:2] else "inference"
        items.append((int(p.created // HOUR) % 24, klass, shape, 1, _cut(p.deleted - p.created,
                                                                         exp)))
    if not items:
        raise InvalidSpec("alibaba", "the pod list has no pod of one GPU share with times")
    return Source(tuple(items))


def training_source(jobs: list[PhillyJob], exp: Experiment) -> Source:
    items = tuple((int(j.submit % DAY // HOUR), "training", WHOLE, j.num_gpus,
                   _cut(j.duration, exp)) for j in jobs if 1 <= j.num_gpus <= exp.max_gpus)
    if not items:
        raise InvalidSpec("philly", f"the job list has no job of 1 to {exp.max_gpus} GPUs")
    return Source(items)


def _cut(run: float, exp: Experiment) -> float:
    return min(max(60.0, float(run)), exp.max_run_h * HOUR)


def profile(source: Source, start_h: float) -> list[float]:
    """The source's share of arrivals in each hour of the day, turned so that its busiest
    12 hours begin at ``start_h`` (module docstring)."""
    counts, shift = _turn(source, start_h)
    total = sum(counts)
    return [counts[(h - shift) % 24] / total for h in range(24)]


def _turn(source: Source, start_h: float) -> tuple[list[int], int]:
    """The source's arrivals per hour of its trace, and the hours to add to a trace hour to
    make its busiest 12 hours begin at ``start_h``."""
    counts = [0] * 24
    for hour, *_ in source.items:
        counts[hour] += 1
    busiest = max(range(24), key=lambda h: (sum(counts[(h + k) % 24] for k in range(12)), -h))
    return counts, int(start_h) - busiest


def per_day(source: Source, exp: Experiment, share: float) -> float:
    """Expected arrivals a day of a source offering ``share`` of the work."""
    cluster_gpu_h = exp.nodes * exp.gpus_per_node * 24.0
    return exp.load * share * cluster_gpu_h / source.gpu_hours()


def workload(exp: Experiment, sources: tuple[Source, Source], seed: int) -> list[Work]:
    """One seed's arrivals over ``days`` days (module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[Work] = []
    for source, share, start in ((sources[0], exp.fractional_share, exp.day_start_h),
                                 (sources[1], 1 - exp.fractional_share, exp.night_start_h)):
        shares, daily = profile(source, start), per_day(source, exp, share)
        shift = _turn(source, start)[1]
        by_hour: dict[int, list] = {}
        for item in source.items:
            by_hour.setdefault((item[0] + shift) % 24, []).append(item)
        for day in range(exp.days):
            for hour in range(24):
                pool = by_hour.get(hour) or list(source.items)
                for _ in range(int(rng.poisson(daily * shares[hour]))):
                    _, klass, shape, gpus, run = pool[int(rng.integers(len(pool)))]
                    at = (day * 24 + hour + float(rng.random())) * HOUR
                    out.append(Work("", klass, at, run, shape, gpus))
    out.sort(key=lambda w: (w.arrival, w.klass))
    return [Work(f"{w.klass[0]}{k:05d}", w.klass, w.arrival, w.run, w.shape, w.gpus)
            for k, w in enumerate(out)]


def expected_per_hour(exp: Experiment, sources: tuple[Source, Source]
                      ) -> dict[str, tuple[list[float], float, str]]:
    """Per shape: expected GPUs (instances) asked for in each hour of the day, their mean
    run time (s) and the class of the first source that asks for it (``whole``: inference,
    then training): the workload's own law, which the demand-driven planner reads as its
    forecast."""
    acc: dict[str, tuple[list[float], float, str]] = {}
    for source, share, start in ((sources[0], exp.fractional_share, exp.day_start_h),
                                 (sources[1], 1 - exp.fractional_share, exp.night_start_h)):
        shares, daily = profile(source, start), per_day(source, exp, share)
        for shape in sorted({s for _, _, s, _, _ in source.items}):
            mine = [i for i in source.items if i[2] == shape]
            frac = len(mine) / len(source.items)
            slots = sum(i[3] for i in mine) / len(mine)   # whole GPUs per job (training)
            run = sum(i[4] for i in mine) / len(mine)
            hours = [daily * s * frac * slots for s in shares]
            old, runs, klass = acc.get(shape, ([0.0] * 24, 0.0, mine[0][1]))
            acc[shape] = ([a + b for a, b in zip(old, hours)], runs + run * sum(hours), klass)
    return {shape: (hours, runs / max(sum(hours), 1e-9), klass)
            for shape, (hours, runs, klass) in acc.items()}


# -- the experiment file ------------------------------------------------------------------

NUMBERS = {"days": (1, True), "drain_h": (0, False), "load": (0, False),
           "fractional_share": (0, False), "max_run_h": (0, False), "max_gpus": (1, True),
           "day_start_h": (0, False), "night_start_h": (0, False), "nodes": (1, True),
           "gpus_per_node": (1, True), "downtime_s": (0, False), "min_interval_h": (0, False),
           "horizon_h": (0, False), "plan_every_s": (0, False)}
KEYS = (*NUMBERS, "gpu_model", "seeds", "regimes", "policy", "classes", "geometries")


def parse_experiment(data: Any) -> Experiment:
    """An experiment from its file's mapping; each mistake names its field."""
    if data is None:
        return Experiment()
    data = expfile.keys(data, KEYS, "")
    values: dict[str, Any] = {k: _number(data[k], k, *NUMBERS[k]) for k in NUMBERS if k in data}
    for key in ("fractional_share",):
        if key in values and values[key] > 1:
            raise InvalidSpec(key, f"must be at most 1, got {values[key]!r}")
    for key in ("day_start_h", "night_start_h"):
        if key in values and values[key] >= 24:
            raise InvalidSpec(key, f"must be an hour of the day below 24, got {values[key]!r}")
    for key in ("gpu_model", "policy"):
        if key in data:
            if not isinstance(data[key], str) or not data[key]:
                raise InvalidSpec(key, f"must be a name, got {data[key]!r}")
            values[key] = data[key]
    if "seeds" in data:
        values["seeds"] = expfile.seeds(data, ())
    if "regimes" in data:
        values["regimes"] = expfile.choices(data, "regimes", (), REGIMES)
    if "classes" in data:
        values["classes"] = _classes(data["classes"])
    if "geometries" in data:
        raw = data["geometries"]
        if not isinstance(raw, dict) or not raw:
            raise InvalidSpec("geometries", "must be a mapping of name to geometry")
        values["geometries"] = {str(n): parse_geometry(str(n), g, f"geometries.{n}")
                                for n, g in raw.items()}
    return Experiment(**values)


def _classes(raw: Any) -> dict[str, ClassSpec]:
    if not isinstance(raw, dict) or set(raw) != set(CLASSES):
        raise InvalidSpec("classes", f"must give each of {', '.join(CLASSES)}")
    out = {}
    for name, spec in raw.items():
        where = f"classes.{name}"
        if not isinstance(spec, dict) or set(spec) - {"priority", "preemptible", "checkpoint_s"}:
            raise InvalidSpec(where, "must be a mapping of priority, preemptible, checkpoint_s")
        preemptible = spec.get("preemptible", False)
        if not isinstance(preemptible, bool):
            raise InvalidSpec(f"{where}.preemptible", f"must be true or false, got {preemptible!r}")
        out[name] = ClassSpec(_number(spec.get("priority", 1.0), f"{where}.priority", 0, False),
                              preemptible,
                              _number(spec.get("checkpoint_s", 0.0), f"{where}.checkpoint_s", 0,
                                      False))
    return out


def _number(value: Any, key: str, lo: float, integer: bool) -> Any:
    return expfile.number(value, key, lo, integer=integer)
