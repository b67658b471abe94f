"""``rota plan``: run the scheduler on a cluster and jobs until it settles, and report.

The loop: ``run_cycle`` then ``apply_decisions`` (victims requeued at once, as if their grace
period were over), all at the same ``now``, until a cycle changes nothing (no bind, preemption
or reject) or ``CYCLE_CAP`` cycles have run. The report is the final state (placements,
reservations, pending jobs with the last cycle's reasons) plus what happened on the way
(preemptions, rejections).

``plan_report`` returns plain data: the ``--json`` schema documented in ``docs/plan.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rota.core import JobState, Placement
from rota.scheduler import Bind, Decisions, Policy, Preempt, Reject, Snapshot
from rota.scheduler import apply_decisions, run_cycle
from rota.cli.explain import reason_json, sentence

CYCLE_CAP = 100
SCHEMA = "rota.plan/v1"


@dataclass
class PlanRun:
    initial: Snapshot
    final: Snapshot
    last: Decisions  # the last cycle's decisions: reservations and reasons of the final state
    binds: dict[str, tuple[int, Bind]] = field(default_factory=dict)  # job -> (cycle, bind)
    preemptions: list[tuple[int, Preempt]] = field(default_factory=list)
    rejects: list[tuple[int, Reject]] = field(default_factory=list)
    cycles: int = 0
    converged: bool = True


def run_plan(snapshot: Snapshot, policy: Policy, now: float, cap: int = CYCLE_CAP) -> PlanRun:
    run = PlanRun(snapshot, snapshot, Decisions())
    for k in range(1, cap + 1):
        decisions = run_cycle(run.final, policy, now)
        run.cycles, run.last = k, decisions
        if not decisions.changes_anything:
            return run
        for b in decisions.binds:
            run.binds[b.job] = (k, b)
        run.preemptions += [(k, p) for p in decisions.preemptions]
        run.rejects += [(k, r) for r in decisions.rejects]
        run.final = apply_decisions(run.final, decisions, now)
    run.converged = False
    run.last = run_cycle(run.final, policy, now)
    return run


def policy_json(policy: Policy) -> dict[str, Any]:
    def name(plugin: Any) -> str:
        return "none" if plugin is None else plugin.name
    return {"name": policy.name, "order": name(policy.order), "admission": name(policy.admission),
            "placement": name(policy.placement), "preemption": name(policy.preemption),
            "backfill": name(policy.backfill), "seed": policy.seed}


def placement_json(placement: Placement) -> list[dict[str, Any]]:
    return [{"node": rep.node,
             "gpus": [{"index": d.index, "share": d.milli / 1000, "memory_mib": d.memory_mib}
                      for d in rep.devices]}
            for rep in placement.replicas]


def plan_report(run: PlanRun, policy: Policy, now: float) -> dict[str, Any]:
    jobs = {j.id: j for j in run.final.jobs}
    placements = _placements(run, jobs)
    preemptions = _preemptions(run, jobs)
    reservations = [{"job": r.job, "start_at": r.start_at, "start_in_s": r.start_at - now,
                     "replicas": placement_json(r.placement)} for r in run.last.reservations]
    pending = _pending(run, now)
    rejected = [{"job": r.job, "cycle": k, "reasons": [reason_json(x) for x in r.reasons],
                 "message": " ".join(sentence(x) for x in r.reasons)} for k, r in run.rejects]
    return {
        "schema": SCHEMA, "now": now, "policy": policy_json(policy), "cycles": run.cycles,
        "converged": run.converged,
        "summary": {"placed": len(placements), "preempted": len(preemptions),
                    "reserved": len(reservations), "pending": len(pending),
                    "rejected": len(rejected),
                    "running": sum(1 for j in run.final.jobs if j.state is JobState.RUNNING)},
        "placements": placements, "preemptions": preemptions, "reservations": reservations,
        "pending": pending, "rejected": rejected,
    }


def _placements(run: PlanRun, jobs: dict) -> list[dict[str, Any]]:
    out = []
    for job_id, (k, b) in sorted(run.binds.items(), key=lambda kv: kv[1][0]):
        job = jobs.get(job_id)
        if job is None or job.state is not JobState.RUNNING or job.placement != b.placement:
            continue  # bound, then preempted again on the way
        out.append({"job": job_id, "project": job.project, "queue": job.queue,
                    "priority": job.priority, "flavor": b.flavor, "borrowing": b.borrowing,
                    "backfilled": b.backfilled, "cycle": k, "replicas": placement_json(b.placement)})
    return out


def _preemptions(run: PlanRun, jobs: dict) -> list[dict[str, Any]]:
    out = []
    for k, p in run.preemptions:
        victim = jobs.get(p.job)
        after = "pending" if victim is None or victim.state is JobState.PENDING else "placed"
        why = ("a higher-priority job of the same queue needs its place" if p.reason == "priority"
               else "its queue borrowed quota that another queue of the cohort reclaims")
        out.append({"job": p.job, "by": p.by, "reason": p.reason, "grace_s": p.grace_s,
                    "cycle": k, "then": after,
                    "message": f"Preempted for {p.by}: {why}; it has {p.grace_s:g}s to "
                               f"checkpoint, then is requeued."})
    return out


def _pending(run: PlanRun, now: float) -> list[dict[str, Any]]:
    waits = {w.job: w for w in run.last.waits}
    bound = {b.job for b in run.last.binds}
    out = []
    for job in run.final.jobs:
        if job.state is not JobState.PENDING:
            continue
        wait = waits.get(job.id)
        reasons = [reason_json(r) for r in wait.reasons] if wait else []
        message = " ".join(r["message"] for r in reasons)
        if job.id in bound:
            message = "Still moving when the cycle cap was reached; it would be placed next."
        start = wait.estimated_start if wait else None
        out.append({"job": job.id, "project": job.project, "queue": job.queue,
                    "priority": job.priority, "estimated_start": start,
                    "estimated_start_in_s": None if start is None else start - now,
                    "reasons": reasons, "message": message or "Waiting."})
    return out
