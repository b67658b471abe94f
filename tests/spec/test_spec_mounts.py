"""A job's volume claims and /dev/shm size (``volumes:``, ``shm:``): kept from the job file (or
a raw ``run`` body) through the stored launch spec, and every mistake refused naming its
field."""

from __future__ import annotations

import pytest

from rota.api.submit import check_run, run_of
from rota.core import InvalidSpec
from rota.core.mounts import Volume
from rota.core.runspec import read_run
from rota.spec import JobSpec, parse_job

BASE = {"name": "train", "project": "p", "queue": "q", "entrypoint": "python train.py"}


def test_volumes_and_shm_reach_the_stored_launch_spec():
    spec = JobSpec.model_validate({**BASE, "shm": "8Gi", "volumes": [
        {"claim": "datasets", "path": "/data/", "read_only": True},
        {"claim": "ckpt.team-a", "path": "/ckpt"}]})
    run = run_of(spec, None)
    assert run["volumes"] == [{"claim": "datasets", "path": "/data", "read_only": True},
                              {"claim": "ckpt.team-a", "path": "/ckpt", "read_only": False}]
    assert run["shm_mib"] == 8 * 1024
    stored = check_run(run, lambda upload: True)
    launch = read_run(stored)
    assert launch.volumes == (Volume("datasets", "/data", True), Volume("ckpt.team-a", "/ckpt"))
    assert launch.shm_mib == 8192
    assert read_run(launch.stored()) == launch
    plain = run_of(JobSpec.model_validate(BASE), None)
    assert "volumes" not in plain and "shm_mib" not in plain
    assert read_run(check_run(plain, lambda upload: True)).volumes == ()


@pytest.mark.parametrize("more, field, words", [
    ({"volumes": [{"claim": "Data_1", "path": "/d"}]}, "volumes[0].claim",
     "not a volume claim's name"),
    ({"volumes": [{"claim": "d", "path": "data"}]}, "volumes[0].path", "absolute path"),
    ({"volumes": [{"claim": "d", "path": "/"}]}, "volumes[0].path", "other than /"),
    ({"volumes": [{"claim": "d", "path": "/a/../etc"}]}, "volumes[0].path", "'..'"),
    ({"volumes": [{"claim": "d", "path": "/d"}, {"claim": "e", "path": "/d/"}]},
     "volumes[1].path", "mounted twice"),
    ({"volumes": [{"claim": "d", "path": "/dev/shm"}], "shm": "1Gi"}, "volumes[0].path",
     "shm sizes already"),
    ({"volumes": [{"claim": "d", "path": "/d", "read_only": "yes"}]}, "volumes[0].read_only",
     "boolean"),
    ({"volumes": [{"claim": "d", "path": "/d", "size": "1Gi"}]}, "volumes[0].size", "unknown"),
    ({"shm": 0}, "shm", "more than 0"),
    ({"shm": "lots"}, "shm", "memory size"),
], ids=["claim", "relative", "root", "dotdot", "twice", "shm-twice", "read-only", "unknown",
        "shm-zero", "shm-text"])
def test_a_mistake_in_the_job_file_is_refused_naming_its_field(more, field, words):
    with pytest.raises(InvalidSpec) as refused:
        parse_job({**BASE, **more})
    assert refused.value.field == field and words in refused.value.reason


@pytest.mark.parametrize("more, field", [
    ({"volumes": [{"claim": "x_y", "path": "/d"}]}, "volumes[0].claim"),
    ({"volumes": [{"claim": "x", "path": "/d"}, {"claim": "y", "path": "/d"}]},
     "volumes[1].path"),
    ({"shm_mib": 0}, "shm_mib"),
])
def test_a_mistake_in_a_raw_run_is_refused_naming_its_field(more, field):
    with pytest.raises(InvalidSpec) as refused:
        check_run({"command": ["true"], **more}, lambda upload: True)
    assert refused.value.field.removeprefix("run.") == field
