"""Taking access away: an operator disables a user, revokes every token of a user at once, or
removes a user from a project.

- *Disabled*: ``users.disabled_at`` is set; every token of the user is refused
  (``authenticate`` says only "unknown or revoked", as for any other refusal) until it is
  enabled again. Its rows and its jobs' history stay.
- *Revoked*: every token of the user not yet revoked gets ``revoked_at``; new ones can be
  issued. A token found where it should never be (a log: ``rota.server.leaks``) is revoked
  by its hash alone.
- *Removed from a project*: the membership goes; the user's PENDING jobs of that project are
  either kept (they run as submitted) or returned for the caller to cancel, as the operator
  chose. Jobs already past PENDING are not touched.

The ``Store`` clears its authentication cache after each, so a token stops working at once.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, select, update

from rota.core import JobState
from rota.store.errors import NotFound
from rota.store.schema import api_tokens, jobs, memberships, users
from rota.store.tokens import Role, TokenInfo


def set_disabled(conn: Connection, user: str, disabled: bool, now: float) -> None:
    result = conn.execute(update(users).where(users.c.name == user)
                          .values(disabled_at=now if disabled else None))
    if result.rowcount != 1:
        raise NotFound("user", user)


def is_disabled(conn: Connection, user: str) -> bool:
    return conn.execute(select(users.c.disabled_at).where(users.c.name == user)).scalar() \
        is not None


def revoke_all(conn: Connection, user: str, now: float) -> int:
    """Revoke every live token of ``user``; how many."""
    if conn.execute(select(users.c.name).where(users.c.name == user)).first() is None:
        raise NotFound("user", user)
    return conn.execute(update(api_tokens).where(
        api_tokens.c.user == user, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)).rowcount


def remove_member(conn: Connection, user: str, project: str) -> list[str]:
    """End ``user``'s membership of ``project``; the ids of its PENDING jobs there."""
    result = conn.execute(delete(memberships).where(memberships.c.user == user,
                                                    memberships.c.project == project))
    if result.rowcount != 1:
        raise NotFound("membership", f"{user} in {project}")
    return [str(i) for i in conn.execute(select(jobs.c.id).where(
        jobs.c.user == user, jobs.c.project == project,
        jobs.c.state == str(JobState.PENDING))).scalars()]


def revoke_hashed(conn: Connection, hashes: list[str], now: float) -> dict[str, TokenInfo]:
    """Revoke the live tokens whose hash is among ``hashes``; hash -> each token revoked."""
    found = []
    for start in range(0, len(hashes), 500):  # well under SQLite's limit of bound values
        found += conn.execute(select(api_tokens).where(
            api_tokens.c.token_hash.in_(hashes[start:start + 500]),
            api_tokens.c.revoked_at.is_(None))).all()
    if found:
        conn.execute(update(api_tokens).where(api_tokens.c.id.in_([r.id for r in found]))
                     .values(revoked_at=now))
    return {r.token_hash: TokenInfo(r.id, r.name, r.user, Role(r.role), r.display,
                                    r.created_at, now) for r in found}
