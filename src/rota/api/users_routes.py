"""Who the caller is, projects and users: ``GET /v1/whoami``, ``GET|POST /v1/projects``,
``GET|POST /v1/users``, ``PATCH /v1/users/{name}`` (its OS account) and
``POST /v1/users/{name}/projects`` (a membership). Everyone reads who it is and its projects;
only an operator creates projects and users or changes them (403 otherwise).
"""

from __future__ import annotations

import pwd

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from rota.api.auth import operator, principal
from rota.api.state import Api, api_of
from rota.control.sysaccounts import system_account_refusal
from rota.core import InvalidSpec
from rota.store import Principal

router = APIRouter()


class ProjectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    weight: float = 1.0


class ProjectRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: str


class UserBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    projects: list[str] = []
    unix_user: str | None = None  # the OS account of its jobs; None: the account named ``name``
    allow_system_account: bool = False  # root or a uid below 1000 (rota.control.sysaccounts)


class UserChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    unix_user: str | None  # None: back to the account named like the user
    allow_system_account: bool = False


def _check_account(account: str, allowed: bool) -> None:
    """Refuse, naming ``unix_user``, to map a user to root or a system account unless
    ``allowed`` (``rota.control.sysaccounts``)."""
    refusal = None if allowed else system_account_refusal(account)
    if refusal is not None:
        raise InvalidSpec("unix_user", refusal)


def _exists_here(api: Api, account: str) -> bool | None:
    """Whether the OS account exists on the control plane's machine, where jobs run as their
    owners' accounts (a backend that runs commands, not container images: the one that is
    given ``workdir_refusal``); None where jobs do not run as OS accounts here."""
    if api.workdir_refusal is None:
        return None
    try:
        pwd.getpwnam(account)
    except KeyError:
        return False
    return True


@router.get("/v1/whoami")
def whoami(who: Principal = Depends(principal)) -> dict[str, Any]:
    return {"user": who.user, "role": str(who.role), "projects": sorted(who.projects)}


@router.get("/v1/projects")
def projects(who: Principal = Depends(principal),
             api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    return api.reads.projects(who)


@router.post("/v1/projects", status_code=201)
def create_project(body: ProjectBody, _: Principal = Depends(operator),
                   api: Api = Depends(api_of)) -> dict[str, Any]:
    project = api.store.create_project(body.name, body.weight)
    return {"name": project.name, "weight": project.weight}


@router.get("/v1/users")
def users(_: Principal = Depends(operator),
          api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    """Every user: its OS account (what its jobs run as) and its projects."""
    return [{"name": u.name, "unix_user": u.unix_user, "projects": list(u.projects)}
            for u in api.store.user_records()]


@router.post("/v1/users", status_code=201)
def create_user(body: UserBody, _: Principal = Depends(operator),
                api: Api = Depends(api_of)) -> dict[str, Any]:
    """A user, the projects it is a member of and its OS account, in one transaction."""
    account = body.unix_user or body.name
    _check_account(account, body.allow_system_account)
    api.store.create_user(body.name, body.projects, unix_user=body.unix_user)
    return {"name": body.name, "projects": sorted(set(body.projects)),
            "unix_user": account, "unix_user_exists": _exists_here(api, account)}


@router.patch("/v1/users/{name}")
def change_user(name: str, body: UserChange, _: Principal = Depends(operator),
                api: Api = Depends(api_of)) -> dict[str, Any]:
    """Map ``name``'s jobs to another OS account (null: the account named like it)."""
    account = body.unix_user or name
    _check_account(account, body.allow_system_account)
    api.store.set_unix_user(name, body.unix_user)
    return {"name": name, "unix_user": account, "unix_user_exists": _exists_here(api, account)}


@router.post("/v1/users/{name}/projects", status_code=201)
def add_member(name: str, body: ProjectRef, _: Principal = Depends(operator),
               api: Api = Depends(api_of)) -> dict[str, Any]:
    api.store.add_member(name, body.project)
    return {"name": name, "project": body.project}
