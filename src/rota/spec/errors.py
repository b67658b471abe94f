"""Turning what can go wrong in a user's file into ``InvalidSpec(field, reason)``.

Vocabulary:
- A *field path* is dotted, with list indices in brackets: ``jobs[2].resources.gpu``,
  ``queues[0].quota.h100.nominal.gpu``. The path names the key as the user wrote it.
- A *reason* says what was wrong and what is expected, in one sentence fragment.

Invariant: nothing here lets a raw pydantic or YAML error text reach the user; every
``ValidationError`` becomes one ``InvalidSpec`` naming its first error, which is a
``SpecErrors`` carrying every error (one per field; unknown keys first) when there are
several, so that a user fixes a file in one go rather than one mistake per run.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from rota.core import InvalidSpec

UNKNOWN_KEY = "rota_unknown_key"
REASON = "rota_reason"


def path_of(loc: Sequence[Any], prefix: str = "") -> str:
    """``("jobs", 2, "resources", "gpu")`` -> ``jobs[2].resources.gpu``; union tags
    (written ``<...>``) are dropped."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith("<"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def join(prefix: str, field: str) -> str:
    """``join("jobs[2]", "walltime")`` -> ``jobs[2].walltime``; works with ``[i]`` fields too."""
    if not prefix:
        return field
    if not field:
        return prefix
    return prefix + field if field.startswith("[") else f"{prefix}.{field}"


def reason_error(reason: str, field: str | None = None) -> PydanticCustomError:
    """A validator's way to fail with ``reason`` as the whole message; ``field`` names a key
    below the validated value (a model validator's way to point at one of its fields)."""
    ctx = {"reason": reason} if field is None else {"reason": reason, "field": field}
    return PydanticCustomError(REASON, "{reason}", ctx)


class SpecErrors(InvalidSpec):
    """Several mistakes at once: ``errors`` (each an ``InvalidSpec``); the field and reason of
    this error are the first one's, so that a caller that shows one error shows that one."""

    def __init__(self, errors: Sequence[InvalidSpec]) -> None:
        super().__init__(errors[0].field, errors[0].reason)
        self.errors = list(errors)


def every(exc: InvalidSpec) -> list[InvalidSpec]:
    """The errors ``exc`` stands for: its own list, or itself."""
    return list(getattr(exc, "errors", None) or [exc])


def combined(errors: Sequence[InvalidSpec]) -> InvalidSpec:
    """One error for ``errors`` (at least one): itself when alone, else a ``SpecErrors``;
    a field named twice keeps its first reason."""
    flat: dict[str, InvalidSpec] = {}
    for exc in errors:
        for one in every(exc):
            flat.setdefault(one.field, one)
    found = list(flat.values())
    return found[0] if len(found) == 1 else SpecErrors(found)


def from_validation(exc: ValidationError, prefix: str = "") -> InvalidSpec:
    """The errors of ``exc`` with dotted field paths (see the module docstring)."""
    return combined([_one(err, prefix) for err in exc.errors(include_url=False)])


def validate_all(model: Any, data: Any, prefix: str = "") -> Any:
    """``model.model_validate(data)``, reporting every mistake at once: an unknown key stops
    pydantic at its mapping (``types.Strict`` refuses it before the fields are read), so each
    one found is noted and left out of a copy of ``data``, and the rest is validated again."""
    found: list[InvalidSpec] = []
    data = copy.deepcopy(data)
    for _ in range(MAX_UNKNOWN_ROUNDS):
        try:
            value = model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            unknown = [e for e in errors if e["type"] == UNKNOWN_KEY]
            found += [_one(e, prefix) for e in (unknown or errors)]
            if unknown and all(_drop(data, e) for e in unknown):
                continue
            break
        if not found:
            return value
        break
    raise combined(found)


MAX_UNKNOWN_ROUNDS = 20


def _drop(data: Any, err: Any) -> bool:
    """Remove the unknown key ``err`` names from ``data``; whether it could be found."""
    where = data
    for part in err["loc"]:
        if isinstance(part, str) and part.startswith("<"):
            continue
        try:
            where = where[part]
        except (KeyError, IndexError, TypeError):
            return False
    key = (err.get("ctx") or {}).get("key")
    for candidate in list(where) if isinstance(where, dict) else []:
        if str(candidate) == key:
            del where[candidate]
            return True
    return False


def _one(err: Any, prefix: str) -> InvalidSpec:
    loc, kind, ctx = list(err["loc"]), err["type"], err.get("ctx") or {}
    if kind == UNKNOWN_KEY:
        loc.append(ctx["key"])
    elif kind == REASON and "field" in ctx:
        loc.extend(ctx["field"].split("."))
    return InvalidSpec(path_of(loc, prefix), _reason(err))


def _reason(err: dict[str, Any]) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == REASON:
        return str(ctx["reason"])
    if kind == UNKNOWN_KEY:
        return f"unknown key; expected one of: {ctx['known']}"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping of keys to values, got {_show(value)}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {_show(value)}"
    msg = str(err["msg"])
    for lead, repl in (("Input should be ", "must be "), ("Value error, ", ""),
                       ("String should ", "must ")):
        if msg.startswith(lead):
            msg = repl + msg[len(lead):]
            break
    return f"{msg}, got {_show(value)}"


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@contextmanager
def at(prefix: str) -> Iterator[None]:
    """Re-raise ``InvalidSpec`` (and pydantic errors) raised inside with ``prefix`` on the field."""
    try:
        yield
    except ValidationError as exc:
        raise from_validation(exc, prefix) from None
    except InvalidSpec as exc:
        raise combined([InvalidSpec(join(prefix, e.field), e.reason) for e in every(exc)]) \
            from None
