"""Tokens, and operators taking access away (``rota.store.access``):

- ``POST /v1/tokens``: a member issues member tokens for itself; an operator issues any
  (job tokens are issued by the control plane only, one per attempt).
- ``GET /v1/tokens`` and ``DELETE /v1/tokens/{name}``: the caller's tokens; an operator may
  name another ``user``.
- ``POST /v1/users/{name}/disable`` and ``/enable`` (operators only): every token of the user
  is refused (401) from the next request on, or accepted again.
- ``DELETE /v1/users/{name}/tokens`` (operators only): revoke every token of the user at once.
- ``DELETE /v1/users/{name}/projects/{project}?jobs=cancel|keep`` (operators only): end a
  membership; the user's pending jobs of the project are cancelled or kept, as ``jobs`` says
  (required: the operator chooses).

The control loop is woken (``changed``) when jobs were cancelled.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from rota.api.auth import operator, principal
from rota.api.errors import Forbidden
from rota.api.state import Api, api_of
from rota.core import InvalidSpec
from rota.store import NotFound, Principal, Role, TokenInfo

router = APIRouter()


class PendingJobs(str, Enum):
    CANCEL = "cancel"
    KEEP = "keep"


class TokenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    role: Role = Role.MEMBER
    user: str | None = None


@router.post("/v1/tokens", status_code=201)
def issue_token(body: TokenBody, who: Principal = Depends(principal),
                api: Api = Depends(api_of)) -> dict[str, Any]:
    user = body.user or who.user
    if body.role is Role.JOB:
        raise InvalidSpec("role", "job tokens are issued by the control plane, one per "
                          "attempt of a job; choose member, operator or metrics")
    if not who.operator and body.role is Role.METRICS:
        raise Forbidden("only an operator may issue a metrics token")
    if not who.operator and (user != who.user or body.role is Role.OPERATOR):
        raise Forbidden("a member may issue only member tokens for itself")
    issued = api.store.issue_token(user, body.name, body.role)
    return {"token": issued.token, "name": issued.info.name, "user": issued.info.user,
            "role": str(issued.info.role), "display": issued.info.display}


@router.post("/v1/users/{name}/disable")
def disable(name: str, _: Principal = Depends(operator),
            api: Api = Depends(api_of)) -> dict[str, Any]:
    api.store.set_disabled(name, True)
    return {"name": name, "disabled": True}


@router.post("/v1/users/{name}/enable")
def enable(name: str, _: Principal = Depends(operator),
           api: Api = Depends(api_of)) -> dict[str, Any]:
    api.store.set_disabled(name, False)
    return {"name": name, "disabled": False}


@router.delete("/v1/users/{name}/tokens")
def revoke_all(name: str, _: Principal = Depends(operator),
               api: Api = Depends(api_of)) -> dict[str, Any]:
    return {"name": name, "revoked": api.store.revoke_tokens(name)}


@router.delete("/v1/users/{name}/projects/{project}")
def remove_member(name: str, project: str, jobs: PendingJobs = Query(...),
                  _: Principal = Depends(operator),
                  api: Api = Depends(api_of)) -> dict[str, Any]:
    pending = api.store.remove_member(name, project, cancel=jobs is PendingJobs.CANCEL)
    if pending and jobs is PendingJobs.CANCEL:
        api.changed()
    return {"name": name, "project": project, "pending_jobs": pending, "jobs": jobs.value}


@router.get("/v1/tokens")
def list_tokens(user: str | None = None, who: Principal = Depends(principal),
                api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    """The caller's tokens; an operator may name another ``user``."""
    target = _token_owner(who, user, api.store.list_users)
    return [token_view(t) for t in api.store.list_tokens(target)]


@router.delete("/v1/tokens/{name}")
def revoke_token(name: str, user: str | None = None, who: Principal = Depends(principal),
                 api: Api = Depends(api_of)) -> dict[str, Any]:
    target = _token_owner(who, user, api.store.list_users)
    api.store.revoke_token(target, name)
    return {"name": name, "user": target, "revoked": True}


def _token_owner(who: Principal, user: str | None, users: Callable[[], list[str]]) -> str:
    if user is None or user == who.user:
        return who.user
    if not who.operator:
        raise Forbidden("a member may list and revoke only its own tokens")
    if user not in users():
        raise NotFound("user", user)
    return user


def token_view(t: TokenInfo) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "user": t.user, "role": str(t.role),
            "display": t.display, "created_at": t.created_at, "revoked_at": t.revoked_at}
