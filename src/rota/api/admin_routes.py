"""Routes about the cluster's configuration: queues (and who may use them), projects, nodes.

Everyone reads queues and nodes; only an operator changes them (403 ``forbidden`` otherwise):

- ``PUT /v1/queues``: create or replace flavours and queues written as in a cluster file, each
  queue with its optional ``projects`` binding, and the defaults of the control plane (idle
  reclamation, ``fair_use`` caps) and ``prices`` (of a GPU-hour per model, for ``rota usage``);
  all are validated before any is written. A file that defines quotas retires the queues
  without quota open to every project that it does not list; the answer says what became of
  each, and where each project's jobs go when they name no queue (``QueuesApplied``).
- ``GET /v1/fair-use``: the caps per user and per project in force (everyone may read them).
- ``DELETE /v1/queues/{name}``, ``DELETE /v1/projects/{name}``: refused with 409 while jobs
  hold them (``queue_in_use``, ``project_in_use``, ``project_has_jobs``; see
  ``rota.store.admin``), 404 ``not_found`` for an unknown name.
- ``GET /v1/control-plane`` (everyone): whether the control plane answering leads (holds the
  database's ``control-loop`` lease and runs the control loop) or stands by, the lease
  holder that leads, and how long its lease still runs as last seen
  (``rota.control.standby``).
- ``POST /v1/nodes/{name}/{action}``: ``cordon``, ``drain`` (body ``{"reason", "evict"}``,
  both optional) and ``uncordon`` (or ``resume``), which clears cordon, drain and reason.

The control loop is woken (``changed``) after every change the next cycle must see.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from rota.api.auth import operator, principal
from rota.api.state import Api, api_of
from rota.core import InvalidSpec
from rota.spec import build_queues
from rota.store import NotFound, Principal

ACTIONS = ("cordon", "drain", "uncordon", "resume")

router = APIRouter()


class OpenQueueView(BaseModel):
    """A queue without quota that admitted every project before the apply, or does after."""

    name: str
    action: Literal["deleted", "closed", "kept"] = Field(
        description="deleted: it held no pending or running job; closed: it admits no new job, "
                    "and its live jobs stay and run; kept: still open to every project")
    why: Literal["not_listed", "listed", "no_quotas"] = Field(
        description="not_listed: the file defines quotas and leaves it out; listed: the file "
                    "lists it without quota nor projects; no_quotas: the file defines no quota")
    jobs: dict[str, int] = Field(description="a closed queue's live jobs per state")


class DefaultQueueView(BaseModel):
    """Where a project's jobs go when they name no queue."""

    project: str
    queue: str | None = Field(description="the queue named default among those the project "
                                           "may use, else the only one; null: no single one")
    usable: list[str] = Field(description="the queues that admit the project (none: its jobs "
                                          "are refused until a queue admits it)")


class QueuesApplied(BaseModel):
    """What ``PUT /v1/queues`` wrote and what it did to queues open to all without quota."""

    flavors: list[str]
    queues: list[str]
    open_unlimited: list[OpenQueueView]
    default_queues: list[DefaultQueueView]


class NodeAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("", max_length=1000)
    evict: bool = False


@router.get("/v1/queues")
def queues(_: Principal = Depends(principal),
           api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    """Quotas with usage and borrowing, and who may use each (see ``rota.api.views``)."""
    return api.reads.queues()


@router.put("/v1/queues")
def apply_queues(body: dict[str, Any] = Body(...), _: Principal = Depends(operator),
                 api: Api = Depends(api_of)) -> QueuesApplied:
    """Running jobs keep their flavour, and jobs already accepted stay whatever a new
    binding says; the next cycle applies the new quotas. A file that defines quotas
    deletes, or closes while jobs hold it, each queue without quota that admits every
    project and that it does not list (``rota.store.queueset``)."""
    groups = {node.resource_group for node, _, _ in api.store.list_nodes()}
    known = {f.name: f for f in api.store.list_flavors()}
    projects = [p.name for p in api.store.list_projects()]
    applied = build_queues(body, groups, known, projects)
    done = api.store.apply_queue_set(
        applied.flavors.values(),
        {name: (queue, applied.bindings[name]) for name, queue in applied.queues.items()},
        applied.idle, applied.slurm)
    if applied.fair_use_given:
        api.store.put_fair_use(applied.fair_use)
    if applied.prices_given:
        currency, per_model = applied.prices or (None, {})
        api.store.put_prices(currency, per_model)
    api.changed()
    return QueuesApplied(
        flavors=list(done.flavors), queues=list(done.queues),
        open_unlimited=[OpenQueueView(name=o.name, action=o.action, why=o.why,
                                      jobs=dict(o.jobs)) for o in done.open_unlimited],
        default_queues=[DefaultQueueView(project=d.project, queue=d.queue,
                                         usable=list(d.usable)) for d in done.defaults])


@router.get("/v1/fair-use")
def fair_use(_: Principal = Depends(principal),
             api: Api = Depends(api_of)) -> dict[str, Any]:
    """The caps in force per user and per project (``null``: none); ``storage`` in
    bytes."""
    caps = api.store.fair_use()
    return {"user": asdict(caps.user), "project": asdict(caps.project)}


@router.delete("/v1/queues/{name}")
def delete_queue(name: str, _: Principal = Depends(operator),
                 api: Api = Depends(api_of)) -> dict[str, Any]:
    api.store.delete_queue(name)
    api.changed()
    return {"name": name, "deleted": True}


@router.delete("/v1/projects/{name}")
def delete_project(name: str, _: Principal = Depends(operator),
                   api: Api = Depends(api_of)) -> dict[str, Any]:
    """``unbound``: the queues whose ``projects`` listed it (it is removed from them)."""
    unbound = api.store.delete_project(name)
    api.changed()
    return {"name": name, "deleted": True, "unbound": unbound}


@router.post("/v1/nodes/{name}/{action}")
def node_action(name: str, action: str, body: NodeAction | None = Body(None),
                who: Principal = Depends(operator),
                api: Api = Depends(api_of)) -> dict[str, Any]:
    """Take a node out (``cordon``, ``drain``) or put it back (``uncordon``)."""
    if action not in ACTIONS:
        raise NotFound("action", action)
    body = body or NodeAction()
    back = action in ("uncordon", "resume")
    if back and body.reason:
        raise InvalidSpec("reason", f"{action} clears the reason; give none")
    if body.evict and action != "drain":
        raise InvalidSpec("evict", "only a drain evicts the jobs running on the node")
    evicted, kept = api.store.set_node(name, back, drain=action == "drain",
                                       reason=body.reason,
                                       evict_by=who.user if body.evict else None)
    api.changed()
    return {"name": name, "schedulable": back, "drain": action == "drain",
            "reason": body.reason, "evicted": evicted, "not_evicted": kept}


@router.get("/v1/control-plane")
def control_plane(_: Principal = Depends(principal),
                  api: Api = Depends(api_of)) -> dict[str, Any]:
    return dict(api.role())


@router.get("/v1/nodes")
def nodes(who: Principal = Depends(principal),
          api: Api = Depends(api_of)) -> list[dict[str, Any]]:
    """Inventory, states and each GPU's allocations (see ``rota.api.views``)."""
    return api.reads.nodes(who)
