"""Nothing in the replay assumes the shared file's months, VC names or sizes: a hand-made trace
of another year, with tenants the shared file does not have and a gang larger than the cluster,
replays under every policy; the example quota files cover tenants they do not list."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota.core import GPU, MILLI
from rota.simulator.philly import busiest, format_time, load, parse_quotas, within
from rota.simulator.replay import POLICIES, ReplayConfig, replay
from rota.simulator.replay_metrics import summarise
from rota.spec import read_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "philly"

# March 2019, rows out of order, VCs "north" and "south-2" (not hex hashes), a 128-GPU job
# (16 x 8) on a 64-GPU cluster, and one busier day (the 12th: 8 + 8 x 4 x ... GPU-hours).
TRACE = """timestamp,duration,num_gpus,gpu_time,cluster
2019-03-12 09:00:00,7200,8,57600,north
2019-03-11 23:59:59,600,1,600,south-2
2019-03-12 09:00:00,3600,32,115200,south-2
2019-03-12 09:00:05,60,1,60,north
2019-03-12 10:00:00,1800,4,7200,north
2019-03-12 10:00:01,120,128,15360,south-2
2019-03-13 01:00:00,30,2,60,south-2
2019-03-14 08:00:00,900,16,14400,north
2019-03-14 08:00:00,900,1,900,north
"""


@pytest.fixture
def jobs(tmp_path):
    path = tmp_path / "march.csv"
    path.write_text(TRACE)
    return load(path)


def test_another_month_loads_in_submission_order(jobs):
    assert [format_time(j.submit)[:10] for j in jobs][:2] == ["2019-03-11", "2019-03-12"]
    assert {j.vc for j in jobs} == {"north", "south-2"}
    start, end, gpu_hours = busiest(jobs, 1)
    assert format_time(start) == "2019-03-12 00:00:00"
    assert len(within(jobs, start, end)) == 5
    assert gpu_hours == pytest.approx((57600 + 115200 + 60 + 7200 + 15360) / 3600)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_replays_it_and_rejects_only_the_gang_larger_than_the_cluster(jobs, policy):
    result = replay(jobs, policy, ReplayConfig(64, walltime_noise=2))
    assert [r.src.num_gpus for r in result.rejected] == [128]
    assert result.stuck == []
    s = summarise(result)
    assert s["finished"] == len(jobs) - 1
    # nothing queues long: 64 GPUs hold the 8-, 32-, 1- and 4-GPU jobs of the 12th at once
    assert s["queue_p99_h"] == 0.0
    assert set(s["slowdown_by_project"]) == {"north", "south-2"}


@pytest.mark.parametrize("gpus", [64, 512])
def test_example_quotas_add_up_to_the_cluster_and_cover_unseen_vcs(jobs, gpus):
    data = read_yaml(EXAMPLES / f"quotas-{gpus}.yaml")
    listed = [k for k in data if k != "*"]
    queues = parse_quotas(data, listed)
    assert sum(q.quotas["any"].nominal[GPU] for q in queues.values()) == gpus * MILLI
    assert {q.cohort for q in queues.values()} == {"philly"}
    # this month's tenants are not listed: they get the "*" quota (1 GPU each); the listed
    # VCs keep their queues without jobs, so their quota is there to borrow: the 32-GPU gang
    # of south-2 runs at once (and on 512 GPUs the 128-GPU gang too)
    finished = len(jobs) - (gpus < 128)
    march = parse_quotas(data, sorted({j.vc for j in jobs}))
    assert {vc: march[vc].quotas["any"].nominal[GPU] for vc in ("north", "south-2")} == {
        "north": MILLI, "south-2": MILLI}
    assert set(march) == {*listed, "north", "south-2"}
    for policy in ("fifo", "fair"):
        s = summarise(replay(jobs, policy, ReplayConfig(gpus, quotas=march)))
        assert (s["finished"], s["stuck"], s["queue_p99_h"]) == (finished, 0, 0.0)
