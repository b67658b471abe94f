"""Idle reclamation decided from a policy and what was seen of a running job (pure): which check
is met first, the notice an interactive job gets, and how an operator's defaults and a job's
own settings combine (the job may only be stricter)."""

from __future__ import annotations

import pytest

from rota.scheduler.idle import Check, IdlePolicy, Reclaim, Seen, Warn, effective, judge

GPU = IdlePolicy(gpu_util_below=5, for_s=1800)                 # 30 min under 5 %
QUIET = IdlePolicy(inactive_for_s=3600)                         # an hour without output or calls
LIFE = IdlePolicy(max_lifetime_s=8 * 3600)


@pytest.mark.parametrize("policy, seen, now, interactive, expected", [
    (GPU, Seen(0, low_since=100), 1899, False, None),              # 1799 s under: not yet
    (GPU, Seen(0, low_since=100), 1900, False, Reclaim(Check("gpu-idle", 1800, 5))),
    (GPU, Seen(0, low_since=None), 99999, False, None),            # busy (or unknown): never
    # interactive, 5 min default notice: from 1900 - 300 = 1600 it is warned
    (GPU, Seen(0, low_since=100), 1600, True, Warn(1900, Check("gpu-idle", 1800, 5))),
    (GPU, Seen(0, low_since=100), 1599, True, None),
    (GPU, Seen(0, low_since=100), 1600, False, None),              # batch jobs are not warned
    # no activity seen: counted from the start
    (QUIET, Seen(1000), 4600, False, Reclaim(Check("inactive", 3600))),
    (QUIET, Seen(1000, last_activity=2000), 4600, False, None),
    (LIFE, Seen(0, low_since=None, last_activity=28799), 28800, False,
     Reclaim(Check("lifetime", 28800))),
    # the first check met wins: lifetime at 28800, GPU idle at 1900
    (effective(GPU, LIFE), Seen(0, low_since=100), 1900, False,
     Reclaim(Check("gpu-idle", 1800, 5))),
    (IdlePolicy(), Seen(0, low_since=0, last_activity=0), 10 ** 9, True, None),
], ids=["gpu-not-yet", "gpu-met", "gpu-busy", "warned", "before-notice", "batch-not-warned",
        "inactive-from-start", "recent-output", "lifetime", "first-met-wins", "no-policy"])
def test_judge(policy, seen, now, interactive, expected):
    assert judge(policy, seen, now, interactive) == expected


def test_a_job_may_only_be_stricter_than_the_operator():
    operator = IdlePolicy(gpu_util_below=5, for_s=3600, max_lifetime_s=86400, warn_before_s=600)
    laxer = IdlePolicy(gpu_util_below=1, for_s=7200, max_lifetime_s=10 ** 6)
    stricter = IdlePolicy(gpu_util_below=10, for_s=600, inactive_for_s=900, warn_before_s=60)
    assert effective(operator, laxer) == operator
    assert effective(operator, stricter) == IdlePolicy(10, 600, 900, 86400, 600)
    # a queue's defaults over the global ones, then the job's
    queue = IdlePolicy(max_lifetime_s=3600)
    assert effective(operator, queue, IdlePolicy()).max_lifetime_s == 3600


def test_a_policy_reads_back_from_its_stored_form():
    stored = {"gpu_util_below": 5.0, "for_s": 1800.0, "max_lifetime_s": None,
              "inactive_for_s": 600, "warn_before_s": None, "ignored": "x"}
    assert IdlePolicy.of(stored) == IdlePolicy(5.0, 1800.0, 600.0, None, None)
    assert IdlePolicy.of(None) == IdlePolicy() and IdlePolicy().empty
