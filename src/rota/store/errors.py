"""Errors the store raises, in rota's one hierarchy (``rota.core.RotaError``), with stable codes.

Bad input is ``rota.core.InvalidSpec`` (with the dotted field); an illegal job move is
``rota.core.IllegalTransition``. These add what only a store can say.
"""

from __future__ import annotations

from rota.core import RotaError


class NotFound(RotaError):
    """A named thing (project, user, queue, job, token) does not exist."""

    code = "not_found"

    def __init__(self, kind: str, key: object) -> None:
        super().__init__(f"no {kind} {key!r}")
        self.kind = kind
        self.key = key


class AlreadyExists(RotaError):
    code = "already_exists"

    def __init__(self, kind: str, key: object) -> None:
        super().__init__(f"{kind} {key!r} already exists")
        self.kind = kind
        self.key = key


class Conflict(RotaError):
    """Another writer changed the row since it was read (optimistic concurrency); retry."""

    code = "conflict"


class StoreClosed(RotaError):
    """The store was closed (the control plane is stopping); nothing more is written."""

    code = "store_closed"


class Unauthenticated(RotaError):
    """No token, an unknown token, or a revoked one. The message never says which."""

    code = "unauthenticated"
