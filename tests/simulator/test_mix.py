"""The mixed-workload experiment on hand-made workloads: the FIFO baseline gives whole GPUs,
each mechanism changes what it should and nothing else, runs are deterministic per seed, and
bad parameters are refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from rota.core import InvalidSpec
from rota.simulator.mix import NOTEBOOKS, SERVICES, TRAINING, simulate
from rota.simulator.mix_config import Experiment, mechanisms, parse_experiment
from rota.simulator.mix_report import over_seeds, summarise
from rota.simulator.mix_workload import Gang, Service, Session, Workload, ticks, workload
from rota.simulator.philly import PhillyJob

HOUR = 3600.0


def experiment(**sections) -> Experiment:
    data = {"nodes": 1, "hours": 2, "warmup_h": 0, "seeds": [1],
            "services": {"cold_start_s": 30, "target_s": 2, "idle_min": 5}}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_experiment(data)


def work(exp: Experiment, gangs=(), sessions=(), services=(), requests=None) -> Workload:
    if requests is None:
        requests = np.zeros((ticks(exp), len(services)), dtype=int)
    return Workload(tuple(gangs), tuple(sessions), tuple(services), requests)


def session(sid: str, arrival: float, end: float, *bursts) -> Session:
    return Session(sid, arrival, end, tuple(bursts) or ((arrival, end),))


def steps(result, cls: str) -> list[int]:
    return [milli for _, milli in result.alloc[cls]]


def mix_of_nine(exp: Experiment) -> Workload:
    """Three notebooks, two services (0.3 and 0.47 GPU) and four 1-GPU gangs at time 0: nine
    asks for eight GPUs when each takes a whole GPU, 6.27 GPUs with fractions."""
    notebooks = [session(f"n{i}", 0.0, HOUR) for i in range(3)]
    services = [Service("s0", 300, 1.0, 1), Service("s1", 470, 1.0, 1)]
    gangs = [Gang(f"t{i}", 0.0, HOUR, 1) for i in range(4)]
    return work(exp, gangs, notebooks, services)


def test_fifo_gives_every_ask_whole_gpus_and_one_waits_for_the_ninth():
    exp = experiment()
    res = simulate(exp, mix_of_nine(exp), "fifo")
    for cls in (TRAINING, NOTEBOOKS, SERVICES):
        assert all(milli % 1000 == 0 for milli in steps(res, cls)), cls
    assert max(steps(res, NOTEBOOKS)) == 3000 and max(steps(res, SERVICES)) == 2000
    starts = sorted(start for _, start, _ in res.gangs)
    assert starts[:3] == [0.0, 0.0, 0.0] and starts[3] > 0  # 3 + 2 + 3 = 8 GPUs taken


def test_fractions_change_only_the_notebooks_and_services_shares():
    exp = experiment()
    res = simulate(exp, mix_of_nine(exp), "fractions")
    assert max(steps(res, NOTEBOOKS)) == 3 * 500  # notebooks.gpu_milli
    assert max(steps(res, SERVICES)) == 300 + 470  # the models' shares
    assert all(milli % 1000 == 0 for milli in steps(res, TRAINING))
    # spread placement puts the five fractions on five GPUs: the fourth gang still waits for
    # a whole one, as under fifo
    assert sorted(start for _, start, _ in res.gangs) == [0.0, 0.0, 0.0, HOUR]


def test_idle_reclaims_a_notebook_after_its_idle_period_and_it_asks_again_at_its_next_burst():
    exp = experiment(hours=3)
    nb = session("n0", 0.0, 2 * HOUR, (0.0, 600.0), (3000.0, 3600.0))
    gang = Gang("t0", 0.0, 1800.0, 1)
    fifo = simulate(exp, work(exp, [gang], [nb]), "fifo")
    idle = simulate(exp, work(exp, [gang], [nb]), "idle")
    assert fifo.alloc[NOTEBOOKS] == [(0.0, 1000), (2 * HOUR, 0)]
    # idle since 600 s: reclaimed 10 minutes later; asks again at 3000 s, idle again from 3600
    assert idle.alloc[NOTEBOOKS] == [(0.0, 1000), (1200.0, 0), (3000.0, 1000),
                                     (4200.0, 0)]
    assert (fifo.reclaims, idle.reclaims) == (0, 2)
    assert idle.waits == [0.0, 0.0]
    assert fifo.gangs == idle.gangs == [(0.0, 0.0, 1800.0)]
    assert fifo.useful[NOTEBOOKS] == idle.useful[NOTEBOOKS]  # bursts ran on a GPU in both


def test_scale_to_zero_gives_back_a_quiet_service_and_its_next_request_waits_a_cold_start():
    exp = experiment()
    requests = np.zeros((ticks(exp), 1), dtype=int)
    requests[3:60, 0] = 1  # t = 30 .. 590 s
    requests[300, 0] = 1  # t = 3000 s, after 40 quiet minutes
    svc = [Service("s0", 1000, 1.0, 1)]
    fifo = simulate(exp, work(exp, services=svc, requests=requests), "fifo")
    s2z = simulate(exp, work(exp, services=svc, requests=requests), "scale-to-zero")
    assert fifo.requests == s2z.requests == 58
    assert fifo.on_time == 58 and fifo.cold_starts == 0
    assert steps(fifo, SERVICES) == [1000, 0]  # held from 0 to the horizon
    # asked at 30 s, ready at 60 s: the requests of 30, 40 and 50 s are late, and the one at
    # 3000 s waits a whole cold start (30 s > the 2 s target)
    assert s2z.cold_starts == 2 and s2z.requests - s2z.on_time == 4
    assert s2z.alloc[SERVICES][:3] == [(0.0, 0), (30.0, 1000), (590.0 + 300.0, 0)]


def test_preemption_evicts_training_for_a_notebook_and_the_gang_loses_its_run_since_the_checkpoint():
    exp = experiment(hours=8, node={"gpus": 8}, training={"checkpoint_min": 30})
    gang = Gang("t0", 0.0, 4 * HOUR, 8)
    nb = session("n0", 3700.0, 3700.0 + HOUR)
    fifo = simulate(exp, work(exp, [gang], [nb]), "fifo")
    pre = simulate(exp, work(exp, [gang], [nb]), "preemption")
    # the gang holds every GPU until 4 h: the session ends at 7,300 s without its GPU, and
    # its ask counts as waiting its whole hour
    assert fifo.waits == [HOUR] and fifo.preemptions == 0
    assert fifo.gangs == [(0.0, 0.0, 4 * HOUR)]
    assert pre.waits == [0.0] and pre.preemptions == 1
    assert pre.lost_gpu_s == 100.0 * 8  # 3,700 s run, saved at 3,600
    # resumes from 3,600 s when the notebook ends at 7,300 s: 10,800 s left
    assert pre.gangs == [(0.0, 0.0, 7300.0 + 4 * HOUR - 3600.0)]


def test_packing_keeps_a_node_whole_for_a_gang_that_spread_placement_blocks():
    exp = experiment(nodes=2)
    notebooks = [session("n0", 0.0, HOUR), session("n1", 0.0, HOUR)]
    gang = Gang("t0", 10.0, HOUR, 8)
    spread = simulate(exp, work(exp, [gang], notebooks), "fifo")
    packed = simulate(exp, work(exp, [gang], notebooks), "packing")
    assert spread.gangs[0][1] == HOUR  # one notebook on each node: no node is whole
    assert packed.gangs[0][1] == 10.0


def test_a_seed_draws_the_same_workload_and_figures_and_another_seed_others():
    exp = experiment(hours=6, warmup_h=1, nodes=2)
    rows = [(PhillyJob(f"j{i}", 0.0, 600.0 * (i + 1), g, "vc"), 600.0 * (i + 1))
            for i, g in enumerate([1, 1, 2, 4, 8])]
    shares = [470, 650, 1000]
    one, again, other = (workload(exp, rows, shares, s) for s in (1, 1, 2))
    assert (one.gangs, one.sessions, one.services) == (again.gangs, again.sessions,
                                                       again.services)
    assert np.array_equal(one.requests, again.requests)
    assert one.gangs != other.gangs
    for configuration in ("fifo", "all"):
        first = summarise(simulate(exp, one, configuration, 1), exp)
        assert first == summarise(simulate(exp, again, configuration, 1), exp)
    report = over_seeds([summarise(simulate(exp, w, "all", s), exp)
                         for s, w in ((1, one), (2, other))])
    assert report["seeds"] == [1, 2] and report["alloc"]["sd"] >= 0


@pytest.mark.parametrize("data, field, reason", [
    ({"services": {"replica_rp": 1}}, "services.replica_rp", "unknown key"),
    ({"training": {"load": 0}}, "training.load", "must be > 0"),
    ({"notebooks": {"active_share": 1.5}}, "notebooks.active_share", "must be <= 1"),
    ({"notebooks": {"gpu_milli": 0.5}}, "notebooks.gpu_milli", "whole number"),
    ({"configurations": ["fifo", "magic"]}, "configurations", "expected a list of fifo"),
    ({"seeds": [-1]}, "seeds", "integers >= 0"),
    ({"warmup_h": 40}, "warmup_h", "below hours"),
    ({"training": {"max_gpus": 16}}, "training.max_gpus", "one node"),
    ({"colour": "blue"}, "colour", "unknown key"),
    ({"cost": "cheap"}, "cost", "expected a mapping"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_parameters_are_refused_naming_the_field(data, field, reason):
    with pytest.raises(InvalidSpec) as err:
        parse_experiment(data)
    assert err.value.field == field and reason in err.value.reason


def test_the_defaults_are_the_example_files_values_and_configurations_name_mechanisms():
    from pathlib import Path

    import yaml

    path = Path(__file__).parents[2] / "examples" / "mix" / "experiment.yaml"
    assert parse_experiment(yaml.safe_load(path.read_text())) == Experiment()
    assert mechanisms("fifo") == frozenset()
    assert mechanisms("idle") == {"idle"}
    assert mechanisms("all") == {"fractions", "packing", "idle", "scale-to-zero", "preemption"}


def test_fractions_with_packing_leave_whole_gpus_for_training():
    exp = experiment()
    both = mix_of_nine(exp)
    res = simulate(exp, both, "all")  # no request comes: scale-to-zero starts no replica
    assert [start for _, start, _ in res.gangs] == [0.0] * 4  # 3 x 0.5 + 4 GPUs fit in 8
