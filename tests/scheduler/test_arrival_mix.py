"""What a placement learns across cycles is an input of the cycle: ``capgd``'s arrival mix.

The caller keeps the mix (``Arrivals`` observes each snapshot's new pending jobs into it) and
hands it to ``run_cycle(..., mix=)``; the cycle plans for it and changes neither it nor the
policy. Without a mix, a cycle plans for the classes of its own pending jobs.
"""

from __future__ import annotations

from builders import bound, cluster, job, node
from rota.scheduler import ArrivalMix, Arrivals, build_policy, run_cycle
from rota.scheduler.plugins.capacity import job_class
from rota.scheduler.plugins.fragment import TaskClass


def capgd(seed: int = 0) -> dict:
    return {"preset": "fifo", "placement": {"name": "capgd", "args": {"seed": seed,
                                                                       "half_life": 1e12}}}


def rare_homes(*pending):
    # g3a and g3b (8 G3 GPUs, 128 cores) are the only homes of BIG (8 GPUs, 120 cores); g2 has
    # 8 G2 GPUs and 96 cores
    return cluster().nodes(node("g3a").gpus(8, "G3").cpu(128), node("g3b").gpus(8, "G3").cpu(128),
                           node("g2").gpus(8, "G2").cpu(96)).jobs(*pending).build()


BIG = job("big").gpus(8).cpu(120).build()
SMALL = job("small").gpus(1).cpu(4)


def mix_of(*jobs) -> ArrivalMix:
    mix = build_policy(capgd()).placement.new_mix()
    mix.observe_jobs(jobs)
    return mix


def test_a_cycle_plans_for_the_mix_it_is_given():
    # mix BIG, SMALL with equal weights (test_capgd has the arithmetic): SMALL costs 3944.4 on
    # a G3 node (it takes one of BIG's rare homes) and -500 on g2, whatever the seed.
    # Without a mix the cycle plans for SMALL alone: every node costs 0 and the seeded node
    # order decides, which for some seeds is a G3 node.
    snapshot = rare_homes(SMALL)
    with_mix, without = set(), set()
    for seed in range(6):
        policy = build_policy(capgd(seed))
        with_mix.add(bound(run_cycle(snapshot, policy, 0.0, mix=mix_of(BIG, SMALL.build())))
                     ["small"].placement.nodes[0])
        without.add(bound(run_cycle(snapshot, policy, 0.0))["small"].placement.nodes[0])
    assert with_mix == {"g2"}
    assert without & {"g3a", "g3b"}


def test_the_same_snapshot_and_mix_give_the_same_decisions_and_the_mix_is_left_alone():
    snapshot = rare_homes(SMALL, job("more").gpus(0.5).cpu(2), job("big2").gpus(8).cpu(120))
    policy, mix = build_policy(capgd(3)), mix_of(BIG, SMALL.build())
    estimate, seen = mix.estimate, mix.seen
    first = run_cycle(snapshot, policy, 0.0, mix=mix)
    # another snapshot in between: nothing of its cycle reaches the next
    run_cycle(rare_homes(job("x").gpus(0.3).cpu(60)), policy, 0.0, mix=mix_of(SMALL.build()))
    assert run_cycle(snapshot, policy, 0.0, mix=mix) == first
    assert run_cycle(snapshot, build_policy(capgd(3)), 0.0, mix=mix) == first
    assert (mix.estimate, mix.seen) == (estimate, seen) and mix.estimate is estimate
    assert len(first.binds) == 3


def test_arrivals_observe_each_pending_job_once_per_replica():
    policy = build_policy(capgd())
    arrivals = Arrivals.of(policy)
    assert arrivals is not None
    a, b, c = (job("a").gpus(1).cpu(4).replicas(2), job("b").gpus(0.5).cpu(2),
               job("c").cpu(8))
    base = cluster().nodes(node("n").gpus(8))
    assert arrivals.update(base.jobs(a, b).build()).seen == 3          # a twice, b once
    assert arrivals.update(base.jobs(a, b).build()).seen == 3          # still waiting: no arrival
    assert arrivals.update(cluster().nodes(node("n").gpus(8)).jobs(b, c).build()).seen == 4
    # a was bound and comes back (requeued): it arrives again
    mix = arrivals.update(cluster().nodes(node("n").gpus(8)).jobs(a, b, c).build())
    assert mix.seen == 6 and mix is arrivals.mix
    assert {m for m in mix.counts} == {TaskClass(4000, 1000, 1), TaskClass(2000, 500, 1),
                                       TaskClass(8000, 0, 0)}


def test_a_policy_whose_placement_learns_nothing_has_no_arrivals():
    assert Arrivals.of(build_policy("default")) is None


def test_the_class_of_a_job_is_one_replica_s_cpu_share_count_and_models():
    assert job_class(job("j").gpus(2, models=("*A100*",)).cpu(16).build()) == \
        TaskClass(16_000, 1000, 2, ("*A100*",))
    assert job_class(job("j").gpus(0.25).cpu(1).build()) == TaskClass(1000, 250, 1)
    assert job_class(job("j").cpu(3).build()) == TaskClass(3000, 0, 0)
