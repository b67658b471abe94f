"""Configuration and identity rows: projects, users, memberships, tokens, flavours, queues, nodes.

Every function takes an open connection; the caller (``Store``) owns the transaction. Names are
checked with ``rota.store.jobs.check_name``; a duplicate is ``AlreadyExists``, a missing
reference ``NotFound``. ``put_*`` functions create or replace (operators re-apply files).

Vocabulary and rules the operator's deletes and node states keep:

- A queue's *binding* (``queues.projects``) lists the projects whose new jobs it admits; NULL
  admits every project, an empty list none. It is checked when a job is submitted; a job
  accepted before a binding changed stays and runs.
- *Live* jobs are pending or holding resources (scheduled, running, preempting). A queue or
  project with live jobs is not deleted (``InUse``: ``queue_in_use``, ``project_in_use``). A
  project with finished jobs is not deleted either (``project_has_jobs``): ``jobs.project``
  references it and a job's history is never lost. A queue with only finished jobs is deleted;
  those jobs keep its name. Deleting a project removes it from every binding (a binding it
  was alone in then admits no project); cohorts are names shared by queues, so deleting a
  queue leaves the others' cohort as it is, one lender fewer.
- A user's *OS account* (``users.unix_user``) is the account its jobs run as on machines the
  control plane runs jobs on; NULL means the account of the same name. Several users may map
  to one account (they then share its rights); ``unix_users`` gives the whole map.
- A node is *ok*, *cordoned* (``schedulable`` false) or *drained* (``drain`` true, and
  ``schedulable`` false too, so the scheduler places nothing new there). ``reason`` says why
  the operator took it out; resuming clears all three. Jobs running on a cordoned or drained
  node go on, unless the operator evicts them (``evict``): each is moved to PREEMPTING with its
  grace period, exactly as a preemption victim, and the control loop signals, stops and
  requeues it. Non-preemptible jobs are not evicted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, delete, func, insert, select, update

from rota.core import Flavor, InvalidSpec, JobState, Node, Project, Queue
from rota.core.shortforms import counted
from rota.store import access, convert
from rota.store import jobs as job_rows
from rota.store.errors import AlreadyExists, InUse, NotFound, Unauthenticated
from rota.store.jobs import check_name
from rota.store.moves import move
from rota.store.schema import (
    api_tokens, budgets, flavors, idle_policies, jobs, memberships, nodes, projects, queues,
    usage, users,
)

# what useradd accepts (a portable name: letters, digits, '.', '_', '-', not first), at most 32
UNIX_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")
LIVE = tuple(str(s) for s in JobState if s is JobState.PENDING or s.holds_resources)
Binding = tuple[str, ...] | None  # the projects a queue admits; None: every project


@dataclass(frozen=True, slots=True)
class UserRecord:
    """A user as the operator sees it: its OS account and its projects."""

    name: str
    unix_user: str
    projects: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node as the operator sees it: inventory, who reported it, and how it was taken out."""

    node: Node
    backend: str
    last_seen: float
    drain: bool
    reason: str
    cordoned: bool = False  # by the operator (``node.schedulable`` is also false on a problem)
from rota.store.tokens import (
    JOB_TOKEN, PREFIX, IssuedToken, Principal, Role, TokenInfo, display, job_of, new_token,
    token_hash,
)


def _exists(conn: Connection, table, name: str) -> bool:
    return conn.execute(select(table.c.name).where(table.c.name == name)).first() is not None


def _require(conn: Connection, table, kind: str, name: str) -> None:
    if not _exists(conn, table, name):
        raise NotFound(kind, name)


def create_project(conn: Connection, project: Project, now: float) -> None:
    check_name(project.name, "name")
    if _exists(conn, projects, project.name):
        raise AlreadyExists("project", project.name)
    conn.execute(insert(projects).values(name=project.name, weight=project.weight, created_at=now))


def set_project_weight(conn: Connection, name: str, weight: float) -> None:
    Project(name, weight)  # validates the weight
    if conn.execute(update(projects).where(projects.c.name == name)
                    .values(weight=weight)).rowcount != 1:
        raise NotFound("project", name)


def list_projects(conn: Connection) -> list[Project]:
    return [Project(r.name, r.weight)
            for r in conn.execute(select(projects).order_by(projects.c.name))]


def create_user(conn: Connection, name: str, now: float, unix_user: str | None = None) -> None:
    check_name(name, "name")
    if unix_user is not None:
        check_unix_user(unix_user)
    if _exists(conn, users, name):
        raise AlreadyExists("user", name)
    conn.execute(insert(users).values(name=name, created_at=now, unix_user=unix_user))


def check_unix_user(value: object) -> str:
    if not isinstance(value, str) or not UNIX_NAME.match(value):
        raise InvalidSpec("unix_user", f"is not an OS user name: {value!r} (letters, digits, "
                          "'.', '_' or '-', not first, at most 32)")
    return value


def set_unix_user(conn: Connection, name: str, unix_user: str | None) -> None:
    """Map ``name``'s jobs to OS account ``unix_user`` (None: the account of the same name)."""
    if unix_user is not None:
        check_unix_user(unix_user)
    _require(conn, users, "user", name)
    conn.execute(update(users).where(users.c.name == name).values(unix_user=unix_user))


def list_users(conn: Connection) -> list[str]:
    return list(conn.execute(select(users.c.name).order_by(users.c.name)).scalars())


def unix_users(conn: Connection) -> dict[str, str]:
    """Every user's OS account."""
    return {r.name: r.unix_user or r.name
            for r in conn.execute(select(users.c.name, users.c.unix_user))}


def user_records(conn: Connection) -> list[UserRecord]:
    member_of: dict[str, list[str]] = {}
    for m in conn.execute(select(memberships).order_by(memberships.c.project)):
        member_of.setdefault(m.user, []).append(m.project)
    return [UserRecord(r.name, r.unix_user or r.name, tuple(member_of.get(r.name, ())))
            for r in conn.execute(select(users.c.name, users.c.unix_user)
                                  .order_by(users.c.name))]


def add_member(conn: Connection, user: str, project: str) -> None:
    _require(conn, users, "user", user)
    _require(conn, projects, "project", project)
    if conn.execute(select(memberships).where(memberships.c.user == user,
                                              memberships.c.project == project)).first() is None:
        conn.execute(insert(memberships).values(user=user, project=project))


def projects_of(conn: Connection, user: str) -> frozenset[str]:
    return frozenset(conn.execute(select(memberships.c.project)
                                  .where(memberships.c.user == user)).scalars())


def issue_token(conn: Connection, user: str, name: str, role: Role | str,
                now: float) -> IssuedToken:
    check_name(name, "name")
    try:
        role = Role(role)
    except ValueError:
        raise InvalidSpec("role", f"must be one of {', '.join(Role)}, got {role!r}") from None
    if role is not Role.JOB and job_of(name) is not None:
        raise InvalidSpec("name", f"{name!r} is the name of a job's own token "
                                  "(job-ID-ATTEMPT); choose another")
    _require(conn, users, "user", user)
    if conn.execute(select(api_tokens.c.id).where(api_tokens.c.user == user,
                                                  api_tokens.c.name == name)).first():
        raise AlreadyExists("token", f"{user}/{name}")
    token = new_token()
    key = conn.execute(insert(api_tokens).values(
        name=name, user=user, role=str(role), token_hash=token_hash(token),
        display=display(token), created_at=now)).inserted_primary_key[0]
    return IssuedToken(token, TokenInfo(key, name, user, role, display(token), now, None))


def list_tokens(conn: Connection, user: str | None) -> list[TokenInfo]:
    query = select(api_tokens).order_by(api_tokens.c.id)
    if user is not None:
        query = query.where(api_tokens.c.user == user)
    return [TokenInfo(r.id, r.name, r.user, Role(r.role), r.display, r.created_at, r.revoked_at)
            for r in conn.execute(query)]


def revoke_token(conn: Connection, user: str, name: str, now: float) -> None:
    result = conn.execute(update(api_tokens).where(
        api_tokens.c.user == user, api_tokens.c.name == name, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now))
    if result.rowcount != 1:
        raise NotFound("token", f"{user}/{name}")


def authenticate(conn: Connection, token: object) -> Principal:
    if not isinstance(token, str) or not token.startswith(PREFIX):
        raise Unauthenticated("missing or malformed token")
    row = conn.execute(select(api_tokens).where(
        api_tokens.c.token_hash == token_hash(token), api_tokens.c.revoked_at.is_(None))).first()
    if row is None or access.is_disabled(conn, row.user):
        raise Unauthenticated("unknown or revoked token")
    role = Role(row.role)
    if role is Role.JOB:
        found = job_of(row.name)
        if found is None:
            raise Unauthenticated("malformed job token")
        return Principal(row.user, role, projects_of(conn, row.user), row.name, *found)
    if role is Role.METRICS:  # sees no project's jobs, whoever issued it
        return Principal(row.user, role, frozenset(), row.name)
    return Principal(row.user, role, projects_of(conn, row.user), row.name)


def issue_job_tokens(conn: Connection, wanted: list[tuple[str, int]],
                     now: float) -> dict[str, str]:
    """The token of each (job, attempt), in three statements whatever their number: job id ->
    token. A launch that never started may have left one of the same name: it is replaced."""
    keys = [job_rows.job_key(job_id) for job_id, _ in wanted]
    owners = {r.id: r.user for r in conn.execute(
        select(jobs.c.id, jobs.c.user).where(jobs.c.id.in_(keys)))}
    for key, (job_id, _) in zip(keys, wanted):
        if key not in owners:
            raise NotFound("job", job_id)
    names = {job_id: JOB_TOKEN.format(job=job_id, attempt=attempt) for job_id, attempt in wanted}
    conn.execute(delete(api_tokens).where(  # a launch that never started may have left one
        api_tokens.c.role == str(Role.JOB), api_tokens.c.name.in_(list(names.values()))))
    tokens = {job_id: new_token() for job_id, _ in wanted}
    conn.execute(insert(api_tokens), [
        {"name": names[job_id], "user": owners[key], "role": str(Role.JOB),
         "token_hash": token_hash(tokens[job_id]), "display": display(tokens[job_id]),
         "created_at": now} for key, (job_id, _) in zip(keys, wanted)])
    return tokens


def put_idle(conn: Connection, scope: str, policy: dict[str, Any] | None) -> None:
    """Set (None: remove) the idle reclamation defaults of a queue, or of all (``*``)."""
    conn.execute(delete(idle_policies).where(idle_policies.c.scope == scope))
    if policy is not None:
        conn.execute(insert(idle_policies).values(scope=scope, policy=policy))


def idle_defaults(conn: Connection) -> dict[str, dict[str, Any]]:
    return {r.scope: r.policy for r in conn.execute(select(idle_policies))}


def queue_batches(conn: Connection) -> dict[str, dict[str, Any]]:
    """Each queue with batch options -> them, as stored (``rota.core.batchopts``)."""
    rows = conn.execute(select(queues.c.name, queues.c.slurm))
    return {r.name: r.slurm for r in rows if r.slurm is not None}


def put_flavor(conn: Connection, flavor: Flavor) -> None:
    check_name(flavor.name, "name")
    conn.execute(delete(flavors).where(flavors.c.name == flavor.name))
    conn.execute(insert(flavors).values(name=flavor.name, models=list(flavor.models)))


def list_flavors(conn: Connection) -> list[Flavor]:
    return [convert.flavor_from_row(r)
            for r in conn.execute(select(flavors).order_by(flavors.c.name))]


def put_queue(conn: Connection, queue: Queue, projects_: Binding = None,
              slurm: Mapping[str, Any] | None = None) -> None:
    """Create or replace ``queue`` with its binding ``projects_`` (each an existing project)
    and its batch options ``slurm`` (``rota.core.batchopts``; None: none)."""
    check_name(queue.name, "name")
    if projects_ is not None:
        known = set(conn.execute(select(projects.c.name)).scalars())
        for j, name in enumerate(projects_):
            if name not in known:
                raise InvalidSpec(f"projects[{j}]", f"no project named {name!r}")
    if queue.cohort is not None:
        check_name(queue.cohort, "cohort")
    known = {r for r in conn.execute(select(flavors.c.name)).scalars()} | {"any"}
    for flavor in queue.quotas:
        if flavor not in known:
            raise InvalidSpec(f"quotas.{flavor}", f"no flavour named {flavor!r}")
    values = {**convert.queue_values(queue),
              "projects": None if projects_ is None else list(dict.fromkeys(projects_)),
              "slurm": None if slurm is None else dict(slurm)}
    if _exists(conn, queues, queue.name):
        conn.execute(update(queues).where(queues.c.name == queue.name).values(**values))
    else:
        conn.execute(insert(queues).values(name=queue.name, **values))


def get_queue(conn: Connection, name: str) -> Queue:
    row = conn.execute(select(queues).where(queues.c.name == name)).first()
    if row is None:
        raise NotFound("queue", name)
    return convert.queue_from_row(row)


def list_queues(conn: Connection) -> list[Queue]:
    return [convert.queue_from_row(r)
            for r in conn.execute(select(queues).order_by(queues.c.name))]


def bindings(conn: Connection) -> dict[str, Binding]:
    """Each queue's binding, by queue name."""
    return {r.name: None if r.projects is None else tuple(r.projects)
            for r in conn.execute(select(queues.c.name, queues.c.projects))}


def live_counts(conn: Connection, column, name: str) -> dict[str, int]:
    query = (select(jobs.c.state, func.count()).where(column == name, jobs.c.state.in_(LIVE))
             .group_by(jobs.c.state))
    return {state: n for state, n in conn.execute(query)}


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def _lock(conn: Connection, table, kind: str, name: str) -> None:
    """Lock the row named ``name`` against writers (and against a submit's reference to it)."""
    if conn.execute(select(table.c.name).where(table.c.name == name)
                    .with_for_update()).first() is None:
        raise NotFound(kind, name)


def delete_queue(conn: Connection, name: str) -> None:
    """Delete a queue that holds no live job (see the module docstring)."""
    _lock(conn, queues, "queue", name)
    live = live_counts(conn, jobs.c.queue, name)
    if live:
        raise InUse("queue_in_use", f"queue {name} still holds {counted(sum(live.values()), 'job')} "
                    f"({_counted(live)}): cancel them (rota cancel ID) or wait until they "
                    f"finish, then delete it; rota ps --queue {name} lists them", live)
    conn.execute(delete(queues).where(queues.c.name == name))
    conn.execute(delete(idle_policies).where(idle_policies.c.scope == name))


def delete_project(conn: Connection, name: str) -> list[str]:
    """Delete a project without jobs, its memberships, usage and budget, and remove it from
    every binding; returns the queues whose binding changed."""
    _lock(conn, projects, "project", name)
    live = live_counts(conn, jobs.c.project, name)
    if live:
        raise InUse("project_in_use", f"project {name} still has {counted(sum(live.values()), 'job')} "
                    f"({_counted(live)}): cancel them (rota cancel ID) or wait until they "
                    f"finish, then delete it; rota ps --project {name} lists them", live)
    done = conn.execute(select(func.count()).select_from(jobs)
                        .where(jobs.c.project == name)).scalar_one()
    if done:
        raise InUse("project_has_jobs", f"project {name} has {counted(done, 'finished job')} whose "
                    "history is kept under it, so it cannot be deleted; remove it from the "
                    "queues' projects (rota queue apply) to stop new work instead",
                    {"finished": done})
    changed = []
    for queue, bound in bindings(conn).items():
        if bound is not None and name in bound:
            conn.execute(update(queues).where(queues.c.name == queue)
                         .values(projects=[p for p in bound if p != name]))
            changed.append(queue)
    conn.execute(delete(memberships).where(memberships.c.project == name))
    conn.execute(delete(usage).where(usage.c.project == name))
    conn.execute(delete(budgets).where(budgets.c.project == name))
    conn.execute(delete(projects).where(projects.c.name == name))
    return sorted(changed)


def upsert_nodes(conn: Connection, inventory: Iterable[Node], backend: str, now: float) -> None:
    """Record what a backend reports. An existing node keeps its ``schedulable`` (cordon is the
    operator's); a new one takes the reported value."""
    for node in inventory:
        values = {**convert.node_values(node), "backend": backend, "last_seen": now}
        if _exists(conn, nodes, node.name):
            conn.execute(update(nodes).where(nodes.c.name == node.name).values(**values))
        else:
            conn.execute(insert(nodes).values(name=node.name, schedulable=node.schedulable,
                                              **values))


def set_schedulable(conn: Connection, name: str, schedulable: bool) -> None:
    """Cordon (keeping any drain and reason), or resume (``set_node``)."""
    if schedulable:
        set_node(conn, name, True, False, "")
    elif conn.execute(update(nodes).where(nodes.c.name == name)
                      .values(schedulable=False)).rowcount != 1:
        raise NotFound("node", name)


def set_node(conn: Connection, name: str, schedulable: bool, drain: bool, reason: str) -> None:
    """Put a node in one state: ok (True, False, ""), cordoned (False, False, reason) or
    drained (False, True, reason)."""
    if drain and schedulable:
        raise InvalidSpec("drain", "a drained node takes no new work: it is not schedulable")
    if len(reason) > 1000:
        raise InvalidSpec("reason", "must be at most 1000 characters")
    if conn.execute(update(nodes).where(nodes.c.name == name).values(
            schedulable=schedulable, drain=drain, reason=reason)).rowcount != 1:
        raise NotFound("node", name)


def evict(conn: Connection, name: str, by: str, now: float) -> tuple[list[str], list[str]]:
    """Ask the jobs holding resources on node ``name`` to leave (see the module docstring):
    (jobs moved to PREEMPTING, non-preemptible jobs left running), ids in order."""
    _lock(conn, nodes, "node", name)
    held = (str(JobState.SCHEDULED), str(JobState.RUNNING))
    rows = conn.execute(select(jobs.c.id, jobs.c.placement).where(jobs.c.state.in_(held))
                        .order_by(jobs.c.id)).all()
    evicted, kept = [], []
    for key, placement in rows:
        if not any(r["node"] == name for r in placement or ()):
            continue
        row = job_rows.get(conn, key, lock=True)
        if row.cancel_requested:
            continue  # already stopping
        if not row.spec["preemptible"]:
            kept.append(str(key))
            continue
        grace = row.spec["grace_s"]
        why = f"evicted: node {name} is drained"
        move(conn, row, JobState.PREEMPTING, now, f"{why} by {by}",
             {"by": by, "reason": "drain", "node": name, "grace_s": grace},
             preempt_deadline=now + grace, reason=why)
        evicted.append(str(key))
    return evicted, kept


def list_nodes(conn: Connection) -> list[tuple[Node, str, float]]:
    """Every node with the backend that reported it and when it was last seen."""
    return [(convert.node_from_row(r), r.backend, r.last_seen)
            for r in conn.execute(select(nodes).order_by(nodes.c.name))]


def node_records(conn: Connection) -> list[NodeRecord]:
    return [NodeRecord(convert.node_from_row(r), r.backend, r.last_seen, bool(r.drain), r.reason,
                       not r.schedulable)
            for r in conn.execute(select(nodes).order_by(nodes.c.name))]
