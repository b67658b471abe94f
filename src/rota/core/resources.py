"""Resource quantities and requests.

Vocabulary:
- CPU is counted in milli-cores (1000 = one core), memory in MiB.
- A GPU share is counted in milli-GPU: 1000 is a whole device. A request is either ``count``
  whole devices (``share == 1000``) or one device's fraction (``count == 1``, ``share < 1000``),
  the way Kubernetes device plugins for GPU sharing express it.
- Quota and usage are vectors over the three resource names of ``RESOURCE_NAMES``; GPU quota is
  in milli-GPU so that fractional jobs are charged exactly.
- A request may name a MIG profile instead (``profile``, ``rota.core.mig``): ``count``
  instances of that profile, each a device given whole. Its GPU charge is the instances'
  compute slices (a ``1g`` is 1/7 of a GPU), and its vector counts them besides, as the quota
  resource ``mig-<profile>``.

Quantity parsing (``"500m"``, ``"16Gi"``, ``0.5``) lives here too: it is pure and every edge
that reads user files needs the same rules.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rota.core.errors import InvalidSpec
from rota.core.mig import check_profile, profile_milli, quota_resource

MILLI = 1000
GPU, CPU, MEMORY = "gpu", "cpu", "memory"
RESOURCE_NAMES: tuple[str, ...] = (GPU, CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """The GPUs one replica asks for: ``count`` devices, each with ``share`` milli-GPU.

    ``memory_mib`` is the device memory wanted on each device; ``None`` means the whole device
    for whole GPUs and the proportional part (share x device memory) for a fraction.
    ``models`` are shell-style patterns (``*A100*``) of acceptable GPU models; empty means any.
    ``profile`` names a MIG profile (``1g.10gb``): ``count`` instances of it, whole.
    """

    count: int = 0
    share: int = MILLI
    memory_mib: int | None = None
    models: tuple[str, ...] = ()
    profile: str = ""

    def __post_init__(self) -> None:
        if self.count < 0:
            raise InvalidSpec("gpu", f"must not be negative, got {self.count}")
        if not 0 < self.share <= MILLI:
            raise InvalidSpec("gpu", f"a share must be in (0, 1], got {self.share / MILLI:g}")
        if self.share < MILLI and self.count != 1:
            raise InvalidSpec("gpu", "a fractional request is for exactly one device")
        if self.memory_mib is not None and self.memory_mib < 0:
            raise InvalidSpec("gpu_memory", f"must not be negative, got {self.memory_mib}")
        if self.profile:
            check_profile(self.profile, "gpu")
            if self.count < 1 or self.share != MILLI:
                raise InvalidSpec("gpu", f"asks for MIG profile {self.profile}: give a number "
                                         "of whole instances, such as 2x" + self.profile)
            if self.memory_mib is not None:
                raise InvalidSpec("gpu_memory", f"is set with MIG profile {self.profile}, "
                                                "whose memory the profile says; drop gpu_memory")

    @property
    def fractional(self) -> bool:
        return self.count == 1 and self.share < MILLI

    @property
    def milli(self) -> int:
        """Total milli-GPU of one replica (what quota is charged): a MIG instance counts its
        compute slices (``rota.core.mig.profile_milli``)."""
        if self.profile:
            return self.count * profile_milli(self.profile)
        return self.count * self.share


@dataclass(frozen=True, slots=True)
class ReplicaRequest:
    """What one replica of a job needs on the node that runs it."""

    cpu_milli: int = 0
    memory_mib: int = 0
    gpu: GpuRequest = GpuRequest()

    def __post_init__(self) -> None:
        if self.cpu_milli < 0:
            raise InvalidSpec("cpu", f"must not be negative, got {self.cpu_milli}m")
        if self.memory_mib < 0:
            raise InvalidSpec("memory", f"must not be negative, got {self.memory_mib}Mi")

    def vector(self) -> dict[str, int]:
        """The quota vector of one replica; with a MIG profile, its instances besides
        (``mig-1g.10gb: 2``)."""
        out = {GPU: self.gpu.milli, CPU: self.cpu_milli, MEMORY: self.memory_mib}
        if self.gpu.profile:
            out[quota_resource(self.gpu.profile)] = self.gpu.count
        return out


_MEMORY_UNITS = {
    "": 1 / (1 << 20), "k": 1000 / (1 << 20), "m": 1e6 / (1 << 20), "g": 1e9 / (1 << 20),
    "t": 1e12 / (1 << 20), "ki": 1 / 1024, "mi": 1, "gi": 1024, "ti": 1024 * 1024,
    "kb": 1000 / (1 << 20), "mb": 1e6 / (1 << 20), "gb": 1e9 / (1 << 20), "tb": 1e12 / (1 << 20),
}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def _finite(number: float, value: object, field: str) -> None:
    """Infinity and NaN (YAML's ``.inf``, ``.nan``) are no amount of anything."""
    if not math.isfinite(number):
        raise InvalidSpec(field, f"must be a finite number, got {value!r}")


def parse_memory_mib(value: object, field: str) -> int:
    """``"16Gi"``, ``"512Mi"``, ``"80GB"`` or a bare number of MiB -> MiB (rounded up)."""
    if isinstance(value, bool):
        raise InvalidSpec(field, f"expected a memory size such as 16Gi, got {value!r}")
    if isinstance(value, (int, float)):
        number, unit = float(value), "mi"
    elif isinstance(value, str) and (match := _QUANTITY.match(value)):
        number, unit = float(match.group(1)), match.group(2).lower() or ""
        if unit == "":
            unit = "mi"
    else:
        raise InvalidSpec(field, f"expected a memory size such as 16Gi, got {value!r}")
    if unit not in _MEMORY_UNITS:
        raise InvalidSpec(field, f"unknown unit {unit!r}; use Mi, Gi, Ti, MB, GB or TB")
    _finite(number, value, field)
    if number < 0:
        raise InvalidSpec(field, f"must not be negative, got {value!r}")
    return math.ceil(number * _MEMORY_UNITS[unit] - 1e-9)


def parse_cpu_milli(value: object, field: str) -> int:
    """``2``, ``0.5`` or ``"500m"`` -> milli-cores."""
    if isinstance(value, bool):
        raise InvalidSpec(field, f"expected a CPU count such as 4 or 500m, got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value) * MILLI
    elif isinstance(value, str) and (match := _QUANTITY.match(value)):
        unit = match.group(2)
        if unit not in ("", "m"):
            raise InvalidSpec(field, f"unknown unit {unit!r}; use cores (4) or milli-cores (500m)")
        number = float(match.group(1)) * (1 if unit == "m" else MILLI)
    else:
        raise InvalidSpec(field, f"expected a CPU count such as 4 or 500m, got {value!r}")
    _finite(number, value, field)
    if number < 0:
        raise InvalidSpec(field, f"must not be negative, got {value!r}")
    return math.ceil(number - 1e-9)


def parse_gpus(value: object, field: str, example: str = "1, 4 or 0.5") -> float:
    """A finite, non-negative number of GPUs (``2``, ``0.5``, ``"2.5"``), fractions allowed."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidSpec(field, f"expected a number of GPUs such as {example}, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise InvalidSpec(field, f"expected a number of GPUs such as {example}, got {value!r}") from None
    _finite(number, value, field)
    if number < 0:
        raise InvalidSpec(field, f"must not be negative, got {value!r}")
    return number


def parse_gpu(value: object, field: str) -> tuple[int, int]:
    """A GPU amount -> ``(count, share)``: ``2`` -> (2, 1000), ``0.25`` -> (1, 250), 0 -> (0, 1000)."""
    number = parse_gpus(value, field)
    if number == 0:
        return 0, MILLI
    if number < 1:
        share = round(number * MILLI)
        if share == 0:
            raise InvalidSpec(field, f"{value!r} is below the smallest share, 0.001 GPU")
        return 1, share
    if number != int(number):
        raise InvalidSpec(field, f"must be a whole number of GPUs or a fraction below 1, got {value!r}")
    return int(number), MILLI


def parse_gpu_amount(value: object, field: str) -> tuple[int, int]:
    """A job's GPUs per replica as a job file or the API gives them: ``parse_gpu`` of a number
    (``2``, ``0.5``). A string is refused, even ``"2"``: a quoted count in YAML or JSON is
    usually a template's slip, and it is caught at submit, naming the field."""
    if isinstance(value, str):
        try:
            float(value)
            hint = ": write the number without quotes"
        except ValueError:
            hint = ""
        raise InvalidSpec(field, f"expected a number of GPUs such as 2 or 0.5, got the string "
                                 f"{value!r}{hint}")
    return parse_gpu(value, field)


_PROFILE_REQUEST = re.compile(r"^\s*(?:(\d+)\s*[xX]\s*)?(\d+g\.\d+gb)\s*$")


def parse_gpu_request(value: object, field: str) -> tuple[int, int, str]:
    """A job's GPUs per replica -> ``(count, share, profile)``: a number as
    ``parse_gpu_amount`` reads it (profile ``""``), or MIG instances of one profile,
    ``"1g.10gb"`` (one) or ``"2x1g.10gb"`` (two), checked against the profiles rota knows."""
    if isinstance(value, str) and (match := _PROFILE_REQUEST.match(value)):
        count = int(match.group(1) or 1)
        if count < 1:
            raise InvalidSpec(field, f"asks for {count} MIG instances; ask for at least one, "
                                     f"or for gpu: 0")
        return count, MILLI, check_profile(match.group(2), field)
    try:
        return (*parse_gpu_amount(value, field), "")
    except InvalidSpec as exc:
        if isinstance(value, str) and "g." in value:
            raise InvalidSpec(field, f"expected a MIG profile such as 1g.10gb or 2x1g.10gb, "
                                     f"got {value!r}") from None
        raise exc from None


def parse_duration_s(value: object, field: str) -> float:
    """``3600``, ``"90s"``, ``"30m"``, ``"4h"``, ``"2d"`` or ``"1h30m"`` -> seconds."""
    if isinstance(value, bool):
        raise InvalidSpec(field, f"expected a duration such as 30m or 4h, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*(\d+(\.\d+)?[smhd]\s*)+", value):
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        seconds = sum(float(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)([smhd])", value))
    else:
        raise InvalidSpec(field, f"expected a duration such as 30m, 4h or 1h30m, got {value!r}")
    _finite(seconds, value, field)
    if seconds < 0:
        raise InvalidSpec(field, f"must not be negative, got {value!r}")
    return seconds
