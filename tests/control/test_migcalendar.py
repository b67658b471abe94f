"""A MIG calendar's times of day are local to their time zone, daylight saving included."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from rota.control.migcalendar import check_zones, zoned_times
from rota.core import InvalidSpec
from rota.core.migplan import CalendarEntry, parse_plan


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("now, last, following", [
    # winter: Paris is UTC+1, 08:00 there is 07:00 UTC
    ("2026-01-15T10:00", "2026-01-15T07:00", "2026-01-16T07:00"),
    ("2026-01-15T06:59", "2026-01-14T07:00", "2026-01-15T07:00"),
    # summer: UTC+2, 06:00 UTC
    ("2026-07-15T06:00", "2026-07-15T06:00", "2026-07-16T06:00"),
    # the spring change (29 March 2026, 02:00 -> 03:00): the 28th's 08:00 was UTC+1, the 29th's
    # is UTC+2, 23 hours later
    ("2026-03-28T12:00", "2026-03-28T07:00", "2026-03-29T06:00"),
], ids=["winter", "before-today's", "summer", "spring-change"])
def test_an_entry_occurs_at_its_local_time_of_day(now, last, following) -> None:
    entry = CalendarEntry(8 * 3600, "Europe/Paris", ("*",), "day")
    assert zoned_times(entry, utc(now)) == (utc(last), utc(following))


def test_an_unknown_zone_names_its_field() -> None:
    plan = parse_plan({"geometries": {"night": "whole"},
                       "calendar": [{"at": "20:00", "zone": "Europe/Pariss",
                                     "geometry": "night"}]})
    with pytest.raises(InvalidSpec, match="not a time zone") as err:
        check_zones(plan)
    assert err.value.field == "mig.calendar[0].zone"
