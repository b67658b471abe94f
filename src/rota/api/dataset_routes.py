"""Datasets over HTTP (``rota dataset``, ``docs/datasets.md``):

- ``POST /v1/datasets`` ``{"name", "project", "source", "version"?, "size"?}``: ``source`` is
  a directory the user's jobs may enter and list on this machine (as the user's OS account
  where jobs run as their owners), or ``s3://bucket/prefix`` read with the control plane's
  S3 credentials (``rota.control.datasources``); ``size`` is a number of bytes, or ``"auto"``
  (the default): the source measured here (an S3 prefix listed);
- ``GET /v1/datasets``: those the token may see (its projects'; an operator's: all), each with
  the nodes whose caches hold it and how many bytes;
- ``GET /v1/datasets/{name}``, ``DELETE /v1/datasets/{name}`` (refused, 409
  ``dataset_in_use``, while a live job names it);
- ``PUT /v1/dataset-quotas/{project}`` ``{"cache_bytes": int | null}`` (operators) and
  ``GET /v1/dataset-quotas/{project}``: the most bytes of a project's datasets all caches may
  hold together, and what they hold now.

Another project's dataset answers 404, as one that does not exist.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Body, Depends
from fastapi.concurrency import run_in_threadpool

from rota.api.auth import principal
from rota.api.errors import Forbidden
from rota.api.state import Api, api_of
from rota.core import InvalidSpec
from rota.control.datasources import s3_size
from rota.core.datasets import (
    DEFAULT_VERSION, Dataset, check_name, check_source, check_version, is_s3,
)
from rota.store import NotFound, Principal, Store
from rota.store.datasets import Cached

router = APIRouter()
_KEYS = frozenset({"name", "project", "source", "version", "size"})


def view(ds: Dataset, cached: list[Cached]) -> dict[str, Any]:
    nodes = [{"node": c.node, "version": c.version, "bytes": c.bytes, "last_used": c.last_used}
             for c in cached if c.dataset == ds.name]
    return {**ds.to_json(), "nodes": nodes, "cached_bytes": sum(n["bytes"] for n in nodes)}


def measured(path: str) -> int:
    """The bytes of the regular files under directory ``path`` (links not followed);
    ``InvalidSpec`` on ``source`` when it cannot be read."""
    try:
        total = 0
        for root, _dirs, files in os.walk(path, onerror=_raise):
            for name in files:
                total += os.lstat(os.path.join(root, name)).st_size
        return total
    except OSError as exc:
        raise InvalidSpec("source", f"cannot read {path} on the control plane's host: "
                          f"{exc.strerror or exc}; give --size to create it without "
                          "measuring") from None


def check_readable(api: Api, user: str, path: str) -> None:
    """The source must be a directory that ``user``'s jobs may enter and list on this
    machine (``Api.workdir_refusal``: as the user's OS account where jobs run as their
    owners): a copy must never show a job what its owner could not read at the source."""
    if api.workdir_refusal is not None:
        refusal = api.workdir_refusal(user, path)
        if refusal is not None:
            raise InvalidSpec("source", refusal)
    elif not os.path.isdir(path):
        raise InvalidSpec("source", f"is not a directory on the server: {path}")


def _raise(exc: OSError) -> None:
    raise exc


def parse(body: Any, user: str, created_at: float) -> tuple[Dataset, bool]:
    """The dataset a request body asks for, and whether its size is to be measured."""
    if not isinstance(body, dict):
        raise InvalidSpec("", "expected a dataset: a JSON object with name, project, source")
    unknown = sorted(set(body) - _KEYS)
    if unknown:
        raise InvalidSpec(unknown[0], f"unknown key; a dataset has {', '.join(sorted(_KEYS))}")
    name = check_name(body.get("name"))
    project = body.get("project")
    if not isinstance(project, str) or not project:
        raise InvalidSpec("project", "is required: the project whose members may use it")
    source = check_source(body.get("source"))
    version = check_version(body.get("version", DEFAULT_VERSION))
    size = body.get("size", "auto")
    if size != "auto" and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise InvalidSpec("size", f"must be a number of bytes (0 or more) or auto, got {size!r}")
    return Dataset(name, project, source, version, None if size == "auto" else size, user,
                   created_at), size == "auto"


def visible(store: Store, name: str, who: Principal) -> Dataset:
    found = store.datasets.get(name)
    if not who.may_see(found.project):
        raise NotFound("dataset", name)
    return found


@router.post("/v1/datasets", status_code=201)
async def create(body: Any = Body(...), who: Principal = Depends(principal),
                 api: Api = Depends(api_of)) -> dict[str, Any]:
    ds, measure = parse(body, who.user, api.clock())
    if not who.may_see(ds.project):
        raise InvalidSpec("project", f"{who.user} is not a member of project {ds.project!r}")
    s3 = is_s3(ds.source)
    if not s3:
        await run_in_threadpool(check_readable, api, who.user, ds.source)
    if measure:
        ds = Dataset(ds.name, ds.project, ds.source, ds.version,
                     await run_in_threadpool(s3_size if s3 else measured, ds.source), ds.user,
                     ds.created_at)
    made = await run_in_threadpool(api.store.datasets.create, ds, not who.operator)
    return view(made, [])


@router.get("/v1/datasets")
def datasets(who: Principal = Depends(principal),
             api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    cached = api.store.datasets.caches()
    return [view(d, cached) for d in api.store.datasets.list() if who.may_see(d.project)]


@router.get("/v1/datasets/{name}")
def dataset(name: str, who: Principal = Depends(principal),
            api: Api = Depends(api_of)) -> dict[str, Any]:
    found = visible(api.store, name, who)
    return view(found, api.store.datasets.caches(name))


@router.delete("/v1/datasets/{name}")
def delete(name: str, who: Principal = Depends(principal),
           api: Api = Depends(api_of)) -> dict[str, Any]:
    visible(api.store, name, who)
    api.store.datasets.remove(name)
    return {"name": name, "deleted": True}


@router.put("/v1/dataset-quotas/{project}")
def put_quota(project: str, body: Any = Body(...), who: Principal = Depends(principal),
              api: Api = Depends(api_of)) -> dict[str, Any]:
    if not who.operator:
        raise Forbidden("only an operator sets quotas on cached datasets")
    if not isinstance(body, dict) or set(body) != {"cache_bytes"}:
        raise InvalidSpec("cache_bytes", "is required: a number of bytes, or null for none")
    api.store.datasets.set_quota(project, body["cache_bytes"])
    return quota(project, who, api)


@router.get("/v1/dataset-quotas/{project}")
def quota(project: str, who: Principal = Depends(principal),
          api: Api = Depends(api_of)) -> dict[str, Any]:
    if not who.may_see(project):
        raise NotFound("project", project)
    limit, used = api.store.datasets.quota(project)
    return {"project": project, "cache_bytes": limit, "cached_bytes": used}
