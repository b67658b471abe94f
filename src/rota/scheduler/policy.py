"""A policy: one plugin per extension point, built from a name or a spec by the registry.

A spec is a mapping, as written in YAML::

    order: drf                       # or {name: fairshare, args: {half_life_s: 604800}}
    admission: quota
    placement: {name: topology, args: {sample: 8}}
    preemption: minimal-victims      # or none
    backfill: easy                   # or none
    data: {mode: ttfb, bandwidth: 1e9, delay: true}   # or none
    seed: 0

Presets (``PRESETS``) name common combinations; a spec may start from one with ``preset:``.
``data`` is placement by time to first batch for jobs that read datasets
(``rota.scheduler.data``): on by default in every preset with these settings; it changes
nothing for jobs without datasets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import ValidationError

from rota.core import InvalidSpec
from rota.scheduler.plugins import (  # noqa: F401
    admission, backfill, capacity, fairshare, jct, order, packing, preempt, score,
)
from rota.scheduler.data import DataArgs
from rota.scheduler.plugins.registry import create

PRESETS: dict[str, dict[str, Any]] = {
    "default": {"order": "priority", "admission": "quota", "placement": "topology",
                "preemption": "minimal-victims", "backfill": "easy"},
    "fifo": {"order": "fifo", "admission": "quota", "placement": "binpack",
             "preemption": "none", "backfill": "none"},
    "besteffort": {"order": "besteffort-fifo", "admission": "quota", "placement": "binpack",
                   "preemption": "none", "backfill": "none"},
    "fair": {"order": "drf", "admission": "quota", "placement": "binpack",
             "preemption": "minimal-victims", "backfill": "easy"},
    "fairshare": {"order": "fairshare", "admission": "quota", "placement": "binpack",
                  "preemption": "minimal-victims", "backfill": "easy"},
    "fair-sjf": {"order": "fair-shortest-first", "admission": "quota", "placement": "binpack",
                 "preemption": "none", "backfill": "none"},
    "fair-sharing": {"order": "queue-share", "admission": "quota", "placement": "binpack",
                     "preemption": "fair-sharing", "backfill": "easy"},
    "spread": {"order": "priority", "admission": "quota", "placement": "spread",
               "preemption": "minimal-victims", "backfill": "easy"},
}
OPTIONAL = ("preemption", "backfill")
KEYS = ("preset", "order", "admission", "placement", "preemption", "backfill", "data", "seed")


DEFAULT_USAGE_HALF_LIFE_S = 7 * 86400.0


@dataclass(frozen=True)
class Policy:
    order: Any
    admission: Any
    placement: Any
    preemption: Any | None
    backfill: Any | None
    seed: int = 0
    name: str = "custom"
    data: DataArgs | None = field(default_factory=DataArgs)  # None: data placement off

    @property
    def usage_half_life_s(self) -> float:
        """How fast past GPU use is forgotten: the order plugin's ``half_life_s`` (fairshare),
        else 7 days. The one decay of usage, for the live store and the simulator alike."""
        return float(getattr(self.order, "half_life_s", DEFAULT_USAGE_HALF_LIFE_S))


def build_policy(spec: str | Mapping[str, Any]) -> Policy:
    """A policy from a preset name or a spec mapping; raises InvalidSpec/UnknownPlugin."""
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise InvalidSpec("policy", f"no preset named {spec!r}; known: {', '.join(PRESETS)}")
        return build_policy({"preset": spec})
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise InvalidSpec(f"policy.{unknown[0]}", f"unknown key; known: {', '.join(KEYS)}")
    preset_name = spec.get("preset", "default")
    if preset_name not in PRESETS:
        raise InvalidSpec("policy.preset", f"no preset named {preset_name!r}; known: {', '.join(PRESETS)}")
    merged = {**PRESETS[preset_name], **{k: v for k, v in spec.items() if k != "preset"}}
    seed = merged.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InvalidSpec("policy.seed", f"must be an integer, got {seed!r}")
    plugins = {}
    for point in ("order", "admission", "placement", "preemption", "backfill"):
        name, args = _name_args(point, merged[point])
        plugins[point] = None if (point in OPTIONAL and name == "none") else create(point, name, args)
    name = preset_name if set(spec) <= {"preset", "seed"} else "custom"
    return Policy(seed=seed, name=name, data=_data(spec.get("data")), **plugins)


def _data(value: Any) -> DataArgs | None:
    """The ``data:`` settings: ``none``, or a mapping of ``DataArgs`` (absent: the defaults)."""
    if value == "none":
        return None
    if value is not None and not isinstance(value, Mapping):
        raise InvalidSpec("policy.data", f"expected none or a mapping of mode, bandwidth, "
                                         f"delay, got {value!r}")
    try:
        return DataArgs.model_validate(dict(value or {}))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise InvalidSpec(f"policy.data.{where}".rstrip("."), err["msg"]) from None


def _name_args(point: str, value: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(value, str):
        return value, {}
    if isinstance(value, Mapping):
        extra = sorted(set(value) - {"name", "args"})
        if extra:
            raise InvalidSpec(f"policy.{point}.{extra[0]}", "unknown key; use name and args")
        if not isinstance(value.get("name"), str):
            raise InvalidSpec(f"policy.{point}.name", "a plugin name is required")
        args = value.get("args") or {}
        if not isinstance(args, Mapping):
            raise InvalidSpec(f"policy.{point}.args", "must be a mapping")
        return value["name"], dict(args)
    raise InvalidSpec(f"policy.{point}", f"expected a plugin name or {{name, args}}, got {value!r}")
