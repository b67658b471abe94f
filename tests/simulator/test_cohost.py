"""The co-hosting simulation (``rota.simulator.cohost``): each regime's invariant, checked on
what the runs held over time (rebuilt from every run's start, end and placement, not from the
engine's books), what each grain buys on workloads built to show it, the workload and the
experiment file."""

from __future__ import annotations

import os
import random
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from rota.core import MILLI, GpuRequest, InvalidSpec, ReplicaRequest
from rota.scheduler import build_policy
from rota.simulator.alibaba import TracePod, load_pods
from rota.simulator.cohost import run_seed, simulate
from rota.simulator.cohost_report import mean_between, over_seeds, row, summarise
from rota.simulator.cohost_workload import (
    KUBE, REGIMES, SLURM, Experiment, Work, cluster, gang_rows, parse_experiment, pod_rows,
    split, workload,
)
from rota.simulator.philly import PhillyJob, load

TRACES = Path(__file__).resolve().parents[3] / "shared/traces"
POLICIES = {KUBE: build_policy("besteffort"), SLURM: build_policy("besteffort")}


def nodes(n: int):
    return cluster(replace(Experiment(), nodes=n))


def pod(name: str, t: float, run: float, gpus: float, cpu: int = 4000) -> Work:
    request = GpuRequest(1, round(gpus * MILLI)) if gpus < 1 else GpuRequest(int(gpus))
    return Work(name, KUBE, t, run, ReplicaRequest(cpu, 16384, request))


def gang(name: str, t: float, run: float, gpus: float, replicas: int = 1) -> Work:
    request = GpuRequest(1, round(gpus * MILLI)) if gpus < 1 else GpuRequest(int(gpus))
    return Work(name, SLURM, t, run, ReplicaRequest(0, 0, request), replicas)


def mixed(seed: int, count: int = 120) -> list[Work]:
    """Pods of fractions and whole GPUs, gangs of 1 to 16 GPUs (and some Slurm shards, half a
    GPU), arriving over an hour on 3 nodes: enough to crowd them."""
    rng = random.Random(seed)
    out = []
    for k in range(count):
        t, run = rng.uniform(0, 3600), rng.uniform(60, 1800)
        if rng.random() < 0.55:
            out.append(pod(f"k{k}", t, run, rng.choice([0.2, 0.3, 0.5, 0.7, 1, 2, 8])))
        elif rng.random() < 0.15:
            out.append(gang(f"s{k}", t, run, 0.5))
        else:
            per, replicas = rng.choice([(1, 1), (2, 1), (4, 1), (8, 1), (8, 2)])
            out.append(gang(f"s{k}", t, run, per, replicas))
    return out


def held_over_time(result):
    """At each instant something started or ended: {(node, gpu): {side: milli}} and
    {node: {side: cpu}}, from the runs themselves."""
    times = sorted({r.start for r in result.runs if r.start is not None})
    for t in times:
        gpus: dict = defaultdict(lambda: defaultdict(int))
        cpu: dict = defaultdict(lambda: defaultdict(int))
        for r in result.runs:
            if r.start is None or not r.start <= t < r.finish:
                continue
            for rep in r.placement.replicas:
                cpu[rep.node][r.work.side] += r.work.request.cpu_milli
                for d in rep.devices:
                    gpus[rep.node, d.index][r.work.side] += d.milli
        yield t, gpus, cpu


def everything_ran(result) -> None:
    assert all(r.finish is not None and r.finish == r.start + r.work.run or r.rejected
               for r in result.runs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_static_split_never_puts_a_side_on_the_other_sides_nodes(seed):
    result = simulate(nodes(3), mixed(seed), "static", POLICIES, kube_nodes=1)
    everything_ran(result)
    assert result.kube_nodes == ("node000",) and result.slurm_nodes == ("node001", "node002")
    sides = defaultdict(set)
    for r in result.runs:
        if r.placement is not None:
            for rep in r.placement.replicas:
                sides[rep.node].add(r.work.side)
    assert sides["node000"] == {KUBE}
    assert sides["node001"] | sides["node002"] == {SLURM}
    # a 16-GPU gang fits 2 of Slurm's nodes; an 8-GPU pod fits Kubernetes' one node
    assert not any(r.rejected for r in result.runs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_node_grain_never_has_both_sides_on_one_node_at_one_time(seed):
    result = simulate(nodes(3), mixed(seed), "node", POLICIES)
    everything_ran(result)
    for _, gpus, cpu in held_over_time(result):
        by_node = defaultdict(set)
        for (node, _), sides in gpus.items():
            by_node[node] |= set(sides)
        for node, sides in cpu.items():
            by_node[node] |= {s for s, c in sides.items() if c}
        assert all(len(sides) == 1 for sides in by_node.values())
    # over the run each node served both sides, one after the other
    sides_ever = defaultdict(set)
    for r in result.runs:
        for rep in (r.placement.replicas if r.placement else ()):
            sides_ever[rep.node].add(r.work.side)
    assert any(s == {KUBE, SLURM} for s in sides_ever.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gpu_grain_never_has_both_sides_on_one_gpu_at_one_time(seed):
    result = simulate(nodes(3), mixed(seed), "gpu", POLICIES)
    everything_ran(result)
    nodes_shared = 0
    for _, gpus, _ in held_over_time(result):
        assert all(len([s for s, m in sides.items() if m]) == 1 for sides in gpus.values())
        by_node = defaultdict(set)
        for (node, _), sides in gpus.items():
            by_node[node] |= set(sides)
        nodes_shared += any(len(s) == 2 for s in by_node.values())
    assert nodes_shared  # both sides did share nodes, GPU by GPU


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fraction_grain_never_over_commits_a_gpu_or_a_node(seed):
    result = simulate(nodes(3), mixed(seed), "fraction", POLICIES)
    everything_ran(result)
    node = nodes(1)[0]
    gpus_shared = 0
    for _, gpus, cpu in held_over_time(result):
        assert all(sum(sides.values()) <= MILLI for sides in gpus.values())
        assert all(sum(sides.values()) <= node.cpu_milli for sides in cpu.values())
        gpus_shared += any(len(sides) == 2 for sides in gpus.values())
    assert gpus_shared  # a pod's fraction and a Slurm shard did share a GPU


@pytest.mark.parametrize("regime", REGIMES)
def test_skipping_cycles_nothing_changed_for_decides_alike(regime):
    work = mixed(7)
    quick = simulate(nodes(3), work, regime, POLICIES, kube_nodes=1)
    every = simulate(nodes(3), work, regime, POLICIES, kube_nodes=1, every_cycle=True)
    assert [(r.start, r.placement) for r in quick.runs] == \
        [(r.start, r.placement) for r in every.runs]
    assert quick.cycles < every.cycles


def test_fraction_grain_allocates_more_than_gpu_grain_when_slurm_work_takes_fractions():
    # One node of 8 GPUs. At 0, four pods of 0.6 GPU for 1000 s, one per GPU (two do not
    # fit one): GPUs 0-3 have 0.4 free each. At 10, four gangs of 1 GPU (1000 s) take GPUs
    # 4-7. At 20, four Slurm shards of 0.4 GPU arrive: at fraction grain they fill what the
    # pods leave at once; at GPU grain a GPU with a pod is not Slurm's: they wait until the
    # pods end at 1000. Over [0, 1000), that is 4 x 0.4 GPU more for 980 s.
    work = ([pod(f"k{i}", 0, 1000, 0.6) for i in range(4)]
            + [gang(f"g{i}", 10, 1000, 1) for i in range(4)]
            + [gang(f"h{i}", 20, 1000, 0.4) for i in range(4)])
    fine = simulate(nodes(1), work, "fraction", POLICIES, horizon=1000)
    coarse = simulate(nodes(1), work, "gpu", POLICIES, horizon=1000)
    starts = lambda res: sorted(r.start for r in res.runs if r.work.id.startswith("h"))
    assert starts(fine) == [20] * 4
    assert starts(coarse) == [1000] * 4
    assert summarise(fine)["alloc"] - summarise(coarse)["alloc"] == pytest.approx(
        4 * 0.4 * 980 / (8 * 1000))
    assert summarise(fine)[SLURM]["queue_avg_min"] < summarise(coarse)[SLURM]["queue_avg_min"]


def test_gpu_grain_shares_a_node_that_node_grain_keeps_for_one_side():
    # One node: a pod of 0.3 GPU runs 0-1000; a 4-GPU gang arrives at 10. Node grain: the
    # node is Kubernetes' while the pod runs, the gang starts at 1000. GPU grain: it starts
    # at 10 on 4 of the 7 untouched GPUs. Whole-GPU gangs gain nothing more from fractions.
    work = [pod("k", 0, 1000, 0.3), gang("g", 10, 500, 4)]
    start = {regime: {r.work.id: r.start for r in simulate(nodes(1), work, regime,
                                                          POLICIES).runs}["g"]
             for regime in ("node", "gpu", "fraction")}
    assert start == {"node": 1000, "gpu": 10, "fraction": 10}


def test_what_a_pod_keeps_from_slurm_is_the_grain_it_holds_at():
    # Two nodes; a pod of 0.3 GPU runs over [0, 100) of a window of 100 s. It keeps from
    # Slurm: static, Kubernetes' node (8 of 16 GPUs) all along; node grain, its node (8);
    # GPU grain, its GPU (1); fraction grain, its 0.3.
    work = [pod("k", 0, 100, 0.3)]
    kept = {regime: summarise(simulate(nodes(2), work, regime, POLICIES, kube_nodes=1,
                                       horizon=100))[KUBE]["kept"] for regime in REGIMES}
    assert kept == {"static": 0.5, "node": 0.5, "gpu": 1 / 16, "fraction": pytest.approx(0.3 / 16)}


def test_static_split_leaves_the_other_sides_idle_nodes_alone():
    # Two nodes, one per side. Two 8-GPU gangs arrive at once: static runs them one after
    # the other on Slurm's node while Kubernetes' node stays idle; node grain runs both.
    work = [gang("a", 0, 100, 8), gang("b", 0, 100, 8)]
    static = simulate(nodes(2), work, "static", POLICIES, kube_nodes=1)
    shared = simulate(nodes(2), work, "node", POLICIES)
    assert sorted(r.start for r in static.runs) == [0, 100]
    assert sorted(r.start for r in shared.runs) == [0, 0]


def test_measures_cover_the_window_after_warmup():
    # Kubernetes holds 500 milli-GPU over [0, 100) and 1000 over [100, 200): over [100, 200)
    # of 8 GPUs that is 1000 / 8000.
    series = [(0.0, 500), (100.0, 1000), (200.0, 0)]
    assert mean_between(series, 8000, 100, 200) == pytest.approx(1000 / 8000)
    assert mean_between(series, 8000, 0, 200) == pytest.approx(750 / 8000)
    # 1000 over [150, 200), 0 over [200, 300)
    assert mean_between(series, 8000, 150, 300) == pytest.approx(1000 * 50 / (8000 * 150))


def test_a_run_summary_counts_placed_at_once_and_percentiles_per_side():
    # one node, three pods of 8 GPUs: the first at once, the second waits 100 s, the third 200
    work = [pod(f"k{i}", 0, 100, 8) for i in range(3)] + [gang("g", 0, 50, 0.5)]
    summary = summarise(simulate(nodes(1), work, "fraction", POLICIES, horizon=300))
    k = summary[KUBE]
    assert (k["jobs"], k["placed"], k["placed_at_once"]) == (3, 1.0, pytest.approx(1 / 3))
    assert (k["queue_p50_min"], k["queue_p95_min"]) == (100 / 60, 200 / 60)
    report = over_seeds([summary, {**summary, "seed": 1}])
    assert report[KUBE]["placed"] == {"mean": 1.0, "sd": 0.0}
    assert row(report)[0] == "fraction"


def test_the_workload_offers_each_sides_load_and_is_the_same_for_a_seed():
    exp = replace(Experiment(), nodes=4, hours=200.0, warmup_h=0.0, max_run_h=2.0)
    pods = pod_rows([TracePod("p", 4000, 1024, 1, 500, (), 0, 3600),
                     TracePod("q", 4000, 1024, 2, 1000, (), 0, 36000),  # cut to 2 h
                     TracePod("cpu", 4000, 1024, 0, 0, (), 0, 3600),     # no GPU: out
                     TracePod("pending", 4000, 1024, 1, 1000, (), 10, None)], 7200)
    assert [(p.name, run) for p, run in pods] == [("p", 3600), ("q", 7200)]
    gangs = gang_rows([PhillyJob("j2", 0, 1800, 4, "vc"), PhillyJob("j3", 0, 600, 32, "vc")],
                      16, 7200)
    assert [j.id for j, _ in gangs] == ["j2"]
    work = workload(exp, pods, gangs, 5)
    assert work == workload(exp, pods, gangs, 5) != workload(exp, pods, gangs, 6)
    for side in (KUBE, SLURM):
        offered = sum(w.gpu_milli / MILLI * w.run for w in work if w.side == side)
        share = offered / (exp.gpus * exp.hours * 3600)
        assert share == pytest.approx(exp.sides[side].load, rel=0.15)
    eights = [w for w in work if w.side == SLURM]
    assert {(w.replicas, w.request.gpu.count) for w in eights} == {(1, 4)}
    assert split(exp) == 2  # 4 x 0.4 / 0.9 = 1.8 -> 2


@pytest.mark.parametrize("data, field, reason", [
    ({"nodes": 1}, "nodes", "must be >= 2"),
    ({"slurm": {"load": 0}}, "slurm.load", "must be > 0"),
    ({"kubernetes": {"load": "high"}}, "kubernetes.load", "expected a number"),
    ({"kubernetes": {"policy": {"preset": "fair"}}}, "kubernetes.policy.preemption",
     "set preemption: none"),
    ({"slurm": {"policy": {"preset": "nope"}}}, "slurm.policy.preset", "no preset named"),
    ({"slurm": {"colour": 1}}, "slurm.colour", "unknown key"),
    ({"seeds": []}, "seeds", "expected a list"),
    ({"regimes": ["static", "mig"]}, "regimes", "expected a list of static"),
    ({"hours": 10, "warmup_h": 10}, "warmup_h", "must be below hours"),
    ({"node": {"gpus": 4}}, "node.gpus", "nodes need 8"),
    ({"nodes": 2.5}, "nodes", "whole number"),
    ("nodes: 4", "experiment", "expected a mapping"),
], ids=["nodes", "load-zero", "load-text", "preemption", "preset", "unknown", "no-seeds",
        "regime", "warmup", "small-nodes", "fraction-nodes", "not-a-mapping"])
def test_bad_experiment_fields_are_named(data, field, reason):
    with pytest.raises(InvalidSpec) as err:
        parse_experiment(data)
    assert err.value.field == field
    assert reason in err.value.reason


def test_the_example_file_is_the_defaults():
    from rota.spec import read_yaml

    example = Path(__file__).resolve().parents[2] / "examples/cohosting/experiment.yaml"
    assert parse_experiment(read_yaml(example)) == Experiment()


def trace(path: Path) -> Path:
    """A file of the shared traces; missing, the test skips, or fails when CI is set."""
    if path.exists():
        return path
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so the shared traces must be there: {path} is missing")
    pytest.skip(f"{path} is missing")


def test_a_small_experiment_on_the_real_traces_keeps_every_invariant():
    pods = pod_rows(load_pods(trace(TRACES / "alibaba-gpu-v2023/csv/openb_pod_list_default.csv")),
                    4 * 3600)
    gangs = gang_rows(load(trace(TRACES / "philly-pollux/philly.csv")), 16, 4 * 3600)
    exp = replace(Experiment(), nodes=3, hours=2.0, warmup_h=0.5, max_run_h=4.0)
    results = {regime: run_seed(exp, pods, gangs, regime, 1) for regime in REGIMES}
    for regime, result in results.items():
        everything_ran(result)
        for _, gpus, _ in held_over_time(result):
            assert all(sum(s.values()) <= MILLI for s in gpus.values()), regime
            if regime == "gpu":
                assert all(len(s) == 1 for s in gpus.values())
    # the same work in every regime
    assert len({tuple(r.work for r in res.runs) for res in results.values()}) == 1
