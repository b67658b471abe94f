"""The mixed-workload experiment's parameters: its file, checked (docs/efficiency.md).

Vocabulary:
- *configuration*: which of rota's mechanisms are on (``MECHANISMS``): ``fifo`` is none of
  them (exclusive whole GPUs, strict FIFO, spread placement), one mechanism's name is that one
  alone, ``all`` is every one;
- *section*: ``training``, ``notebooks``, ``services``, ``cost``: the parameters of one class
  of work (or of the price), each a number with its lower bound.

Every parameter has a default (examples/mix/experiment.yaml holds them all); a key the file
leaves out takes it. An unknown key, a value of the wrong type or out of its range is refused
with ``InvalidSpec`` naming the field (``services.replica_rps``) and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.core import InvalidSpec
from rota.simulator import expfile

MECHANISMS = ("fractions", "packing", "idle", "scale-to-zero", "preemption")
CONFIGURATIONS = ("fifo",) + MECHANISMS + ("all",)

# section -> key -> (default, lower bound, bound excluded, whole number)
SECTIONS: dict[str, dict[str, tuple[float, float, bool, bool]]] = {
    "training": {
        "load": (0.6, 0.0, True, False),
        "max_gpus": (8, 1, False, True),
        "max_run_h": (12.0, 0.0, True, False),
        "useful_ratio": (0.52, 0.0, True, False),
        "checkpoint_min": (30.0, 0.0, True, False),
    },
    "notebooks": {
        "sessions_per_h": (4.0, 0.0, False, False),
        "session_h": (4.0, 0.0, True, False),
        "max_session_h": (12.0, 0.0, True, False),
        "active_share": (0.15, 0.0, True, False),
        "burst_min": (10.0, 0.0, True, False),
        "active_util": (0.52, 0.0, True, False),
        "gpu_milli": (500, 1, False, True),
        "idle_util_below": (10.0, 0.0, True, False),
        "idle_for_min": (10.0, 0.0, True, False),
    },
    "services": {
        "count": (8, 0, False, True),
        "peak_rps_min": (0.1, 0.0, True, False),
        "peak_rps_max": (30.0, 0.0, True, False),
        "replica_rps": (10.0, 0.0, True, False),
        "trough": (0.2, 0.0, False, False),
        "peak_hour": (14.0, 0.0, False, False),
        "target_s": (2.0, 0.0, True, False),
        "cold_start_s": (30.0, 0.0, False, False),
        "idle_min": (5.0, 0.0, True, False),
    },
    "cost": {"gpu_hour": (2.5, 0.0, False, False)},
}
UPPER = {("training", "useful_ratio"): 1.0, ("notebooks", "active_share"): 1.0,
         ("notebooks", "active_util"): 1.0, ("notebooks", "gpu_milli"): 1000,
         ("notebooks", "idle_util_below"): 100.0, ("services", "trough"): 1.0,
         ("services", "peak_hour"): 24.0}
TOP = ("nodes", "node", "hours", "warmup_h", "tick_s", "seeds", "configurations",
       "pods") + tuple(SECTIONS)


@dataclass(frozen=True, slots=True)
class Experiment:
    """Every parameter of the experiment; the defaults are examples/mix/experiment.yaml."""

    nodes: int = 8
    node_gpus: int = 8
    gpu_model: str = "G2"
    hours: float = 30.0
    warmup_h: float = 6.0
    tick_s: float = 10.0
    seeds: tuple[int, ...] = tuple(range(1, 11))
    configurations: tuple[str, ...] = CONFIGURATIONS
    pods: str = "openb_pod_list_default.csv"
    sections: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: {
        name: {k: spec[0] for k, spec in keys.items()} for name, keys in SECTIONS.items()})

    @property
    def gpus(self) -> int:
        return self.nodes * self.node_gpus

    def __getitem__(self, section: str) -> Mapping[str, float]:
        return self.sections[section]


def mechanisms(configuration: str) -> frozenset[str]:
    """The mechanisms a configuration switches on."""
    if configuration not in CONFIGURATIONS:
        raise InvalidSpec("configuration", f"unknown configuration {configuration!r}; "
                          f"known: {', '.join(CONFIGURATIONS)}")
    if configuration == "all":
        return frozenset(MECHANISMS)
    return frozenset() if configuration == "fifo" else frozenset({configuration})


def _section(name: str, data: Any) -> dict[str, float]:
    spec = SECTIONS[name]
    given = expfile.keys(data, tuple(spec), f"{name}.")
    return {key: expfile.number(given.get(key, default), f"{name}.{key}", lo, open_, integer,
                         UPPER.get((name, key)))
            for key, (default, lo, open_, integer) in spec.items()}


def parse_experiment(data: Any) -> Experiment:
    """An ``Experiment`` from a mapping as the experiment file writes it; raises
    ``InvalidSpec`` naming the field and the reason."""
    data = expfile.keys(data, TOP, "")
    d = Experiment()
    node = expfile.keys(data.get("node"), ("gpus", "model"), "node.")
    model = node.get("model", d.gpu_model)
    if not isinstance(model, str) or not model:
        raise InvalidSpec("node.model", f"expected a GPU model name, got {model!r}")
    pods = data.get("pods", d.pods)
    if not isinstance(pods, str) or not pods:
        raise InvalidSpec("pods", f"expected a pod list's file name, got {pods!r}")
    exp = Experiment(
        nodes=expfile.number(data.get("nodes", d.nodes), "nodes", 1, False, True),
        node_gpus=expfile.number(node.get("gpus", d.node_gpus), "node.gpus", 1, False, True),
        gpu_model=model,
        hours=expfile.number(data.get("hours", d.hours), "hours", 0, True, False),
        warmup_h=expfile.number(data.get("warmup_h", d.warmup_h), "warmup_h", 0, False, False),
        tick_s=expfile.number(data.get("tick_s", d.tick_s), "tick_s", 0, True, False),
        seeds=expfile.seeds(data, d.seeds),
        configurations=expfile.choices(data, "configurations", d.configurations,
                                       CONFIGURATIONS),
        pods=pods,
        sections={name: _section(name, data.get(name)) for name in SECTIONS})
    return _checked(exp)


def _checked(exp: Experiment) -> Experiment:
    """Relations between parameters."""
    if exp.warmup_h >= exp.hours:
        raise InvalidSpec("warmup_h", f"must be below hours ({exp.hours:g}), got {exp.warmup_h:g}")
    if exp["training"]["max_gpus"] > exp.node_gpus:
        raise InvalidSpec("training.max_gpus", "a training gang is placed on one node: at most "
                          f"node.gpus ({exp.node_gpus}), got {exp['training']['max_gpus']}")
    if exp["services"]["peak_rps_max"] < exp["services"]["peak_rps_min"]:
        raise InvalidSpec("services.peak_rps_max", "must be >= services.peak_rps_min")
    if exp["notebooks"]["max_session_h"] < exp["notebooks"]["burst_min"] / 60:
        raise InvalidSpec("notebooks.max_session_h", "must hold at least one burst")
    return exp


def described(exp: Experiment) -> dict:
    """The experiment as plain data (for ``--json``)."""
    return {"nodes": exp.nodes, "gpus": exp.gpus, "node": {"gpus": exp.node_gpus,
                                                           "model": exp.gpu_model},
            "hours": exp.hours, "warmup_h": exp.warmup_h, "tick_s": exp.tick_s,
            "seeds": list(exp.seeds), "configurations": list(exp.configurations),
            "pods": exp.pods, **{name: dict(values) for name, values in exp.sections.items()}}
