"""What a job's page lets its viewer do: cancel, hold and release the job, as ``rota cancel``,
``rota hold`` and ``rota release`` do, through the same store calls as the API's routes
(``POST /v1/jobs/ID/cancel``, ``/hold``, ``/release``) and with the same rule: whoever may see
the job (a member of its project, or an operator) may act on it; a job of another project
answers 404, as one that does not exist.

``offered`` says which buttons a page shows: only to a viewer who may act, and only those the
job's state allows (a pending job that is not held can be held; a held one released; a job
that has not ended, and whose cancel is not already requested, cancelled). ``act`` does one
and says what happened in the words of the CLI; a move the job's state no longer allows
(another person or the control loop got there first) is said, not done. The forms that call
it are checked by ``rota.api.dashboard.session`` (a token of the session, and the origin)
before anything here runs.
"""

from __future__ import annotations

from typing import Any

from rota.api.errors import Forbidden
from rota.api.state import Api
from rota.core import IllegalTransition, InvalidSpec
from rota.store import Principal, Role

ACTIONS = ("cancel", "hold", "release")
FINISHED = ("succeeded", "failed", "cancelled")
MAX_REASON = 1000  # as the store holds a hold's reason


def may_act(who: Principal, project: str) -> bool:
    """Whether ``who`` may act on a job of ``project``: as the API lets its token."""
    return who.role in (Role.MEMBER, Role.OPERATOR) and who.job is None \
        and who.may_see(project)


def offered(job: dict[str, Any], who: Principal) -> tuple[str, ...]:
    """The actions the page of ``job`` (its view) offers ``who`` now (see the module)."""
    if not may_act(who, job["project"]) or job["state"] in FINISHED:
        return ()
    out = []
    if not job.get("cancel_requested"):
        out.append("cancel")
    if job["state"] == "pending" and not job.get("held"):
        out.append("hold")
    if job.get("held"):
        out.append("release")
    return tuple(out)


def act(api: Api, who: Principal, job_id: str, action: str, reason: str = "") -> str:
    """Do ``action`` on the job for ``who``; what happened, in a sentence. ``NotFound`` for a
    job ``who`` may not see, ``Forbidden`` for one it may see but not act on;
    ``InvalidSpec`` for an action or reason that is not one."""
    if action not in ACTIONS:
        raise InvalidSpec("action", f"must be one of {', '.join(ACTIONS)}, got {action!r}")
    if len(reason) > MAX_REASON:
        raise InvalidSpec("reason", f"must be at most {MAX_REASON} characters")
    rec = api.reads.visible_job(job_id, who)
    if not may_act(who, rec.job.project):
        raise Forbidden(f"{who.user} may see job {job_id} but not act on it")
    try:
        if action == "cancel":
            rec = api.store.request_cancel(job_id, by=who.user)
            api.changed()
            if rec.state.terminal:
                return f"Cancelled job {job_id}."
            return (f"Cancel requested for job {job_id} ({rec.state}): it gets its grace "
                    "period to stop; this page shows when it has.")
        if action == "hold":
            api.store.hold(job_id, reason.strip(), by=who.user)
            return f"Held job {job_id}: it stays pending and starts only once released."
        api.store.release(job_id, by=who.user)
        api.changed()
        return f"Released job {job_id}: it is scheduled again."
    except IllegalTransition as exc:
        return f"Nothing done: {exc}."
