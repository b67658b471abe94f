"""Errors the store raises, in rota's one hierarchy (``rota.core.RotaError``), with stable codes.

Bad input is ``rota.core.InvalidSpec`` (with the dotted field); an illegal job move is
``rota.core.IllegalTransition``. These add what only a store can say.
"""

from __future__ import annotations

from rota.core import InvalidSpec, RotaError


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


class QueueNotAllowed(InvalidSpec):
    """A job names a queue that is bound to other projects (``queues.projects``)."""

    code = "queue_not_allowed"

    def __init__(self, queue: str, project: str, allowed: tuple[str, ...]) -> None:
        projects = "project" if len(allowed) == 1 else "projects"
        admits = (f"only {projects} {', '.join(allowed)} may use it" if allowed
                  else "it is closed to new jobs")
        super().__init__("queue", f"queue {queue} does not admit project {project}: {admits}; "
                         "choose another queue (rota queues shows who may use each)")
        self.queue = queue
        self.project = project
        self.allowed = allowed


class InUse(RotaError):
    """A queue or project that jobs still hold cannot be deleted. ``code`` says which:
    ``queue_in_use``, ``project_in_use`` (pending or running jobs), ``project_has_jobs``
    (finished jobs whose history is kept); ``counts`` is jobs per state."""

    code = "in_use"

    def __init__(self, code: str, message: str, counts: dict[str, int]) -> None:
        super().__init__(message)
        self.code = code
        self.counts = counts


class Conflict(RotaError):
    """Another writer changed the row since it was read (optimistic concurrency); retry."""

    code = "conflict"


class StoreClosed(RotaError):
    """The store was closed (the control plane is stopping); nothing more is written."""

    code = "store_closed"


class Unauthenticated(RotaError):
    """No token, an unknown token, or a revoked one. The message never says which."""

    code = "unauthenticated"


class TooMany(RotaError):
    """A fair-use cap is reached (``code``: ``pending_limit``, ``rate_limited``): try again
    after ``retry_after_s`` seconds, or once some pending jobs have started."""

    code = "too_many_requests"

    def __init__(self, code: str, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after_s = retry_after_s


class KeyReused(RotaError):
    """An idempotency key already named another request of the same user within a day."""

    code = "idempotency_key_reused"

    def __init__(self, key: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} was sent with another request within the "
                         "last day; each new submission needs a key of its own")
        self.field = "Idempotency-Key"
