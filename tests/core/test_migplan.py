"""MIG geometry plans: geometries resolved against NVIDIA's tables, a calendar's entry in
effect and next switch, and the diff a switch makes on one GPU (only what must change)."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.core.mig import table_for
from rota.core.migplan import (
    CalendarEntry, Geometry, GeometryDiff, diff, doomed, parse_geometry, parse_plan, resolve,
    target_at,
)

A100_40 = table_for("A100-40GB", 40960)
H100 = table_for("H100-80GB", 81559)
DAY = 86400


@pytest.mark.parametrize("value, table, instances", [
    ("7x1g.10gb", H100, [("1g.10gb", s) for s in range(7)]),
    (["4g.40gb", "3g.40gb"], H100, [("4g.40gb", 0), ("3g.40gb", 4)]),
    # a start given is kept free for its instance, listed first or not
    (["1g.10gb", "1g.10gb", {"profile": "4g.20gb", "start": 0}], A100_40,
     [("4g.20gb", 0), ("1g.10gb", 4), ("1g.10gb", 6)]),
    ("whole", H100, None),
], ids=["seven-small", "first-fit", "start-kept", "whole"])
def test_a_geometry_resolves_against_a_gpus_table(value, table, instances) -> None:
    geometry = parse_geometry("g", value, "mig.geometries.g")
    assert resolve(geometry, table, "field") == (None if instances is None else tuple(instances))


@pytest.mark.parametrize("value, field, message", [
    ("8x1g.10gb", "mig.geometries.g", "valid on no GPU"),
    (["1g.11gb"], "mig.geometries.g[0]", "not a MIG profile of any GPU"),
    ([{"profile": "3g.40gb", "start": 2}], "mig.geometries.g", "cannot start at memory slice 2"),
    ([{"profile": "1g.10gb", "start": -1}], "mig.geometries.g[0].start", "memory slice"),
    ([], "mig.geometries.g", "must be whole"),
], ids=["too-many", "unknown-profile", "bad-start", "negative-start", "empty"])
def test_a_bad_geometry_names_its_field(value, field, message) -> None:
    with pytest.raises(InvalidSpec, match=message) as err:
        parse_geometry("g", value, "mig.geometries.g")
    assert err.value.field == field


def test_a_profile_name_means_the_gpus_own_shape() -> None:
    """1g.10gb is one memory slice of an H100 and two of an A100-40GB: 7 fit on one, 4 on the
    other."""
    geometry = parse_geometry("g", "4x1g.10gb", "g")
    assert resolve(geometry, A100_40, "g") == (("1g.10gb", 0), ("1g.10gb", 2), ("1g.10gb", 4),
                                               ("1g.10gb", 6))
    assert resolve(geometry, H100, "g") == tuple(("1g.10gb", s) for s in range(4))
    with pytest.raises(InvalidSpec, match="no room left"):
        resolve(parse_geometry("g", "7x1g.10gb", "g"), A100_40, "g")


# -- the diff: only the instances that must change -------------------------------------------

@pytest.mark.parametrize("current, target, expected", [
    # 4g+3g -> 4g + 3x1g: the 4g at 0 stays, the 3g at 4 goes, three 1gs come
    ((("4g.40gb", 0), ("3g.40gb", 4)), (("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5),
                                        ("1g.10gb", 6)),
     GeometryDiff((("4g.40gb", 0),), (("3g.40gb", 4),),
                  (("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6)))),
    # the same profile at another start is another instance
    ((("3g.40gb", 0),), (("3g.40gb", 4),),
     GeometryDiff((), (("3g.40gb", 0),), (("3g.40gb", 4),))),
    ((("1g.10gb", 0), ("1g.10gb", 1)), (("1g.10gb", 1), ("1g.10gb", 0)),
     GeometryDiff((("1g.10gb", 0), ("1g.10gb", 1)), (), ())),
    (None, (("7g.80gb", 0),), GeometryDiff((), (), (("7g.80gb", 0),), "on")),
    ((("3g.40gb", 4),), None, GeometryDiff((), (("3g.40gb", 4),), (), "off")),
    (None, None, GeometryDiff((), (), ())),
], ids=["keeps-the-4g", "moved", "unchanged", "mig-on", "mig-off", "whole-stays"])
def test_the_diff_touches_only_what_changes(current, target, expected) -> None:
    assert diff(current, target) == expected
    same = (current is None) == (target is None) and set(current or ()) == set(target or ())
    assert expected.empty == same


def test_doomed_devices_are_the_instances_destroyed_and_whole_gpus_cut() -> None:
    diffs = {0: diff((("4g.40gb", 0), ("3g.40gb", 4)), (("4g.40gb", 0), ("1g.10gb", 4))),
             1: diff(None, (("7g.80gb", 0),)),
             2: diff((("7g.80gb", 0),), (("7g.80gb", 0),))}
    assert doomed(diffs) == {1004, 1}  # GPU 0's 3g at 4 and whole GPU 1; nothing of GPU 2


# -- the calendar ----------------------------------------------------------------------------

PLAN = {
    "geometries": {"day": "7x1g.10gb", "night": "whole", "half": ["4g.40gb", "3g.40gb"]},
    "calendar": [
        {"at": "08:00", "zone": "Europe/Paris", "nodes": ["gpu-[a-d]"], "geometry": "day"},
        {"at": "20:00", "zone": "Europe/Paris", "nodes": "gpu-*", "geometry": "night"},
        {"at": "12:30", "zone": "UTC", "nodes": ["gpu-e"], "geometry": "half"},
    ],
}


def utc_times(entry: CalendarEntry, now: float) -> tuple[float, float]:
    """Occurrences as if every zone were UTC (the zone database is the control plane's)."""
    last = now - (now - entry.at) % DAY
    return last, last + DAY


def test_the_entry_in_effect_is_the_latest_occurred_and_the_next_switch_the_nearest() -> None:
    plan = parse_plan(PLAN)
    morning = 10 * 3600.0                              # 10:00 of day 0
    t = target_at(plan, "gpu-b", DAY + morning, utc_times)
    assert (t.entry.geometry, t.since) == ("day", DAY + 8 * 3600)
    assert (t.next_entry.geometry, t.next_at) == ("night", DAY + 20 * 3600)
    t = target_at(plan, "gpu-b", DAY + 21 * 3600, utc_times)
    assert (t.entry.geometry, t.next_entry.geometry, t.next_at) == (
        "night", "day", 2 * DAY + 8 * 3600)
    t = target_at(plan, "gpu-x", DAY + morning, utc_times)    # only the night entry selects it
    assert (t.entry.geometry, t.next_entry) == ("night", None)
    assert target_at(plan, "cpu-1", DAY, utc_times).entry is None


@pytest.mark.parametrize("change, field, message", [
    ({"calendar": [{"at": "25:00", "geometry": "day"}]}, "mig.calendar[0].at", "HH:MM"),
    ({"calendar": [{"at": "08:00", "geometry": "dusk"}]}, "mig.calendar[0].geometry",
     "not a declared geometry"),
    ({"calendar": [{"at": "08:00", "geometry": "day", "node": "a"}]}, "mig.calendar[0].node",
     "unknown key"),
    ({"calendar": [{"at": "08:00", "geometry": "day", "nodes": []}]}, "mig.calendar[0].nodes",
     "node name or pattern"),
    ({"evict": "yes"}, "mig.evict", "true or false"),
    ({"geometry": {}}, "mig.geometry", "unknown key"),
], ids=["bad-time", "unknown-geometry", "unknown-key", "no-nodes", "evict", "top-key"])
def test_a_bad_plan_names_its_field(change, field, message) -> None:
    with pytest.raises(InvalidSpec, match=message) as err:
        parse_plan({**PLAN, **change})
    assert err.value.field == field


def test_a_plan_keeps_evict_and_the_geometries() -> None:
    plan = parse_plan({**PLAN, "evict": True})
    assert plan.evict
    assert plan.geometries["night"] == Geometry("night", True)
    assert plan.calendar[0] == CalendarEntry(8 * 3600, "Europe/Paris", ("gpu-[a-d]",), "day")
