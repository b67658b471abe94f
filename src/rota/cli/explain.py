"""Scheduling reasons as data a reader can use, and as sentences.

``reason_json`` gives a reason's structured fields in user units, plus ``message``:

- ``gpu``: GPUs (a quota reason's milli-GPU are converted), ``cpu``: cores (from milli-cores),
  ``memory`` and ``gpu_memory``: MiB, ``replicas``: replicas of a gang;
- ``requested``: what the job needs (per replica for ``resources`` and ``never-fits``, for the
  whole gang for ``quota``); ``free``: the most that is available now; ``capacity``: the
  largest node's (``never-fits``, ``resources``) or the queue's nominal quota (``quota``).

``sentence`` is the one place a reason becomes words; ``hint`` suggests what to do next.
"""

from __future__ import annotations

from typing import Any

from rota.cli.units import amount
from rota.core import CPU, GPU, MILLI
from rota.core import Reason, ReasonCode

C = ReasonCode


def normalised(reason: Reason) -> dict[str, Any]:
    """Code, resource and amounts in user units (see the module docstring)."""
    scale = 1.0
    if reason.resource == CPU:
        scale = 1 / MILLI
    elif reason.resource == GPU and reason.code is C.QUOTA:
        scale = 1 / MILLI

    def conv(v: float | None) -> float | int | None:
        if v is None:
            return None
        x = v * scale
        return int(x) if float(x).is_integer() else round(x, 3)

    return {"code": str(reason.code), "resource": reason.resource,
            "requested": conv(reason.requested), "free": conv(reason.free),
            "capacity": conv(reason.capacity), "detail": reason.detail}


def reason_json(reason: Reason) -> dict[str, Any]:
    out = normalised(reason)
    out["message"] = sentence(reason)
    return out


__all__ = ["amount", "hint", "normalised", "reason_json", "sentence"]


def sentence(reason: Reason) -> str:
    """One sentence that says why, with the numbers that matter."""
    n = normalised(reason)
    r = n["resource"]
    req, free, cap = (amount(r, n[k]) for k in ("requested", "free", "capacity"))
    what = "GPU memory" if r == "gpu_memory" else (r or "resources")
    code = reason.code
    if code is C.QUOTA:
        return (f"Over quota: {reason.detail} has {free} available now (nominal {cap}, "
                f"cohort borrowing included); the job needs {req}.")
    if code is C.RESOURCES:
        if n["requested"] is None:
            return f"Not enough free capacity: {reason.detail}."
        if r == GPU and n["capacity"] == 1 and n["requested"] < 1:
            return (f"No GPU has a {n['requested']:g} share free; the most free on any "
                    f"eligible GPU is {n['free']:g}.")
        return (f"No eligible node has {req} free for one replica; the most free on any of "
                f"them is {free}.")
    if code is C.GANG:
        return (f"Only {n['free']:g} of the {n['requested']:g} replicas fit at once, and a "
                "gang starts all together or not at all.")
    if code is C.BLOCKED:
        return f"Waiting its turn: {reason.detail} (strict FIFO)."
    if code is C.RESERVED:
        return f"Starting it now would delay the reserved job: {reason.detail}."
    if code is C.PREEMPTING:
        return f"Making room: {reason.detail}; it starts once they have exited."
    if code is C.NEVER_FITS:
        if n["requested"] is None:
            return f"Can never run here: {reason.detail}."
        return (f"Can never run here: one replica needs {req} and the largest eligible node "
                f"has {cap}.")
    if code is C.NO_MATCHING_GPU:
        return f"No GPU model matches: {reason.detail}."
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
    return reason.detail or str(code)


def hint(reason: Reason) -> str | None:
    """What a user could do about ``reason``, where there is something useful to say."""
    code = reason.code
    if code is C.NEVER_FITS:
        if reason.resource == GPU:
            return "ask for fewer GPUs per replica and more replicas, or a GPU model with larger nodes"
        return "lower the request per replica, or check the resource group and selector"
    if code is C.QUOTA:
        return "wait for the queue's jobs to finish, lower the request, or use a queue with free quota"
    if code is C.GANG:
        return "fewer replicas, or fewer GPUs per replica, would fit sooner"
    if code in (C.NO_MATCHING_GPU, C.NO_FLAVOR):
        return "change resources.gpu_model, or the queue's flavours"
    return None
