"""MIG in the file formats: a job's ``gpu: 1g.10gb`` or ``gpu: 2x1g.10gb``, and queue quotas
counting a profile's instances (``mig-1g.10gb: 14``); every mistake names its field."""

from __future__ import annotations

import pytest
from specdata import base_cluster, setin

from rota.core import GpuRequest, InvalidSpec
from rota.spec import build_cluster, parse_job, parse_yaml, to_job

JOB = "name: infer\nproject: p\nqueue: q\n"


@pytest.mark.parametrize("gpu, request_", [
    ("1g.10gb", GpuRequest(1, 1000, None, (), "1g.10gb")),
    ("2x1g.10gb", GpuRequest(2, 1000, None, (), "1g.10gb")),
    ("3g.40gb", GpuRequest(1, 1000, None, (), "3g.40gb")),
    ("0.5", GpuRequest(1, 500)),
])
def test_a_job_asks_for_mig_instances(gpu: str, request_: GpuRequest) -> None:
    job = to_job(parse_job(parse_yaml(f"{JOB}resources: {{gpu: {gpu}}}\n")), 0)
    assert job.request.gpu == request_


def test_model_patterns_go_with_a_profile() -> None:
    job = to_job(parse_job(parse_yaml(
        f"{JOB}resources: {{gpu: 1g.10gb, gpu_model: ['*H100*']}}\n")), 0)
    assert job.request.gpu == GpuRequest(1, 1000, None, ("*H100*",), "1g.10gb")
    assert dict(job.total()) == {"gpu": 143, "cpu": 1000, "memory": 1024, "mig-1g.10gb": 1}


@pytest.mark.parametrize("resources, field, words", [
    ("{gpu: 1g.11gb}", "resources.gpu", "not a MIG profile of any GPU rota knows"),
    ("{gpu: 1g.10gb+me}", "resources.gpu", "expected a MIG profile such as 1g.10gb"),
    ("{gpu: 0x1g.10gb}", "resources.gpu", "at least one"),
    ("{gpu: 1g.10gb, gpu_memory: 5Gi}", "resources.gpu_memory", "drop gpu_memory"),
], ids=["unknown", "media-extension", "zero", "gpu-memory"])
def test_a_bad_profile_request_names_its_field(resources: str, field: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        parse_job(parse_yaml(f"{JOB}resources: {resources}\n"))
    assert err.value.field == field
    assert words in err.value.reason


def test_a_quota_counts_instances_of_a_profile() -> None:
    data = setin(base_cluster(), "queues.0.quota.h100",
                 {"nominal": {"gpu": 8, "mig-1g.10gb": 14, "mig-3g.40gb": 2},
                  "borrowing_limit": {"mig-1g.10gb": 7},
                  "lending_limit": {"mig-1g.10gb": 4}})
    quota = build_cluster(data).snapshot.queues["research"].quotas["h100"]
    assert quota.nominal == {"gpu": 8000, "mig-1g.10gb": 14, "mig-3g.40gb": 2}
    assert quota.borrowing_limit == {"mig-1g.10gb": 7}
    assert quota.lending_limit == {"mig-1g.10gb": 4}


@pytest.mark.parametrize("path, value, field, words", [
    ("queues.0.quota.h100.nominal", {"mig-1g.11gb": 1},
     "queues[0].quota.h100.nominal.mig-1g.11gb", "not a MIG profile"),
    ("queues.0.quota.h100.nominal", {"mig-1g.10gb": 1.5},
     "queues[0].quota.h100.nominal.mig-1g.10gb", "whole number of MIG instances"),
    ("queues.0.quota.h100.nominal", {"mig-1g.10gb": -1},
     "queues[0].quota.h100.nominal.mig-1g.10gb", "whole number of MIG instances"),
    ("queues.0.quota.h100.nominal", {"mig": {"1g.10gb": 1}},
     "queues[0].quota.h100.nominal.mig", "written mig-<profile>"),
    ("queues.1.quota.h100", {"nominal": {"mig-1g.10gb": 2}, "lending_limit": {"mig-1g.10gb": 3}},
     "queues[1].quota.h100.lending_limit.mig-1g.10gb", "above the nominal quota 2 1g.10gb"),
    ("queues.1.quota.h100", {"nominal": {"gpu": 2}, "borrowing_limit": {"mig-1g.10gb": 3}},
     "queues[1].quota.h100.borrowing_limit.mig-1g.10gb", "no nominal mig-1g.10gb quota"),
], ids=["unknown-profile", "fraction", "negative", "mig-key", "lending-above", "borrow-alone"])
def test_a_bad_mig_quota_names_its_field(path, value, field: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        build_cluster(setin(base_cluster(), path, value))
    assert err.value.field == field
    assert words in err.value.reason
