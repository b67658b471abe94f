"""The small text formats inside Slurm's output: host lists, GRES strings and TRES strings.

Vocabulary:
- A **host list** is Slurm's compressed list of node names: ``node[1-3,7],gpu-a[01-02]``
  expands to ``node1 node2 node3 node7 gpu-a01 gpu-a02``. A range keeps the zero padding of
  its lower bound (``[08-10]`` is ``08 09 10``); several bracket groups multiply
  (``r[1-2]n[1-2]``).
- A **GRES** (generic resource) string lists ``name[:type][:count][(detail)]`` items separated
  by commas: ``gpu:h100:4,shard:h100:16`` (what a node has), ``gpu:h100:2(IDX:0-1)`` (what
  is used, with the device indices), ``shard:2(IDX:0)``. A missing count is 1; ``(S:0-1)``
  (sockets) is ignored; ``(IDX:N/A)`` means no device is in use.
- A **TRES** (trackable resource) string is ``cpu=3,mem=2000M,node=1,gres/gpu=2``; memory
  amounts carry a unit (``M``, ``G``, ``T``: Slurm's units are binary, so ``M`` is MiB).

Everything here is pure; malformed text raises ``SlurmOutputError`` naming what was parsed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rota.backends.base import BackendError


class SlurmOutputError(BackendError):
    """Slurm printed something rota cannot read (``code`` is ``slurm_output``)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__("slurm_output", f"{where}: {message}")
        self.where = where


# -- host lists ---------------------------------------------------------------------------------

def split_top(text: str, sep: str = ",", opening: str = "[(", closing: str = "])") -> list[str]:
    """``text`` split at ``sep`` outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for k, char in enumerate(text):
        if char in opening:
            depth += 1
        elif char in closing:
            depth -= 1
        elif char == sep and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    return parts


def expand_hostlist(text: str, where: str = "host list") -> tuple[str, ...]:
    """Every node name of a Slurm host list, in order; ``""`` and ``"(null)"`` are empty."""
    text = text.strip()
    if text in ("", "(null)", "None assigned"):
        return ()
    names: list[str] = []
    for item in split_top(text):
        if not item:
            raise SlurmOutputError(where, f"empty item in host list {text!r}")
        names.extend(_expand_item(item, text, where))
    return tuple(names)


def _expand_item(item: str, whole: str, where: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        if "]" in item:
            raise SlurmOutputError(where, f"unbalanced ']' in host list {whole!r}")
        return [item]
    end = item.find("]", start)
    if end < 0:
        raise SlurmOutputError(where, f"unbalanced '[' in host list {whole!r}")
    prefix, ranges, rest = item[:start], item[start + 1:end], item[end + 1:]
    tails = _expand_item(rest, whole, where) if rest else [""]
    return [f"{prefix}{number}{tail}" for number in _ranges(ranges, whole, where)
            for tail in tails]


def _ranges(text: str, whole: str, where: str) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise SlurmOutputError(where, f"bad range {part!r} in host list {whole!r}")
        width = len(low)
        first, last = int(low), int(high or low)
        if last < first:
            raise SlurmOutputError(where, f"descending range {part!r} in host list {whole!r}")
        out.extend(str(n).zfill(width) for n in range(first, last + 1))
    return out


def parse_indices(text: str, where: str) -> tuple[int, ...]:
    """``0-1,3`` -> (0, 1, 3); ``N/A`` or empty -> ()."""
    if text in ("", "N/A"):
        return ()
    try:
        return tuple(int(n) for n in _ranges(text, text, where))
    except SlurmOutputError:
        raise SlurmOutputError(where, f"bad device indices {text!r}") from None


# -- GRES ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Gres:
    """``count`` of generic resource ``name`` (``gpu``, ``shard``, ``mps``, ...) of ``type``
    (``h100``; ``None`` when untyped); ``indices`` are the devices, where Slurm names them."""

    name: str
    type: str | None
    count: int
    indices: tuple[int, ...] = ()


_GRES_ITEM = re.compile(r"^(?P<body>[^()]+?)(?:\((?P<detail>[^()]*)\))?$")
_IDX = re.compile(r"IDX:(N/A|[0-9][0-9,-]*)")


def parse_gres(text: str, where: str = "gres") -> tuple[Gres, ...]:
    """A GRES string as ``Gres`` items, in Slurm's order; ``""``, ``N/A`` and ``(null)`` are
    empty."""
    text = text.strip()
    if text in ("", "N/A", "(null)"):
        return ()
    return tuple(_gres_item(item.strip(), where) for item in split_top(text, opening="(",
                                                                        closing=")"))


def _gres_item(item: str, where: str) -> Gres:
    match = _GRES_ITEM.match(item)
    if not match:
        raise SlurmOutputError(where, f"cannot read GRES item {item!r}")
    fields = match.group("body").split(":")
    if fields[0].startswith("gres/"):
        fields[0] = fields[0][len("gres/"):]
    name, gres_type, count = fields[0], None, 1
    rest = fields[1:]
    if rest and rest[-1].isdigit():
        count = int(rest.pop())
    if len(rest) > 1 or not name or (rest and not rest[0]):
        raise SlurmOutputError(where, f"cannot read GRES item {item!r}")
    if rest:
        gres_type = rest[0]
    idx = _IDX.search(match.group("detail") or "")
    indices = parse_indices(idx.group(1), f"{where} {item!r}") if idx else ()
    return Gres(name, gres_type, count, indices)


def gres_count(items: tuple[Gres, ...], name: str) -> int:
    return sum(g.count for g in items if g.name == name)


# -- TRES ---------------------------------------------------------------------------------------

_MEMORY_MIB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "P": 1024 ** 3}


def parse_tres(text: str | None, where: str = "tres") -> dict[str, int]:
    """``cpu=3,mem=2000M,gres/gpu=2`` -> {"cpu": 3, "mem": 2000, "gres/gpu": 2}; memory in MiB
    (``mem``), rounded up."""
    out: dict[str, int] = {}
    if not text or text in ("(null)", "N/A"):
        return out
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise SlurmOutputError(where, f"cannot read TRES item {part!r} in {text!r}")
        out[key] = _tres_amount(value, f"{where} {key}")
    return out


def _tres_amount(value: str, where: str) -> int:
    if value.isdigit():
        return int(value)
    match = re.fullmatch(r"([0-9]*\.?[0-9]+)([KMGTP])", value)
    if not match:
        raise SlurmOutputError(where, f"cannot read amount {value!r}")
    return math.ceil(float(match.group(1)) * _MEMORY_MIB[match.group(2)] - 1e-9)
