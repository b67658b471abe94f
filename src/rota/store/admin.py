"""Configuration and identity rows: projects, users, memberships, tokens, flavours, queues, nodes.

Every function takes an open connection; the caller (``Store``) owns the transaction. Names are
checked with ``rota.store.jobs.check_name``; a duplicate is ``AlreadyExists``, a missing
reference ``NotFound``. ``put_*`` functions create or replace (operators re-apply files).
"""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import Connection, delete, insert, select, update

from rota.core import Flavor, InvalidSpec, Node, Project, Queue
from rota.store import convert
from rota.store.errors import AlreadyExists, NotFound, Unauthenticated
from rota.store.jobs import check_name
from rota.store.schema import (
    api_tokens, flavors, memberships, nodes, projects, queues, users,
)
from rota.store.tokens import (
    PREFIX, IssuedToken, Principal, Role, TokenInfo, display, new_token, token_hash,
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


def create_user(conn: Connection, name: str, now: float) -> None:
    check_name(name, "name")
    if _exists(conn, users, name):
        raise AlreadyExists("user", name)
    conn.execute(insert(users).values(name=name, created_at=now))


def list_users(conn: Connection) -> list[str]:
    return list(conn.execute(select(users.c.name).order_by(users.c.name)).scalars())


def add_member(conn: Connection, user: str, project: str) -> None:
    _require(conn, users, "user", user)
    _require(conn, projects, "project", project)
    if conn.execute(select(memberships).where(memberships.c.user == user,
                                              memberships.c.project == project)).first() is None:
        conn.execute(insert(memberships).values(user=user, project=project))


def remove_member(conn: Connection, user: str, project: str) -> None:
    conn.execute(delete(memberships).where(memberships.c.user == user,
                                           memberships.c.project == project))


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
    if row is None:
        raise Unauthenticated("unknown or revoked token")
    return Principal(row.user, Role(row.role), projects_of(conn, row.user), row.name)


def put_flavor(conn: Connection, flavor: Flavor) -> None:
    check_name(flavor.name, "name")
    conn.execute(delete(flavors).where(flavors.c.name == flavor.name))
    conn.execute(insert(flavors).values(name=flavor.name, models=list(flavor.models)))


def list_flavors(conn: Connection) -> list[Flavor]:
    return [convert.flavor_from_row(r)
            for r in conn.execute(select(flavors).order_by(flavors.c.name))]


def put_queue(conn: Connection, queue: Queue) -> None:
    check_name(queue.name, "name")
    if queue.cohort is not None:
        check_name(queue.cohort, "cohort")
    known = {r for r in conn.execute(select(flavors.c.name)).scalars()} | {"any"}
    for flavor in queue.quotas:
        if flavor not in known:
            raise InvalidSpec(f"quotas.{flavor}", f"no flavour named {flavor!r}")
    values = convert.queue_values(queue)
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
    if conn.execute(update(nodes).where(nodes.c.name == name)
                    .values(schedulable=schedulable)).rowcount != 1:
        raise NotFound("node", name)


def list_nodes(conn: Connection) -> list[tuple[Node, str, float]]:
    """Every node with the backend that reported it and when it was last seen."""
    return [(convert.node_from_row(r), r.backend, r.last_seen)
            for r in conn.execute(select(nodes).order_by(nodes.c.name))]
