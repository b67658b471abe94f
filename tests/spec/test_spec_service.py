"""The ``service`` section of a job file of kind service: what it accepts, and errors that name
the field."""

import pytest

from rota.core import InvalidSpec
from rota.spec import JobFileSpec, parse_job


def service_file(**changes):
    body = {"name": "tiny", "kind": "service", "entrypoint": "python serve.py",
            "resources": {"gpu": 1},
            "service": {"models": ["tiny"], "replicas": {"min": 0, "max": 2}, "target": 4,
                        "idle": "2m", "timeout": "30s"}}
    body.update(changes)
    return body


def test_a_service_file_gives_its_settings():
    spec = parse_job(service_file(), model=JobFileSpec)
    s = spec.service.settings()
    assert (s.models, s.min_replicas, s.max_replicas, s.target, s.idle_s, s.timeout_s,
            s.readiness, s.port) == (("tiny",), 0, 2, 4, 120.0, 30.0, "/health", None)
    assert (s.headroom, s.load_s) == (0, 900.0)
    again = parse_job(service_file(service={"models": ["m"], "replicas": {"max": 3},
                                            "headroom": 1, "load": "10m"}), model=JobFileSpec)
    assert (again.service.settings().headroom, again.service.settings().load_s) == (1, 600.0)


@pytest.mark.parametrize("changes, field, words", [
    ({"kind": "batch"}, "kind", "must be service"),
    ({"replicas": {"min": 0, "max": 2}}, "replicas", "service.replicas"),
    ({"replicas": 2}, "replicas", "gang size"),
    ({"array": "0-3"}, "array", "on demand"),
    ({"service": {"models": []}}, "service.models", "at least 1"),
    ({"service": {"models": ["a b"]}}, "service.models.0", "not a model name"),
    ({"service": {"models": ["a", "a"]}}, "service.models", "twice"),
    ({"service": {"models": ["a"], "replicas": {"min": 3, "max": 2}}},
     "service.replicas.min", "more than max"),
    ({"service": {"models": ["a"], "readiness": "health"}}, "service.readiness", "absolute"),
    ({"service": {"models": ["a"], "port": 70000}}, "service.port", "65535"),
    ({"service": {"models": ["a"], "idle": "0s"}}, "service.idle", "longer than zero"),
    ({"service": {"models": ["a"], "colour": "red"}}, "service.colour", "unknown key"),
    ({"service": {"models": ["a"], "replicas": {"max": 2}, "headroom": 3}},
     "service.headroom", "more than replicas.max"),
    ({"service": {"models": ["a"], "headroom": -1}}, "service.headroom", "greater than"),
    ({"service": {"models": ["a"], "load": "0s"}}, "service.load", "longer than zero"),
])
def test_a_bad_service_section_names_the_field(changes, field, words):
    with pytest.raises(InvalidSpec) as raised:
        parse_job(service_file(**changes), model=JobFileSpec)
    errors = getattr(raised.value, "errors", None) or [raised.value]
    assert any(e.field == field and words in e.reason for e in errors), \
        [(e.field, e.reason) for e in errors]
