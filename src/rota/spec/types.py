"""Field types shared by the file models: quantities, durations, times, names, patterns.

Each type is an ``Annotated`` pydantic type whose validator reuses the quantity parsers of
``rota.core.resources`` and fails with a reason that says what is expected. Units after
validation: CPU in milli-cores, memory in MiB, GPU quota and shares in milli-GPU, durations
and times in seconds.

``Strict`` is the base of every file model: unknown keys are refused with the list of keys
that exist, and models are frozen.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from rota.core import (
    MILLI, InvalidSpec, parse_cpu_milli, parse_duration_s, parse_gpu,
    parse_gpu_request, parse_gpus, parse_memory_mib,
)
from rota.spec.errors import UNKNOWN_KEY, reason_error


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [f.alias or name for name, f in cls.model_fields.items()]
            for key in data:
                if key not in known:
                    raise PydanticCustomError(UNKNOWN_KEY, "unknown key {key}",
                                              {"key": str(key), "known": ", ".join(known)})
        return data


def _parser(parse):
    def run(value: Any) -> Any:
        if isinstance(value, str) and value.strip().startswith("-"):
            raise reason_error(f"must not be negative, got {value!r}")
        try:
            return parse(value, "")
        except InvalidSpec as exc:
            raise reason_error(exc.reason) from None
    return run


def _positive_duration(value: Any, field: str) -> float:
    seconds = parse_duration_s(value, field)
    if seconds <= 0:
        raise InvalidSpec(field, f"must be longer than zero, got {value!r}")
    return seconds


def _quota_gpu(value: Any, field: str) -> int:
    """A GPU quota in GPUs, fractions allowed (``2.5``) -> milli-GPU."""
    return round(parse_gpus(value, field, example="8 or 2.5") * MILLI)


def _share(value: Any, field: str) -> int:
    """A fraction of one GPU, strictly between 0 and 1 -> milli-GPU."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or not 0 < number < 1:
        raise InvalidSpec(field, f"a share is a fraction of one GPU between 0 and 1, got {value!r}")
    return parse_gpu(number, field)[1]


def _timestamp(value: Any, field: str) -> float:
    """Seconds on the plan's clock: a number, or an ISO 8601 date-time (UTC if no zone)."""
    if isinstance(value, bool):
        raise InvalidSpec(field, f"expected seconds or an ISO date-time, got {value!r}")
    if isinstance(value, (int, float)):
        if math.isnan(value) or math.isinf(value):
            raise InvalidSpec(field, f"must be a finite number of seconds, got {value!r}")
        return float(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidSpec(field, "expected seconds or an ISO date-time such as "
                              f"2026-03-01T09:00:00Z, got {value!r}") from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    raise InvalidSpec(field, f"expected seconds or an ISO date-time, got {value!r}")


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise reason_error(
            "must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, "
            f"got {value!r}")
    return value


def _patterns(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(
            isinstance(p, str) and p.strip() for p in items):
        raise reason_error("expected a GPU model pattern such as '*H100*' or a non-empty list "
                           f"of them, got {value!r}")
    return tuple(items)


def _text(value: Any) -> str:
    """An environment or label value: strings, numbers and booleans, as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise reason_error(f"expected a string, number or boolean, got {value!r}")


# A container image reference as Docker's distribution/reference grammar writes it:
# [domain[:port]/]path[:tag][@algorithm:hex], path components lower-case.
_DOMAIN = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"^(?:{_DOMAIN}(?:\.{_DOMAIN})*(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*"
    r":[0-9a-fA-F]{32,})?$")
MAX_IMAGE_NAME = 255


def _image(value: Any) -> str:
    """A container image reference (``python:3.12``, ``ghcr.io/org/train:v2@sha256:...``)."""
    if not isinstance(value, str) or not _IMAGE.match(value):
        raise reason_error("expected a container image such as python:3.12 or "
                           f"ghcr.io/team/train:v2 (lower-case name, optional tag), got {value!r}")
    name = value.split("@")[0]
    if name.rfind(":") > name.rfind("/"):
        name = name[:name.rfind(":")]  # without its tag
    if len(name) > MAX_IMAGE_NAME:
        raise reason_error(f"the image name is longer than {MAX_IMAGE_NAME} characters")
    return value


def check_image(value: str) -> str:
    """``value`` if it is a container image reference, else ``InvalidSpec`` saying why."""
    try:
        return _image(value)
    except PydanticCustomError as exc:
        raise InvalidSpec("image", str(exc)) from None

def _job_ref(value: Any) -> int:
    """A job id: an integer, or its decimal ASCII digits."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise reason_error(f"expected a job id (a number), got {value!r}")
    text = str(value)
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise reason_error(f"expected a job id (a number), got {value!r}")
    return int(text)


MAX_ARRAY_TASKS = 10_000
_ARRAY_PART = re.compile(r"^(\d{1,6})(?:-(\d{1,6})(?::(\d{1,6}))?)?$")


def parse_array(text: Any) -> tuple[tuple[int, ...], int | None]:
    """Slurm's ``--array`` syntax: ``0-99``, ``1,3,5-7``, ``0-20:5`` (a step), and ``%N`` for at
    most N tasks at once -> (the indices, sorted; the limit or None)."""
    if not isinstance(text, str) or not text.strip():
        raise reason_error(f"expected task indices such as '0-99%10', got {text!r}")
    spec, _, limit_text = text.strip().partition("%")
    indices: set[int] = set()
    for part in spec.split(","):
        m = _ARRAY_PART.match(part.strip())
        if m is None:
            raise reason_error(f"{part.strip()!r} is not an index or a range such as 0-99 "
                               "or 0-20:5")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        step = int(m.group(3)) if m.group(3) is not None else 1
        if last < first or step < 1:
            raise reason_error(f"{part.strip()!r}: a range runs from low to high with a "
                               "positive step")
        indices.update(range(first, last + 1, step))
        if len(indices) > MAX_ARRAY_TASKS:
            raise reason_error(f"has more than {MAX_ARRAY_TASKS} tasks")
    limit = None
    if limit_text:
        if not (limit_text.isascii() and limit_text.isdigit()) or int(limit_text) < 1:
            raise reason_error(f"%{limit_text}: the limit is a positive number of tasks")
        limit = int(limit_text)
    return tuple(sorted(indices)), limit


CpuMilli = Annotated[int, BeforeValidator(_parser(parse_cpu_milli))]
MemoryMiB = Annotated[int, BeforeValidator(_parser(parse_memory_mib))]
Duration = Annotated[float, BeforeValidator(_parser(parse_duration_s))]
PositiveDuration = Annotated[float, BeforeValidator(_parser(_positive_duration))]
GpuAmount = Annotated[tuple[int, int, str], BeforeValidator(_parser(parse_gpu_request))]
QuotaGpu = Annotated[int, BeforeValidator(_parser(_quota_gpu))]
Share = Annotated[int, BeforeValidator(_parser(_share))]
Timestamp = Annotated[float, BeforeValidator(_parser(_timestamp))]
JobRef = Annotated[int, BeforeValidator(_job_ref)]
ArraySpec = Annotated[str, BeforeValidator(lambda v: (parse_array(v), v)[1])]
Name = Annotated[str, BeforeValidator(_name)]
Patterns = Annotated[tuple[str, ...], BeforeValidator(_patterns)]
Text = Annotated[str, BeforeValidator(_text)]
Image = Annotated[str, BeforeValidator(_image)]
