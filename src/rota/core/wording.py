"""Scheduling reasons and amounts as people read them: the one place a reason becomes words,
for the CLI and for the API's answers alike (reasons stay data everywhere else).

``amount`` and ``duration``: ``2 GPUs``, ``80 GiB``, ``1h30m`` (``rota.core.shortforms``).

``reason_json`` gives a reason's structured fields in user units, plus ``message``:

- ``gpu``: GPUs (a quota reason's milli-GPU are converted), ``cpu``: cores (from milli-cores),
  ``memory`` and ``gpu_memory``: MiB, ``replicas``: replicas of a gang;
- ``requested``: what the job needs (per replica for ``resources``, ``not-preemptible``,
  ``min-runtime`` and ``never-fits``, for the whole gang for ``quota``); ``free``: the most
  that is available now; ``capacity``: the largest node's or GPU's (``never-fits``,
  ``resources``), or for ``quota`` (and ``min-runtime`` with a ``limit``: held by quota its
  queue could reclaim only from jobs too young to evict) the figure of the ``limit`` that
  holds the job: the queue's nominal quota (``nominal``, ``cohort``), nominal plus borrowing
  limit (``borrowing_limit``), the lender's lending limit (``lending_limit``);
- ``mig-switch``: ``capacity`` is when the planned MIG switch takes the instances away and
  ``requested`` when the job would end (seconds since the epoch; None: it has no walltime),
  ``detail`` the nodes;
- ``data-locality``: ``requested`` is what starting cold on the best free node would cost to
  copy (seconds), ``free`` how much longer it may wait for a node that caches its data
  (seconds), ``detail`` that node and the datasets it holds (``n2:imagenet,coco``); both
  amounts are None where the policy's ``data`` mode is ``required`` (no bound).

``sentence`` is the one place a reason becomes words; ``hint`` suggests what to do next.
``estimate_sentence`` tells the forecast's ``estimate`` reason: the jobs that hold what a
pending job needs and when each ends (relative to a ``now`` the caller gives), or why there
is no start estimate.
"""

from __future__ import annotations

from typing import Any

from rota.core.reasons import Reason, ReasonCode
from rota.core.mig import QUOTA_PREFIX
from rota.core.resources import CPU, GPU, MEMORY, MILLI
from rota.core.shortforms import duration, memory

C = ReasonCode


def normalised(reason: Reason) -> dict[str, Any]:
    """Code, resource and amounts in user units (see the module docstring)."""
    scale = 1.0
    if reason.resource == CPU:
        scale = 1 / MILLI
    elif reason.resource == GPU and (reason.code is C.QUOTA or reason.limit is not None):
        scale = 1 / MILLI

    def conv(v: float | None) -> float | int | None:
        if v is None:
            return None
        x = v * scale
        return int(x) if float(x).is_integer() else round(x, 3)

    out = {"code": str(reason.code), "resource": reason.resource,
           "requested": conv(reason.requested), "free": conv(reason.free),
           "capacity": conv(reason.capacity), "detail": reason.detail, "limit": reason.limit}
    if reason.holders:  # the forecast's (``estimate``)
        out["holders"] = [{"job": h.job, "nodes": list(h.nodes), "end": h.end,
                           "running": h.running} for h in reason.holders]
    return out


def reason_json(reason: Reason) -> dict[str, Any]:
    out = normalised(reason)
    out["message"] = sentence(reason)
    return out


__all__ = ["CAPACITY", "amount", "duration", "estimate_sentence", "hint", "normalised",
           "reason_json", "sentence"]

CAPACITY = (C.RESOURCES, C.GANG)


def sentence(reason: Reason, now: float | None = None) -> str:
    """One sentence that says why, with the numbers that matter; an ``estimate`` reason's
    times are told relative to ``now`` where it is given."""
    if reason.code is C.ESTIMATE:
        return estimate_sentence(reason, now)
    n = normalised(reason)
    r = n["resource"]
    req, free, cap = (amount(r, n[k]) for k in ("requested", "free", "capacity"))
    what = "GPU memory" if r == "gpu_memory" else (r or "resources")
    code = reason.code
    if code is C.QUOTA:
        return _quota_sentence(reason, req, free, cap)
    if code is C.RESOURCES:
        if n["requested"] is None:
            return f"Not enough free capacity: {reason.detail}."
        if r == GPU and n["capacity"] == 1 and n["requested"] < 1:
            return (f"No GPU has a {n['requested']:g} share free; the most free on any "
                    f"eligible GPU is {n['free']:g}.")
        if r == "gpu_memory":
            return (f"No GPU with the share free has {req} of GPU memory free; the most free "
                    f"on such a GPU is {free}.")
        return (f"No eligible node has {req} free for one replica; the most free on any of "
                f"them is {free}.")
    if code is C.GANG:
        return (f"Only {n['free']:g} of the {n['requested']:g} replicas fit at once, and a "
                "gang starts all together or not at all.")
    if code is C.BLOCKED:
        return f"Waiting its turn: {reason.detail} (strict FIFO)."
    if code is C.RESERVED:
        return f"Starting it now would delay the reserved job: {reason.detail}."
    if code is C.NOT_PREEMPTIBLE:
        return (f"No eligible node has {req} free for one replica, and the room it needs is "
                f"held by jobs that may not be preempted: {reason.detail}.")
    if code is C.MIN_RUNTIME and reason.limit is not None:
        return (f"Over quota: the job needs {req} and its queue can take {free} more now; the "
                f"quota it could reclaim in its cohort is held by jobs that have not yet run "
                f"their queue's minimum runtime (preemption.min_runtime): {reason.detail}.")
    if code is C.MIN_RUNTIME:
        return (f"No eligible node has {req} free for one replica, and the room it needs is "
                f"held by jobs that have not yet run their queue's minimum runtime "
                f"(preemption.min_runtime): {reason.detail}.")
    if code is C.PREEMPTING:
        return f"Making room: {reason.detail}; it starts once they have exited."
    if code is C.NEVER_FITS:
        if n["requested"] is None:
            return f"Can never run here: {reason.detail}."
        return (f"Can never run here: one replica needs {req} and the largest eligible node "
                f"has {cap}.")
    if code is C.NO_MATCHING_GPU:
        return f"No matching GPU: {reason.detail}."
    if code is C.NO_FLAVOR:
        return f"No quota flavour covers it: {reason.detail}."
    if code is C.UNKNOWN_QUEUE:
        return f"Unknown queue: {reason.detail}."
    if code is C.ACCOUNT:
        return f"Held, not scheduled: {reason.detail}."
    if code is C.HELD:
        return f"Held: {reason.detail}; rota release ID lets it be scheduled."
    if code is C.NOT_BEFORE:
        return "Not before its start time (or a retry's backoff): see the estimated start."
    if code is C.DEPENDENCY:
        return f"Dependency: {reason.detail}."
    if code is C.ARRAY_LIMIT:
        return f"Array limit: {reason.detail}; the next task starts when one ends."
    if code is C.BUDGET:
        return (f"Over budget: {reason.detail}; the project's new jobs wait until the month "
                "ends (UTC) or an operator raises the limit. Running jobs go on.")
    if code is C.MIG_SWITCH:
        return (f"It fits now only on MIG instances of {reason.detail} that a planned geometry "
                f"switch removes {_switch_time(reason.capacity, now)}, before it would end; it "
                "waits for instances that stay.")
    if code is C.DATA_LOCALITY:
        return _data_sentence(reason)
    return reason.detail or str(code)


def _data_sentence(reason: Reason) -> str:
    node, _, names = reason.detail.partition(":")
    held = names.replace(",", ", ")
    plural = "s" if "," in names else ""
    if reason.requested is None:  # a required affinity: no bound
        return (f"Waits for node {node}, which holds its dataset{plural} {held}: its policy "
                "places jobs only on nodes that cache their data (data mode required).")
    return (f"Waits up to {duration(reason.free or 0)} for node {node}, which holds its "
            f"dataset{plural} {held}; starting cold elsewhere would cost "
            f"{duration(reason.requested or 0)} to copy.")


def _switch_time(at: float | None, now: float | None) -> str:
    """``in 2h`` where ``now`` is given, else ``at 20:00 UTC``."""
    if at is None:
        return "soon"
    if now is not None:
        return "now" if at <= now else f"in {duration(at - now)}"
    minutes = int(at) % 86400 // 60
    return f"at {minutes // 60:02d}:{minutes % 60:02d} UTC"


WHY_NO_ESTIMATE = {
    "no-walltime": "it waits behind jobs without a walltime, which may run for ever",
    "never": "the scheduling cycle rejects it",
    "never-quota": ("it does not start even once every job holding resources has ended: its "
                    "queue's quota can never allow it"),
    "never-room": ("it does not start even once every job holding resources has ended: no "
                   "node (no set of nodes, for a gang) can take it"),
    "window": "it would start beyond the forecast's window of {bound}",
    "steps": "the forecast stopped after {bound} steps before it started",
    "depth": "it is not among the first {bound} pending jobs in order, which the forecast follows",
}


def estimate_sentence(reason: Reason, now: float | None = None) -> str:
    """The forecast's word on a pending job: who holds what it needs and until when, or why
    there is no estimate (``rota.scheduler.forecast``)."""
    held = ", ".join(_holder_words(h, now) for h in reason.holders)
    if reason.detail:
        bound = reason.capacity
        if reason.detail == "window" and bound is not None:
            bound = duration(bound)
        elif bound is not None:
            bound = f"{bound:g}"
        why = WHY_NO_ESTIMATE.get(reason.detail, reason.detail).format(bound=bound)
        return f"No start estimate: {why}" + (f": {held}." if held else ".")
    if not held:
        return "Estimated from walltimes: it starts as soon as the cycle reaches it."
    return f"Estimated from walltimes: what it needs is held by {held}."


def _holder_words(holder: Any, now: float | None) -> str:
    where = f" on {', '.join(holder.nodes)}" if holder.nodes else ""
    first = "" if holder.running else ", forecast to start first"
    if holder.end is None:
        return f"{holder.job}{where} (no walltime{first})"
    if now is None:
        return f"{holder.job}{where} (ends by its walltime{first})"
    until = "now" if holder.end <= now else f"within {duration(holder.end - now)}"
    return f"{holder.job}{where} (ends {until}{first})"


def _quota_sentence(reason: Reason, req: str, free: str, cap: str) -> str:
    where, _, lender = reason.detail.partition(", lender ")
    limit = reason.limit
    if limit == "borrowing_limit":
        return (f"Held by its queue's borrowing limit: {where} may use at most {cap} (nominal "
                f"quota plus borrowing limit) and can take {free} more now; the job needs {req}.")
    if limit == "lending_limit":
        return (f"Held by a lending limit: queue {lender} lends at most {cap} of its quota and "
                f"keeps the rest unused; {where} can take {free} more now; the job needs {req}.")
    if limit == "nominal":
        return (f"Over quota: {where} has {free} available now of its nominal {cap}; the job "
                f"needs {req}.")
    return (f"Over quota: the cohort's quota is in use; {where} can take {free} more now "
            f"(nominal {cap}, borrowing included); the job needs {req}.")


def hint(reason: Reason) -> str | None:
    """What a user could do about ``reason``, where there is something useful to say."""
    code = reason.code
    if code is C.NEVER_FITS:
        if reason.resource == GPU and reason.requested is None:  # a node feature no node has
            return ("ask for whole GPUs, or add nodes that can share one (HAMi on Kubernetes, "
                    "the shard GRES on Slurm)")
        if reason.resource == "image":  # no node runs container images
            return ("drop image to run the command on the nodes as they are, or add nodes of a "
                    "backend that runs container images (kubernetes)")
        if reason.resource == GPU:
            return "ask for fewer GPUs per replica and more replicas, or a GPU model with larger nodes"
        if reason.resource and reason.resource.startswith(QUOTA_PREFIX):
            return ("ask for fewer MIG instances per replica and more replicas, or another "
                    "profile")
        return "lower the request per replica, or check the resource group and selector"
    if code is C.QUOTA:
        return "wait for the queue's jobs to finish, lower the request, or use a queue with free quota"
    if code is C.GANG:
        return "fewer replicas, or fewer GPUs per replica, would fit sooner"
    if code in (C.NO_MATCHING_GPU, C.NO_FLAVOR):
        return "change resources.gpu_model, or the queue's flavours"
    if code is C.MIG_SWITCH:
        return ("give it a walltime that ends before the switch, or let it be preempted "
                "(preemptible: true, with a checkpoint grace) so that it may run there")
    if code is C.BUDGET:
        return ("ask an operator to raise the project's hard limit (rota project budget "
                "PROJECT --hard GPU_HOURS), or wait for the next month; rota usage --since "
                "shows what was used")
    return None


def amount(resource: str | None, value: float | int | None) -> str:
    """``(gpu, 2)`` -> ``2 GPUs``; ``(memory, 2048)`` -> ``2 GiB``; ``(cpu, 0.5)`` -> ``0.5 CPU``;
    memory that is not a whole number of GiB has one decimal: NVML's 81559 MiB of an H100 is
    ``79.6 GiB``."""
    if value is None:
        return "?"
    if resource in (GPU, CPU):
        return f"{value:g} {resource.upper()}" + ("" if 0 < value <= 1 else "s")
    if resource in (MEMORY, "gpu_memory"):
        return memory(value)
    if resource == "replicas":
        return f"{value:g} replica" + ("" if value == 1 else "s")
    if resource and resource.startswith(QUOTA_PREFIX):  # a MIG quota: mig-1g.10gb
        return f"{value:g} {resource[len(QUOTA_PREFIX):]} instance" + ("" if value == 1 else "s")
    return f"{value:g} {resource or ''}".strip()

