"""How large a job may grow: limits on everything a job file or a request body can make big.

A job is stored whole and read on every scheduling pass and every launch, so nothing in it may
grow without bound; and what cannot run must be refused when it is submitted, not when it
fails at launch (an environment of 10 MB passes every type check, is stored, and then fails
with ``Argument list too long``). The limits, and why:

- ``env``: at most ``MAX_ENV_VARS`` variables and ``MAX_ENV_CHARS`` characters in all (names
  and values), each value under ``MAX_ARG_CHARS``: Linux refuses to start a program whose
  single argument or variable is 128 KiB or more, or whose arguments and environment together
  pass ``ARG_MAX`` (2 MiB with the usual 8 MiB stack);
- ``selector`` (and ``labels``): at most ``MAX_LABELS`` entries, keys and values of at most
  ``MAX_LABEL_CHARS`` characters, as node labels are;
- ``gpu_model``: at most ``MAX_PATTERNS`` patterns of at most ``MAX_PATTERN_CHARS`` characters;
- ``walltime``: at most ``MAX_WALLTIME_S`` (a year), ``checkpoint.grace`` at most
  ``MAX_GRACE_S`` (a week);
- ``checkpoint.signal``: a signal a job can catch (``SIGKILL`` and ``SIGSTOP`` cannot be
  caught, so a job could never checkpoint on them).

Each check raises ``InvalidSpec`` naming the field below the checked value (``env``,
``env.NAME``, ``selector``, ...); the caller adds its prefix.
"""

from __future__ import annotations

import signal as signals
from typing import Any, Mapping, Sequence

from rota.core import InvalidSpec

MAX_ENV_VARS = 1000
MAX_ENV_CHARS = 512 * 1024
MAX_ARG_CHARS = 128 * 1024 - 1
MAX_LABELS = 64
MAX_LABEL_CHARS = 253
MAX_PATTERNS = 32
MAX_PATTERN_CHARS = 128
MAX_WALLTIME_S = 366 * 86400.0
MAX_GRACE_S = 7 * 86400.0
UNCATCHABLE = frozenset({"SIGKILL", "SIGSTOP"})


def check_env(env: Mapping[str, str], field: str = "env") -> None:
    """An environment a program can be started with."""
    if len(env) > MAX_ENV_VARS:
        raise InvalidSpec(field, f"has {len(env)} variables; at most {MAX_ENV_VARS} are "
                          "allowed: pass large settings in a file of the working directory")
    total = 0
    for name, value in env.items():
        if len(name) + len(value) + 1 > MAX_ARG_CHARS:
            raise InvalidSpec(f"{field}.{name}", f"is {len(value)} characters long; a "
                              f"variable must stay under {MAX_ARG_CHARS + 1} characters (Linux "
                              "refuses to start a program with a longer one): put it in a file")
        total += len(name) + len(value)
    if total > MAX_ENV_CHARS:
        raise InvalidSpec(field, f"holds {total} characters; at most {MAX_ENV_CHARS} are "
                          "allowed: pass large settings in a file of the working directory")


def check_labels(labels: Mapping[str, str], field: str) -> None:
    """A ``selector`` or ``labels`` mapping of bounded size."""
    if len(labels) > MAX_LABELS:
        raise InvalidSpec(field, f"has {len(labels)} entries; at most {MAX_LABELS} are allowed")
    for key, value in labels.items():
        if not key or len(key) > MAX_LABEL_CHARS:
            raise InvalidSpec(field, f"key {key[:40]!r} must be 1 to {MAX_LABEL_CHARS} "
                              "characters")
        if len(value) > MAX_LABEL_CHARS:
            raise InvalidSpec(f"{field}.{key}", f"must be at most {MAX_LABEL_CHARS} characters")


def check_patterns(patterns: Sequence[str], field: str) -> None:
    """GPU model patterns of bounded number and length."""
    if len(patterns) > MAX_PATTERNS:
        raise InvalidSpec(field, f"has {len(patterns)} patterns; at most {MAX_PATTERNS} are "
                          "allowed")
    for k, pattern in enumerate(patterns):
        if len(pattern) > MAX_PATTERN_CHARS:
            raise InvalidSpec(f"{field}[{k}]", f"must be at most {MAX_PATTERN_CHARS} characters")


def check_duration(seconds: float | None, field: str, limit: float) -> None:
    """A duration no longer than ``limit`` seconds."""
    if seconds is not None and seconds > limit:
        raise InvalidSpec(field, f"must be at most {_days(limit)}, got {_days(seconds)}")


def catchable_signal(value: Any, field: str = "signal") -> str:
    """The canonical name (``SIGUSR1``) of a signal a job can catch: ``usr1``, ``SIGUSR1``."""
    name = value.upper() if isinstance(value, str) else ""
    if name and not name.startswith("SIG"):
        name = "SIG" + name
    if name not in signals.Signals.__members__:
        raise InvalidSpec(field, f"expected a signal name such as SIGTERM or SIGUSR1, got "
                          f"{value!r}")
    if name in UNCATCHABLE:
        raise InvalidSpec(field, f"{name} cannot be caught, so a job could never checkpoint on "
                          "it; use SIGTERM or SIGUSR1")
    return name


def _days(seconds: float) -> str:
    return f"{seconds / 86400:g} days" if seconds >= 86400 else f"{seconds:g} s"
