"""When a MIG calendar's entries occur (``rota.core.migplan``): the time zone database read
here, outside the pure core.

``zoned_times(entry, now)`` is an entry's last occurrence at or before ``now`` and its next one
after, in seconds since the epoch: the entry's time of day on the local calendar of its time
zone, so that ``08:00 Europe/Paris`` is 07:00 UTC in winter and 06:00 UTC in summer. A time of
day a daylight-saving change skips (02:30 on the spring night) occurs at the same offset from
midnight as before the change, as ``zoneinfo`` resolves it (``fold`` 0). ``check_zones`` refuses
a plan whose zone the database does not know, naming the field; ``load_plan`` reads a plan
file (YAML: ``geometries``, ``calendar``, ``evict``) and checks it whole.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rota.core import InvalidSpec
from rota.core.migplan import CalendarEntry, MigPlan, parse_plan


def load_plan(path: str | Path) -> MigPlan:
    """The plan of a YAML file; ``InvalidSpec`` naming the field (``mig.calendar[0].at``)."""
    import yaml  # noqa: PLC0415 - only plan files need it

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InvalidSpec("mig", f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InvalidSpec("mig", f"{path} is not valid YAML: {exc}") from None
    plan = parse_plan(data)
    check_zones(plan)
    return plan


def check_zones(plan: MigPlan, field: str = "mig") -> None:
    for k, entry in enumerate(plan.calendar):
        try:
            ZoneInfo(entry.zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidSpec(f"{field}.calendar[{k}].zone",
                              f"{entry.zone!r} is not a time zone this machine knows "
                              "(IANA names such as Europe/Paris, UTC)") from None


def zoned_times(entry: CalendarEntry, now: float) -> tuple[float, float]:
    zone = ZoneInfo(entry.zone)
    local = datetime.fromtimestamp(now, zone)
    hours, minutes = divmod(entry.at // 60, 60)

    def on(day: datetime) -> float:
        return day.replace(hour=hours, minute=minutes, second=0, microsecond=0).timestamp()

    today = on(local)
    if today <= now:
        return today, on(local + timedelta(days=1))
    return on(local - timedelta(days=1)), today
