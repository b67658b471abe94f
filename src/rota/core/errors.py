"""The one error hierarchy of rota, each error with a stable code.

Errors are for bad input and infrastructure faults. Scheduling outcomes (a job that does not
fit, a queue out of quota) are values, not exceptions: see ``rota.core.decisions``.
"""

from __future__ import annotations


class RotaError(Exception):
    """Base of every error rota raises on purpose. ``code`` is stable across releases."""

    code = "rota_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidSpec(RotaError):
    """A value a user gave is wrong. ``field`` is the dotted path of the offending field."""

    code = "invalid_spec"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


class IllegalTransition(RotaError):
    """A job was asked to move between two states that the state table does not connect."""

    code = "illegal_transition"


class UnknownPlugin(RotaError):
    """A policy named a plugin that is not registered."""

    code = "unknown_plugin"
