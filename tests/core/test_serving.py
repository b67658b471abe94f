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


@pytest.mark.parametrize("window, headroom, want", [
    ((0, 1), 1, 2),                     # the need rose 0 -> 1 replica: 1 + 1
    ((0, 5), 2, 4),                     # 0 -> 2: 2 + 2
    ((0, 5, 3), 1, 3),                  # rose earlier in the window: peak 2 + 1
    ((5, 5, 5), 1, 2),                  # steady: no headroom, only the peak's 2
    ((9, 5, 1), 1, 3),                  # falling: no headroom
    ((4, 3), 1, 1),                     # 4 -> 3 is the same need (1 replica): not a rise
    ((0, 13), 1, 4),                    # 0 -> 4 replicas, capped at max 4
    ((0, 5), 0, 2),                     # no headroom asked: the peak's 2
], ids=["first-request", "two", "rose-earlier", "steady", "falling", "same-need", "at-max",
        "none"])
def test_headroom_only_while_the_need_rises(window, headroom, want):
    assert desired_replicas(settings(headroom=headroom), window) == want


@pytest.mark.parametrize("changes, field", [
    ({"models": ()}, "service.models"),
    ({"min_replicas": 3, "max_replicas": 2}, "service.replicas"),
    ({"max_replicas": 0}, "service.replicas.max"),
    ({"target": 0}, "service.target"),
    ({"headroom": -1}, "service.headroom"),
    ({"headroom": 5}, "service.headroom"),              # above max 4
    ({"load_s": 0.0}, "service.load"),
])
def test_impossible_settings_name_their_field(changes, field):
    with pytest.raises(InvalidSpec) as raised:
        settings(**changes)
    assert raised.value.field == field


def test_settings_round_trip_through_json():
    s = settings(port=8000, readiness="/ready", idle_s=30.0, queue=5, timeout_s=10.0,
                 headroom=1, load_s=60.0)
    assert ServiceSettings.from_json(s.to_json()) == s
