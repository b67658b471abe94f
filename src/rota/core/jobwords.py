"""Jobs and nodes in words, read from the API's JSON views (``GET /v1/jobs/ID``,
``GET /v1/nodes``): what ``rota show`` prints and the web dashboard's job page shows, from one
place, so that the two never tell a job differently.

- ``state_text``: ``failed (preempted), exit code 1, cancel requested``;
- ``request_text``: ``2 CPUs, 8 GiB, GPU 1 of H100 (1 replica)``;
- ``gpus``, ``placement`` and ``reason_column``: what a job asks for, where it runs and why it
  is where it is, in the short forms of ``rota ps``;
- ``why_lines`` and ``hints``: the stored wait (or reject) reasons as sentences
  (``rota.core.wording``), a capacity reason told with the nodes that take no new job
  (``sentence_among``: on a cluster whose every node is drained, the drain is the reason);
- ``stderr_tail``: the last lines of a failed job's standard error, where a missing program
  or a Python traceback shows;
- ``queue_note``: what changed about the job's queue since it was accepted;
- ``age`` and ``when``: durations relative to ``now``, which the caller gives (nothing here
  reads a clock).
"""

from __future__ import annotations

from typing import Any, Sequence

from rota.core import shortforms
from rota.core.reasons import Holder, Reason, ReasonCode
from rota.core.shortforms import STARTING, age, node_state, state_word
from rota.core.wording import CAPACITY, amount, duration, hint, sentence

FINISHED = ("succeeded", "failed", "cancelled")
STDERR_LINES = 10  # the last lines of a failed job's standard error that are shown


def when(t: float | None, now: float) -> str:
    """A time relative to now: ``in 5m``, ``3m ago``, ``now``; ``unknown`` for no time."""
    if t is None:
        return "unknown"
    delta = t - now
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def gpus(job: dict[str, Any]) -> str:
    """What a job asks for in GPUs: ``1``, ``0.5 (20 GiB)``, ``2x4`` (replicas x per replica)."""
    g = job["request"]["gpu"]
    return shortforms.gpus(g["count"], g["share"], g.get("memory_mib"), job["replicas"])


def placement(job: dict[str, Any]) -> str:
    """``n1: GPU 0,1`` per replica; a share shows as ``GPU 0 (0.5)``."""
    return shortforms.placement(job.get("placement"))


def reason_column(job: dict[str, Any]) -> str:
    """The REASON column of ``rota ps -o wide``: the reason of the job's last move, else the
    codes of its wait reasons."""
    return shortforms.reason_column(job.get("reason"),
                                    [r.get("code", "") for r in job.get("wait_reasons") or []])


def closed_nodes(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """``gpu-0 is drained (bad fan)`` for each node that takes no new job."""
    return [f"{n['name']} is {node_state(n)}" for n in nodes if node_state(n) != "ok"]


def sentence_among(reason: Reason, nodes: Sequence[dict[str, Any]],
                   now: float | None = None) -> str:
    """``sentence(reason)``, told with the nodes that take no new job (module docstring)."""
    closed = closed_nodes(nodes)
    if reason.code not in CAPACITY or not closed:
        return sentence(reason, now)
    if len(closed) == len(nodes):
        return f"No node takes new jobs: {'; '.join(closed)}."
    return f"{sentence(reason)} Not counted, as they take no new job: {'; '.join(closed)}."


def reason_of(data: dict[str, Any]) -> Reason | None:
    """A stored reason (``wait_reasons`` of a job's view) back as a value; None if it is not
    one this version knows."""
    try:
        return Reason(ReasonCode(data["code"]), data.get("resource"), data.get("requested"),
                      data.get("free"), data.get("capacity"), data.get("detail") or "",
                      data.get("limit"), tuple(
                          Holder(str(h["job"]), tuple(h.get("nodes") or ()), h.get("end"),
                                 bool(h.get("running"))) for h in data.get("holders") or ()))
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def why_lines(job: dict[str, Any], nodes: Sequence[dict[str, Any]] = (),
              now: float | None = None) -> list[str]:
    """Sentences for a job's stored wait (or reject) reasons; the forecast's times relative
    to ``now`` where it is given."""
    out = []
    for data in job.get("wait_reasons") or []:
        reason = reason_of(data)
        out.append(sentence_among(reason, nodes, now) if reason is not None
                   else str(data.get("detail") or data))
    return list(dict.fromkeys(out))


def hints(job: dict[str, Any], nodes: Sequence[dict[str, Any]] = ()) -> list[str]:
    """What the job's owner could do about its reasons, where there is something to say."""
    found = [hint(r) for d in job.get("wait_reasons") or [] if (r := reason_of(d)) is not None]
    if nodes and closed_nodes(nodes):
        found.append("an operator puts a node back in service with rota node uncordon NAME")
    return list(dict.fromkeys(h for h in found if h))


def request_text(job: dict[str, Any]) -> str:
    r = job["request"]
    parts = [f"{amount('cpu', r['cpu_milli'] / 1000)}", amount("memory", r["memory_mib"])]
    g = gpus({"request": r, "replicas": 1})
    if g != "-":
        parts.append(f"GPU {g}" + (f" of {', '.join(r['gpu']['models'])}"
                                   if r["gpu"]["models"] else ""))
    per = "per replica, " if job["replicas"] > 1 else ""
    return ", ".join(parts) + f" ({per}{job['replicas']} replica" + \
        ("s)" if job["replicas"] > 1 else ")")


def state_text(job: dict[str, Any]) -> str:
    state = state_word(job["state"], job["reason"])
    reason = job["reason"] or ""
    if state != job["state"]:  # starting: the backend's reason without the word again
        reason = reason.removeprefix(STARTING)
    detail = f" ({reason})" if reason else ""
    if job.get("exit_code") is not None:
        detail += f", exit code {job['exit_code']}"
    if job.get("cancel_requested") and state not in FINISHED:
        detail += ", cancel requested"
    return state + detail


def queue_note(job: dict[str, Any]) -> str | None:
    """What changed about the job's queue since it was accepted; None: nothing to say."""
    admits = job.get("queue_admits_project", True)
    if admits is None:
        return f"queue {job['queue']} has been deleted; the job keeps its name in its history."
    if admits is False and job["state"] not in FINISHED:
        return (f"queue {job['queue']} no longer admits project {job['project']}; this job was "
                "accepted before that and stays (new jobs of the project need another queue).")
    return None


def not_yet_explained(job: dict[str, Any], now: float) -> str:
    """A pending job no scheduling cycle has given a reason yet."""
    return (f"queued {age(job['submit_time'], now)} ago in {job['queue']}; no scheduling cycle "
            "has recorded a reason for it to wait yet.")


def stderr_tail(stderr: bytes) -> list[str]:
    """The last ``STDERR_LINES`` lines of ``stderr``, decoded (bad bytes replaced)."""
    return stderr.decode("utf-8", "replace").rstrip("\n").splitlines()[-STDERR_LINES:]
