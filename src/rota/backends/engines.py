"""Several backends' reports of the same machines made into one inventory: pure, no I/O.

Each member backend of a composite (``rota.backends.several``) reports its own nodes. A node
that more than one member reports under the same name is one machine reached through several
engines (a Slurm node that is also a Kubernetes node): ``merge`` makes it ONE ``Node`` with
one device inventory, so that each GPU has one owner at a time:

- its devices are those of the first member (in the order the backends were named) that
  reports it; a device is unhealthy when any member says so (with that member's reason);
- ``foreign`` is every member's foreign holdings together (on the devices the node has): a GPU
  that a plain ``sbatch`` job holds is not free to a job launched through Kubernetes, and a
  GPU a Pod of another scheduler holds is not free to a Slurm job. Two members that count the
  same foreign work (they cannot, today: Slurm sees no Pod and Kubernetes no Slurm job) would
  make it count twice, which only leaves less free;
- each member that reports the node without a problem *reaches* it: it can launch jobs there.
  The node gets the label ``rota.dev/engine-<member>: "true"`` for each (``ENGINE_LABEL``),
  which a job's ``selector`` names to ask for an engine, and the features of the members that
  reach it (what a job can get there through one of them). ``reach`` keeps, per node, each
  reaching member's own features, for the composite to choose the member of a launch;
- a node no member reaches carries every member's problem (``slurm: drained; kubernetes:
  cordoned``); ``schedulable`` is that of the first report of a member that reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from rota.core import Foreign, Node
from rota.core.nodes import ENGINE_LABEL, GpuDevice



def engine_label(member: str) -> str:
    return f"{ENGINE_LABEL}{member}"


def asked_engines(selector: Sequence[tuple[str, str]]) -> frozenset[str]:
    """The members a job's ``selector`` asks for by their engine label."""
    return frozenset(key[len(ENGINE_LABEL):] for key, value in selector
                     if key.startswith(ENGINE_LABEL) and value == "true")


@dataclass(frozen=True, slots=True)
class Merged:
    """The one inventory: its nodes, and per node the features of each member that reaches it
    (in the members' order)."""

    nodes: tuple[Node, ...]
    reach: Mapping[str, Mapping[str, frozenset[str]]]


def merge(reports: Sequence[tuple[str, Sequence[Node]]]) -> Merged:
    """The nodes of ``reports`` (each member's name and its nodes, in the members' order), one
    per name, in the order they were first reported."""
    by_name: dict[str, list[tuple[str, Node]]] = {}
    for member, nodes in reports:
        for node in nodes:
            by_name.setdefault(node.name, []).append((member, node))
    merged, reach = [], {}
    for name, seen in by_name.items():
        node = one_node(seen)
        merged.append(node)
        reach[name] = {member: n.features for member, n in seen if not n.problem}
    return Merged(tuple(merged), reach)


def one_node(seen: Sequence[tuple[str, Node]]) -> Node:
    """One machine as each member in ``seen`` reports it, made one node (module docstring)."""
    member, first = seen[0]
    reaching = [(m, n) for m, n in seen if not n.problem]
    labels: dict[str, str] = {}
    for _, n in reversed(seen):  # the first member's value wins where labels differ
        labels.update(n.labels)
    labels.update({engine_label(m): "true" for m, _ in reaching})
    features = frozenset().union(*(n.features for _, n in reaching)) if reaching \
        else first.features
    if len(seen) == 1:
        return replace(first, labels=labels, features=features)
    problem = "" if reaching else "; ".join(f"{m}: {n.problem}" for m, n in seen)
    devices = _devices(first.devices, [n for _, n in seen[1:]])
    indices = {d.index for d in devices}
    foreign = tuple(_on(f, indices) for _, n in seen for f in n.foreign)
    schedulable = (reaching[0][1] if reaching else first).schedulable
    return replace(first, devices=devices, labels=labels, features=features, problem=problem,
                   foreign=foreign, schedulable=schedulable)


def _devices(devices: tuple[GpuDevice, ...], others: Sequence[Node]) -> tuple[GpuDevice, ...]:
    """The first report's devices, each unhealthy where another report says it is."""
    sick = {}
    for node in others:
        for d in node.devices:
            if not d.healthy and d.index not in sick:
                sick[d.index] = d.problem
    if not sick:
        return devices
    return tuple(replace(d, healthy=False, problem=d.problem or sick[d.index])
                 if d.healthy and d.index in sick else d for d in devices)


def _on(held: Foreign, indices: set[int]) -> Foreign:
    """``held`` less the shares of devices the node does not have (another member's view of
    it named more devices than the first one's)."""
    if all(s.index in indices for s in held.devices):
        return held
    return replace(held, devices=tuple(s for s in held.devices if s.index in indices))
