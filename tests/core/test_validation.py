"""Validation of requests, jobs, nodes, quotas and projects: impossible values are refused
with ``InvalidSpec`` naming the field and the reason."""

from __future__ import annotations

from typing import Callable

import pytest

from rota.core import (
    DeviceShare, FlavorQuota, GpuDevice, GpuRequest, InvalidSpec, Job, JobState, Node, Placement,
    Project, ReplicaPlacement, ReplicaRequest, model_matches,
)

GiB = 1024


def _job(**kw) -> Job:
    return Job(**{"id": "j", "project": "p", "queue": "q", "request": ReplicaRequest(), **kw})


def _one_gpu_placement(replicas: int = 1) -> Placement:
    return Placement(tuple(ReplicaPlacement("n1", (DeviceShare(k, 1000, 80 * GiB),))
                           for k in range(replicas)))


INVALID: list[tuple[str, Callable[[], object], str, str]] = [
    # (case, constructor, field, reason fragment)
    ("gpu count negative", lambda: GpuRequest(count=-1), "gpu", "negative"),
    ("share zero", lambda: GpuRequest(count=1, share=0), "gpu", "in (0, 1]"),
    ("share above one GPU", lambda: GpuRequest(count=1, share=1001), "gpu", "in (0, 1]"),
    ("fraction of two devices", lambda: GpuRequest(count=2, share=500), "gpu", "exactly one device"),
    ("fraction of no device", lambda: GpuRequest(count=0, share=500), "gpu", "exactly one device"),
    ("gpu memory negative", lambda: GpuRequest(1, memory_mib=-1), "gpu_memory", "negative"),
    ("cpu negative", lambda: ReplicaRequest(cpu_milli=-1), "cpu", "negative"),
    ("memory negative", lambda: ReplicaRequest(memory_mib=-1), "memory", "negative"),
    ("empty job id", lambda: _job(id=""), "id", "empty"),
    ("no replicas", lambda: _job(replicas=0), "replicas", "at least 1"),
    ("walltime zero", lambda: _job(walltime_s=0), "walltime", "positive"),
    ("grace negative", lambda: _job(grace_s=-1), "checkpoint.grace", "negative"),
    ("running without placement", lambda: _job(state=JobState.RUNNING), "placement",
     "must have a placement"),
    ("placement of 1 replica for a gang of 2", lambda: _job(
        replicas=2, state=JobState.RUNNING, placement=_one_gpu_placement(1)),
     "placement", "has 1 replicas, job has 2"),
    ("device index negative", lambda: GpuDevice(-1, "H100", 80 * GiB), "index", "negative"),
    ("device memory zero", lambda: GpuDevice(0, "H100", 0), "memory", "positive"),
    ("device model empty", lambda: GpuDevice(0, "", 80 * GiB), "model", "empty"),
    ("node cpu negative", lambda: Node("n", -1, 1), "cpu", "negative"),
    ("node memory negative", lambda: Node("n", 1, -1), "memory", "negative"),
    ("device indices repeat", lambda: Node("n", 1, 1, (GpuDevice(0, "H100", 1), GpuDevice(0, "H100", 1))),
     "gpus", "repeat"),
    ("devices out of order", lambda: Node("n", 1, 1, (GpuDevice(1, "H100", 1), GpuDevice(0, "H100", 1))),
     "gpus", "index order"),
    ("nominal negative", lambda: FlavorQuota({"gpu": -1000}), "nominal.gpu", "negative"),
    ("borrowing limit negative", lambda: FlavorQuota({"gpu": 1000}, {"gpu": -1}),
     "borrowing_limit.gpu", "negative"),
    ("lending above nominal", lambda: FlavorQuota({"gpu": 1000}, {}, {"gpu": 2000}),
     "lending_limit.gpu", "exceeds the nominal quota 1000"),
    ("lending without nominal", lambda: FlavorQuota({}, {}, {"cpu": 1}),
     "lending_limit.cpu", "exceeds the nominal quota 0"),
    ("project weight zero", lambda: Project("p", 0), "weight", "positive"),
    ("project weight NaN", lambda: Project("p", float("nan")), "weight", "positive"),
]


@pytest.mark.parametrize("make,field,why", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_values_are_refused_with_the_field_named(make, field, why):
    with pytest.raises(InvalidSpec) as err:
        make()
    assert err.value.field == field
    assert why in err.value.reason
    assert str(err.value).startswith(f"{field}: ")
    assert err.value.code == "invalid_spec"


VALID: list[tuple[str, Callable[[], object]]] = [
    ("no GPU", lambda: GpuRequest()),
    ("two whole GPUs", lambda: GpuRequest(2)),
    ("a quarter GPU", lambda: GpuRequest(1, 250)),
    ("a fraction with explicit memory", lambda: GpuRequest(1, 100, 10 * GiB, ("*A100*",))),
    ("a gang of two running", lambda: _job(replicas=2, state=JobState.RUNNING,
                                            placement=_one_gpu_placement(2))),
    ("lending all of nominal", lambda: FlavorQuota({"gpu": 1000}, {}, {"gpu": 1000})),
    ("node without GPUs", lambda: Node("n", 1000, 1024)),
]


@pytest.mark.parametrize("make", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_values_are_accepted(make):
    make()


@pytest.mark.parametrize("request_,milli,fractional", [
    (GpuRequest(), 0, False),
    (GpuRequest(4), 4000, False),       # 4 x 1000
    (GpuRequest(1, 250), 250, True),    # 1 x 250
    (GpuRequest(1), 1000, False),
], ids=["none", "four", "quarter", "one"])
def test_gpu_request_is_charged_in_milli_gpu(request_, milli, fractional):
    assert request_.milli == milli and request_.fractional is fractional


def test_a_gang_is_charged_replicas_times_one_replica():
    # 3 replicas x (2 GPUs, 8 cores, 64 GiB) = 6000 milli-GPU, 24000 milli-cores, 196608 MiB
    j = _job(replicas=3, request=ReplicaRequest(8000, 64 * GiB, GpuRequest(2)))
    assert j.total() == {"gpu": 6000, "cpu": 24000, "memory": 3 * 64 * GiB}


@pytest.mark.parametrize("model,patterns,matches", [
    ("NVIDIA-A100-SXM4-80GB", ("*A100*",), True),
    ("NVIDIA-A100-SXM4-80GB", ("*a100*",), True),          # case-insensitive
    ("NVIDIA-H100-80GB", ("*A100*",), False),
    ("NVIDIA-H100-80GB", ("*A100*", "*H100*"), True),      # any pattern may match
    ("NVIDIA-H100-80GB", (), True),                        # no pattern: any model
    ("NVIDIA-H100-80GB", ("H100",), False),                # a pattern is whole-name, not substring
], ids=["a100", "lowercase", "h100-vs-a100", "either", "any", "whole-name"])
def test_gpu_model_patterns(model, patterns, matches):
    assert model_matches(model, patterns) is matches
