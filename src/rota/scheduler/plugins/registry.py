"""One registry of policy plugins, keyed by extension point and name.

A plugin class declares ``name`` and an ``Args`` pydantic model (unknown arguments are
rejected); ``create(point, name, args)`` validates the arguments and builds the plugin. Unknown
points or names raise ``UnknownPlugin`` with the names that exist.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from rota.core import InvalidSpec, UnknownPlugin

POINTS = ("order", "admission", "placement", "preemption", "backfill")
_REGISTRY: dict[str, dict[str, type]] = {p: {} for p in POINTS}

T = TypeVar("T", bound=type)


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def register(point: str) -> Callable[[T], T]:
    if point not in _REGISTRY:
        raise ValueError(f"unknown extension point {point!r}")

    def add(cls: T) -> T:
        _REGISTRY[point][cls.name] = cls  # type: ignore[attr-defined]
        return cls

    return add


def names(point: str) -> list[str]:
    return sorted(_REGISTRY[point])


def arguments(point: str, name: str) -> frozenset[str]:
    """The argument names a registered plugin accepts (empty for an unknown one)."""
    cls = _REGISTRY.get(point, {}).get(name)
    return frozenset(getattr(cls, "Args", NoArgs).model_fields) if cls else frozenset()


def create(point: str, name: str, args: dict[str, Any] | None = None) -> Any:
    if point not in _REGISTRY:
        raise UnknownPlugin(f"unknown extension point {point!r}; known: {', '.join(POINTS)}")
    cls = _REGISTRY[point].get(name)
    if cls is None:
        raise UnknownPlugin(
            f"{point}: no plugin named {name!r}; known: {', '.join(names(point))}")
    arg_model: type[BaseModel] = getattr(cls, "Args", NoArgs)
    try:
        parsed = arg_model.model_validate(args or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise InvalidSpec(f"{point}.args.{where}".rstrip("."), err["msg"]) from None
    return cls(parsed)
