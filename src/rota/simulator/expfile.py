"""Reading an experiment's file (``rota sim cohost``, ``elastic``, ``mix``): the checks they
share, each refusal an ``InvalidSpec`` naming the field as the file spells it (``slurm.load``)
and the reason."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from rota.core import InvalidSpec


def keys(data: Any, known: Sequence[str], where: str) -> Mapping:
    """``data`` (None: empty) as a mapping of the ``known`` keys only; ``where`` prefixes the
    field named (``node.``, "" at the top)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidSpec(where.rstrip(".") or "experiment",
                                 f"expected a mapping, got {data!r}")
    unknown = sorted(set(map(str, data)) - set(known))
    if unknown:
        raise InvalidSpec(f"{where}{unknown[0]}", f"unknown key; known: {', '.join(known)}")
    return data


def number(value: Any, name: str, lo: float, open_: bool = False, integer: bool = False,
           hi: float | None = None) -> Any:
    """``value`` as a finite number >= ``lo`` (> with ``open_``), <= ``hi``; an ``int`` with
    ``integer``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidSpec(name, f"expected a number, got {value!r}")
    if integer and value != int(value):
        raise InvalidSpec(name, f"must be a whole number, got {value!r}")
    if value < lo or (open_ and value == lo):
        raise InvalidSpec(name, f"must be {'>' if open_ else '>='} {lo:g}, got {value!r}")
    if hi is not None and value > hi:
        raise InvalidSpec(name, f"must be <= {hi:g}, got {value!r}")
    return int(value) if integer else float(value)


def seeds(data: Mapping, default: Sequence[int]) -> tuple[int, ...]:
    """The file's ``seeds``: a non-empty list of integers >= 0 (each once, in order)."""
    found = data.get("seeds", list(default))
    if (not isinstance(found, list) or not found
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in found)):
        raise InvalidSpec("seeds", f"expected a list of integers >= 0, got {found!r}")
    return tuple(dict.fromkeys(found))


def choices(data: Mapping, key: str, default: Sequence[str], allowed: Sequence[str]
            ) -> tuple[str, ...]:
    """The file's ``key``: a non-empty list of names among ``allowed`` (each once, in order)."""
    found = data.get(key, list(default))
    if not isinstance(found, list) or not found or any(r not in allowed for r in found):
        raise InvalidSpec(key, f"expected a list of {', '.join(allowed)}, got {found!r}")
    return tuple(dict.fromkeys(found))
