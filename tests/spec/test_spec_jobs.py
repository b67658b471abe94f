"""Job specs and the jobs file: round trips into pending core Jobs, and every rule names its
field. The single-job file (``parse_job``) is the same model."""

from __future__ import annotations

import pytest
from specdata import base_cluster, base_job, running, setin

from rota.core import GpuRequest, InvalidSpec, JobKind, JobState
from rota.spec import (
    JobSpec, build_cluster, build_jobs, load_cluster, load_jobs, parse_job, parse_yaml, to_job,
)

GIB = 1024


def jobs_of(*jobs, cluster=None):
    return build_jobs(build_cluster(cluster or base_cluster()), {"jobs": list(jobs)})


def test_round_trip_every_key():
    spec = base_job(
        "train", user="ana", priority=7, kind="interactive", entrypoint=["python", "t.py"],
        workdir="/w", env={"SEED": 1, "DEBUG": True}, replicas=2,
        resources={"cpu": "500m", "memory": "2Gi", "gpu": 1, "gpu_memory": "40Gi",
                   "gpu_model": ["*H100*", "*A100*"]},
        walltime="1h30m", checkpoint={"dir": "/ckpt", "signal": "usr1", "grace": "2m"},
        restart={"max_retries": 3}, idle={"gpu_util_below": 5, "for": "30m", "max_lifetime": "1d"},
        preemptible=False, resource_group="default", selector={"zone": "a"}, submit_time=5)
    (job,) = jobs_of(spec)
    assert job.id == "train" and job.user == "ana" and job.priority == 7
    assert job.kind is JobKind.INTERACTIVE and job.replicas == 2
    assert job.request.cpu_milli == 500 and job.request.memory_mib == 2 * GIB
    assert job.request.gpu == GpuRequest(1, 1000, 40 * GIB, ("*H100*", "*A100*"))
    assert job.walltime_s == 5400 and job.grace_s == 120
    assert job.preemptible is False and job.resource_group == "default"
    assert job.selector == (("zone", "a"),) and job.submit_time == 5
    assert job.state is JobState.PENDING and job.placement is None
    parsed = JobSpec.model_validate(spec)
    assert parsed.env == {"SEED": "1", "DEBUG": "true"}
    assert parsed.checkpoint.signal == "SIGUSR1" and parsed.restart.max_retries == 3
    assert parsed.idle.for_ == 1800 and parsed.idle.max_lifetime == 86400


def test_a_disk_limit_is_kept_for_the_backend_and_not_scheduled():
    from rota.api.submit import run_of
    plain = base_job(entrypoint="true")
    spec = JobSpec.model_validate({**plain, "resources": {**plain["resources"], "disk": "20Gi"}})
    assert run_of(spec, None)["disk_mib"] == 20 * GIB
    assert "disk_mib" not in run_of(JobSpec.model_validate(plain), None)
    assert to_job(spec, 0).request == to_job(JobSpec.model_validate(plain), 0).request


def test_defaults():
    (job,) = jobs_of({"name": "j", "project": "llm", "queue": "product"})
    assert job.request.cpu_milli == 1000 and job.request.memory_mib == 1024
    assert job.request.gpu.count == 0 and job.walltime_s is None
    assert job.kind is JobKind.BATCH and job.priority == 0 and job.preemptible
    assert job.grace_s == 30


@pytest.mark.parametrize("gpu,count,share", [
    (0, 0, 1000), (1, 1, 1000), (8, 8, 1000), (0.5, 1, 500), (0.25, 1, 250), (2.0, 2, 1000),
], ids=["none", "one", "eight", "half", "quarter", "two as float"])
def test_gpu_amounts(gpu, count, share):
    (job,) = jobs_of(base_job(resources={"gpu": gpu}))
    assert (job.request.gpu.count, job.request.gpu.share) == (count, share)


def test_file_order_is_submission_order():
    cluster = setin(base_cluster(), "now", 100)
    jobs = jobs_of(base_job("b"), base_job("a"), base_job("c", submit_time=1), cluster=cluster)
    times = [j.submit_time for j in jobs]
    assert times[0] < times[1] < 100                   # just before now, in file order
    assert times[2] == 1                               # an explicit time wins


CASES = [
    # (id, job, field, words in the reason)
    ("fraction above one", base_job(resources={"gpu": 1.5}), "jobs[0].resources.gpu",
     "whole number of GPUs or a fraction below 1"),
    ("negative gpu", base_job(resources={"gpu": -1}), "jobs[0].resources.gpu", "negative"),
    ("gpu not a number", base_job(resources={"gpu": "two"}), "jobs[0].resources.gpu", "number of GPUs"),
    ("gpu true", base_job(resources={"gpu": True}), "jobs[0].resources.gpu", "number of GPUs"),
    ("gpu count quoted", base_job(resources={"gpu": "2"}), "jobs[0].resources.gpu",
     "got the string '2': write the number without quotes"),
    ("gpu share quoted", base_job(resources={"gpu": "0.25"}), "jobs[0].resources.gpu",
     "without quotes"),
    ("negative memory", base_job(resources={"memory": "-4Gi"}), "jobs[0].resources.memory", "negative"),
    ("cpu unit", base_job(resources={"cpu": "4 cores"}), "jobs[0].resources.cpu", "unknown unit 'cores'"),
    ("gpu_memory without gpu", base_job(resources={"gpu_memory": "8Gi"}),
     "jobs[0].resources.gpu_memory", "gpu is 0"),
    ("empty model list", base_job(resources={"gpu": 1, "gpu_model": []}),
     "jobs[0].resources.gpu_model", "pattern"),
    ("unknown resource", base_job(resources={"tpu": 1}), "jobs[0].resources.tpu", "unknown key"),
    ("unknown key", base_job(gpus=2), "jobs[0].gpus", "expected one of: name, project"),
    ("missing queue", {"name": "x", "project": "vision"}, "jobs[0].queue", "required"),
    ("bad name", base_job("Train Job"), "jobs[0].name", "letters, digits"),
    ("kind", base_job(kind="notebook"), "jobs[0].kind", "'batch', 'interactive' or 'service'"),
    ("replicas zero", base_job(replicas=0), "jobs[0].replicas", "greater than or equal to 1"),
    ("priority text", base_job(priority="high"), "jobs[0].priority", "integer"),
    ("walltime zero", base_job(walltime=0), "jobs[0].walltime", "longer than zero"),
    ("walltime text", base_job(walltime="soon"), "jobs[0].walltime", "duration"),
    ("grace negative", base_job(checkpoint={"grace": -5}), "jobs[0].checkpoint.grace", "negative"),
    ("signal", base_job(checkpoint={"signal": "SIGFOO"}), "jobs[0].checkpoint.signal", "signal name"),
    ("retries", base_job(restart={"max_retries": -1}), "jobs[0].restart.max_retries", "greater than"),
    ("idle util", base_job(idle={"gpu_util_below": 150, "for": "1h"}),
     "jobs[0].idle.gpu_util_below", "less than or equal to 100"),
    ("idle pair", base_job(idle={"gpu_util_below": 5}), "jobs[0].idle.for", "go together"),
    ("env name", base_job(env={"1X": "a"}), "jobs[0].env.1X", "variable name"),
    ("env value", base_job(env={"X": [1]}), "jobs[0].env.X", "string, number or boolean"),
    ("entrypoint empty", base_job(entrypoint=" "), "jobs[0].entrypoint", "empty"),
    ("preemptible", base_job(preemptible="maybe"), "jobs[0].preemptible", "boolean"),
    ("image upper case", base_job(image="PyTorch:2"), "jobs[0].image", "container image"),
    ("image with a space", base_job(image="pytorch 2"), "jobs[0].image", "container image"),
    ("image not text", base_job(image=2), "jobs[0].image", "container image"),
    ("unknown queue", base_job(queue="nope"), "jobs[0].queue", "queues: research, product"),
    ("unknown project", base_job(project="nope"), "jobs[0].project", "projects: vision, llm"),
    ("unknown resource group", base_job(resource_group="east"), "jobs[0].resource_group",
     "groups: default"),
    ("model matches nothing", base_job(resources={"gpu": 1, "gpu_model": "*H200*"}),
     "jobs[0].resources.gpu_model", "models present: H100-80GB, L4"),
    ("disk zero", base_job(resources={"disk": 0}), "jobs[0].resources.disk", "more than 0"),
    ("disk text", base_job(resources={"disk": "lots"}), "jobs[0].resources.disk", "memory size"),
]


@pytest.mark.parametrize("job,field,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_job_errors_name_the_field(job, field, words):
    with pytest.raises(InvalidSpec) as err:
        jobs_of(job)
    assert err.value.field == field
    assert words in err.value.reason


def test_errors_point_at_the_right_index():
    with pytest.raises(InvalidSpec) as err:
        jobs_of(base_job("a"), base_job("b"), base_job("c", resources={"gpu": 1.5}))
    assert err.value.field == "jobs[2].resources.gpu"


def test_duplicate_names():
    with pytest.raises(InvalidSpec) as err:
        jobs_of(base_job("a"), base_job("a"))
    assert (err.value.field, err.value.reason) == ("jobs[1].name", "job a is already defined by jobs[0]")
    cluster = {**base_cluster(), "running": [running("a")]}
    with pytest.raises(InvalidSpec) as err:
        jobs_of(base_job("a"), cluster=cluster)
    assert "running jobs" in err.value.reason


def test_impossible_request_is_not_a_file_error():
    (job,) = jobs_of(base_job(resources={"gpu": 16}))      # the scheduler says never-fits
    assert job.request.gpu.count == 16


def test_projects_are_free_when_the_cluster_lists_none():
    cluster = {k: v for k, v in base_cluster().items() if k != "projects"}
    (job,) = jobs_of(base_job(project="anyone"), cluster=cluster)
    assert job.project == "anyone"


@pytest.mark.parametrize("data,field,words", [
    ({"jobs": "train"}, "jobs", "expected a list"),
    ({"jobs": ["train"]}, "jobs[0]", "expected a mapping"),
    ({"job": []}, "job", "unknown key; expected one of: jobs"),
], ids=["jobs not a list", "job not a mapping", "misspelt jobs"])
def test_jobs_file_shape(data, field, words):
    cluster = build_cluster(base_cluster())
    with pytest.raises(InvalidSpec) as err:
        build_jobs(cluster, data)
    assert err.value.field == field
    assert words in err.value.reason


def test_single_job_file_is_one_spec_at_top_level():
    spec = parse_job(parse_yaml("name: solo\nproject: p\nqueue: q\nresources: {gpu: 0.5}\n"))
    job = to_job(spec, submit_time=3)
    assert job.id == "solo" and job.request.gpu.share == 500 and job.submit_time == 3
    with pytest.raises(InvalidSpec) as err:
        parse_job(parse_yaml("name: solo\nproject: p\nqueue: q\nwalltime: -1h\n"))
    assert err.value.field == "walltime"


@pytest.mark.parametrize("text,field,words", [
    ("jobs:\n  - name: a\n    name: b\n", "line 3", "repeats the one on line 2"),
    ("jobs: [\n", "line 2", "not valid YAML"),
], ids=["duplicate key", "syntax"])
def test_yaml_problems_name_the_line(text, field, words):
    with pytest.raises(InvalidSpec) as err:
        parse_yaml(text)
    assert err.value.field == field
    assert words in err.value.reason


@pytest.mark.parametrize("text,words", [
    ("- a\n- b\n", "expected a mapping at the top level"),
    ("", "an empty file"),
], ids=["a list", "empty"])
def test_file_top_level_must_be_a_mapping(tmp_path, text, words):
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as err:
        load_jobs(path, build_cluster(base_cluster()))
    assert err.value.field == ""
    assert words in err.value.reason


def test_missing_file(tmp_path):
    with pytest.raises(InvalidSpec) as err:
        load_cluster(tmp_path / "nope.yaml")
    assert err.value.reason == "no such file"


def test_a_single_job_file_is_a_jobs_file_of_one_job():
    """``rota plan --jobs job.yaml`` takes the file ``rota submit`` takes; its errors name the
    job's own keys."""
    cluster = build_cluster(base_cluster())
    (job,) = build_jobs(cluster, base_job("solo"))
    assert job.id == "solo" and job.queue == "research"
    with pytest.raises(InvalidSpec) as err:
        build_jobs(cluster, base_job("solo", resources={"gpu": 1.5}))
    assert err.value.field == "resources.gpu"


def test_a_single_job_files_export_is_checked_and_left_out():
    """``export`` is for ``rota submit`` (the submitter's variables); ``rota plan`` takes the
    file all the same."""
    cluster = build_cluster(base_cluster())
    (job,) = build_jobs(cluster, {**base_job("solo"), "export": ["PATH", "VIRTUAL_ENV"]})
    assert job.id == "solo"
    with pytest.raises(InvalidSpec) as err:
        build_jobs(cluster, {**base_job("solo"), "export": "everything"})
    assert err.value.field == "export" and "expected all, none or a list" in err.value.reason
    with pytest.raises(InvalidSpec) as err:  # a jobs file's job has no export
        build_jobs(cluster, {"jobs": [{**base_job("solo"), "export": "all"}]})
    assert err.value.field == "jobs[0].export"


def test_project_and_queue_are_chosen_when_a_job_leaves_them_out():
    """As ``rota run`` chooses: the only project, the only queue that admits it."""
    cluster = {**base_cluster(), "projects": [{"name": "vision"}]}
    cluster["queues"] = [q for q in cluster["queues"] if q["name"] == "research"]
    cluster.pop("bindings", None)
    (job,) = jobs_of({"name": "bare", "resources": {"gpu": 1}}, cluster=cluster)
    assert (job.project, job.queue) == ("vision", "research")
    with pytest.raises(InvalidSpec) as err:  # two queues: no choice, the key is required
        jobs_of({"name": "bare", "project": "vision"})
    assert err.value.field == "jobs[0].queue"


def test_every_mistake_of_a_job_is_reported_at_once():
    with pytest.raises(InvalidSpec) as err:
        parse_job({"name": "x", "project": "p", "queue": "q", "colour": "red",
                   "resources": {"gpu": 1.5, "cpu": -1}, "walltime": "-1h"})
    fields = [e.field for e in err.value.errors]
    assert fields[0] == "colour"
    assert {"resources.gpu", "resources.cpu", "walltime"} <= set(fields)


@pytest.mark.parametrize("image", ["python:3.12", "ghcr.io/team/train:v2", "localhost:5000/a/b",
                                   "nvcr.io/nvidia/pytorch:24.01-py3",
                                   "busybox@sha256:" + "a" * 64])
def test_an_image_is_a_container_reference(image):
    assert parse_job(base_job(image=image)).image == image
