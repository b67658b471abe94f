"""How many replicas a service should have, from the concurrency it saw in its idle window."""

import pytest

from rota.core import InvalidSpec
from rota.core.serving import ServiceSettings, desired_replicas


def settings(**changes) -> ServiceSettings:
    base = dict(models=("m",), min_replicas=0, max_replicas=4, target=4)
    base.update(changes)
    return ServiceSettings(**base)


@pytest.mark.parametrize("window, changes, want", [
    ((), {}, 0),                        # no sample yet: min
    ((0, 0, 0), {}, 0),                 # idle for the whole window: min (zero)
    ((0, 0, 0), {"min_replicas": 1}, 1),
    ((1,), {}, 1),                      # one waiting request: a cold start, ceil(1 / 4) = 1
    ((4,), {}, 1),                      # exactly the target of one replica
    ((5,), {}, 2),                      # ceil(5 / 4) = 2
    ((9, 0, 3), {}, 3),                 # the peak of the window counts: ceil(9 / 4) = 3
    ((64,), {}, 4),                     # ceil(64 / 4) = 16, capped at max 4
    ((64,), {"target": 100}, 1),
], ids=["empty", "idle", "idle-min-1", "cold", "at-target", "above-target", "peak",
        "capped", "big-target"])
def test_desired_replicas(window, changes, want):
    assert desired_replicas(settings(**changes), window) == want


@pytest.mark.parametrize("changes, field", [
    ({"models": ()}, "service.models"),
    ({"min_replicas": 3, "max_replicas": 2}, "service.replicas"),
    ({"max_replicas": 0}, "service.replicas.max"),
    ({"target": 0}, "service.target"),
])
def test_impossible_settings_name_their_field(changes, field):
    with pytest.raises(InvalidSpec) as raised:
        settings(**changes)
    assert raised.value.field == field


def test_settings_round_trip_through_json():
    s = settings(port=8000, readiness="/ready", idle_s=30.0, queue=5, timeout_s=10.0)
    assert ServiceSettings.from_json(s.to_json()) == s
