"""``POST /v1/jobs`` with the job-file format: the persisted ``run`` follows the contract the
control loop reads, every bad field is a 422 naming its dotted path, and a submit wakes the loop."""

from __future__ import annotations

import pytest
from apikit import job_file
from rota.core.runspec import read_run


def test_a_job_file_becomes_a_pending_job_with_its_run(api):
    body = job_file(env={"LR": 0.001, "DEBUG": True}, walltime="2h", replicas=2,
                    checkpoint={"dir": "/ckpt", "signal": "USR1", "grace": "90s"},
                    restart={"max_retries": 3},
                    idle={"gpu_util_below": 5, "for": "30m", "max_lifetime": "8h"})
    response = api.post_job(body)
    assert response.status_code == 201, response.text
    job = response.json()
    # 2 replicas x 1 GPU; grace comes from checkpoint.grace (90s)
    assert (job["name"], job["state"], job["replicas"], job["walltime_s"]) == (
        "train", "pending", 2, 7200.0)
    rec = api.store.get_job(job["id"])
    assert rec.job.grace_s == 90.0 and rec.job.request.gpu.count == 1
    assert dict(rec.run) == {
        "version": 2, "command": ["/bin/sh", "-c", "python train.py"], "workdir": None, "image": None,
        "env": {"LR": "0.001", "DEBUG": "true"}, "upload": None,
        "checkpoint": {"dir": "/ckpt", "signal": "SIGUSR1", "grace_s": 90.0},
        "restart": {"max_retries": 3, "backoff_s": 10.0},
        "idle": {"gpu_util_below": 5.0, "for_s": 1800.0, "inactive_for_s": None,
                 "max_lifetime_s": 28800.0, "warn_before_s": None}}
    assert api.wakes == [1]


def test_a_list_entrypoint_is_the_argv_and_name_is_optional(api):
    body = job_file(entrypoint=["python", "-c", "print(1)"], workdir="/srv/code")
    del body["name"]
    job = api.post_job(body).json()
    rec = api.store.get_job(job["id"])
    assert job["name"] == "" and rec.run["command"] == ["python", "-c", "print(1)"]
    assert rec.run["workdir"] == "/srv/code" and rec.run["idle"] is None


def test_cancel_wakes_the_loop(api):
    job = api.post_job(job_file()).json()
    api.client.post(f"/v1/jobs/{job['id']}/cancel", headers=api.auth["alice"])
    assert api.wakes == [1, 1]


@pytest.mark.parametrize("changes, field", [
    ({"resources": {"gpu": 1.5}}, "resources.gpu"),
    ({"resources": {"gpu": "-1"}}, "resources.gpu"),
    ({"resources": {"gpu": 1e9}}, "resources.gpu"),
    ({"resources": {"memory": "1e12Gi"}}, "resources.memory"),
    ({"resources": {"colour": "red"}}, "resources.colour"),
    ({"resources": {"gpu_memory": "10Gi"}}, "resources.gpu_memory"),
    ({"entrypoint": None}, "entrypoint"),
    ({"entrypoint": ""}, "entrypoint"),
    ({"entrypoint": ["python", "a\0b"]}, "entrypoint[1]"),
    ({"entrypoint": 42}, "entrypoint"),
    ({"workdir": "relative/dir"}, "workdir"),
    ({"upload": "0" * 32}, "upload"),
    ({"upload": "../../etc/passwd"}, "upload"),
    ({"user": "bob"}, "user"),
    ({"submit_time": 5}, "submit_time"),
    ({"checkpoint": {"signal": "SIGNOPE"}}, "checkpoint.signal"),
    ({"checkpoint": {"grace": "-5s"}}, "checkpoint.grace"),
    ({"env": {"1BAD": "x"}}, "env.1BAD"),
    ({"priority": 10 ** 12}, "priority"),
    ({"replicas": 10 ** 9}, "replicas"),
    ({"replicas": -1}, "replicas"),
    ({"walltime": "forever"}, "walltime"),
    ({"name": "bad name!"}, "name"),
    ({"kind": "daemon"}, "kind"),
    ({"idle": {"gpu_util_below": 5}}, "idle.for"),
    ({"queue": "nope"}, "queue"),
    ({"project": "q"}, "project"),     # alice is not a member of q
    ({"project": "zzz"}, "project"),
    ({"colour": "red"}, "colour"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_job_files_are_422_naming_the_field(shared_api, changes, field):
    before = len(shared_api.wakes)
    response = shared_api.post_job(job_file(**changes))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_spec", field), error
    assert len(shared_api.wakes) == before


def test_an_operator_may_submit_to_any_project_but_not_an_unknown_one(api):
    assert api.post_job(job_file(project="q"), user="root").status_code == 201
    unknown = api.post_job(job_file(project="zzz"), user="root")
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "project"


def test_the_core_level_form_checks_its_run_against_the_contract(api):
    ok = api.post_job({"project": "p", "queue": "q", "gpu": 1, "run": {"command": ["true"]}})
    assert ok.status_code == 201, ok.text
    assert api.store.get_job(ok.json()["id"]).run["restart"] == {"max_retries": 0, "backoff_s": 10.0}
    bad = api.post_job({"project": "p", "queue": "q", "run": {"command": "true"}})
    assert bad.json()["error"]["field"] == "run.command"
    huge = api.post_job({"project": "p", "queue": "q", "cpu": 10 ** 12})
    assert huge.status_code == 422 and huge.json()["error"]["field"] == "cpu"


@pytest.mark.parametrize("body, field", [
    (job_file(resources={"gpu": "2"}), "resources.gpu"),
    (job_file(resources={"gpu": "0.5"}), "resources.gpu"),
    ({"project": "p", "queue": "q", "gpu": "2", "run": {"command": ["true"]}}, "gpu"),
], ids=["job-file-count", "job-file-share", "core-form"])
def test_a_gpu_count_given_as_a_string_is_refused_at_submit(api, body, field):
    response = api.post_job(body)
    print(f"{body}: {response.status_code} {response.text}")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == field and "without quotes" in error["message"]
    assert not api.store.list_jobs().items


def test_a_job_file_in_yaml_with_a_quoted_gpu_count_is_refused(api):
    text = ("name: train\nproject: p\nqueue: q\nentrypoint: python train.py\n"
            "resources:\n  gpu: \"2\"\n")
    response = api.client.post("/v1/jobs", headers={**api.auth["alice"],
                                                    "Content-Type": "application/yaml"},
                               content=text)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "resources.gpu"


@pytest.mark.parametrize("body, field", [
    ({"project": "p", "queue": "q", "run": {"command": ["true"], "checkpoint": {"dir": ""}}},
     "run.checkpoint.dir"),
    (job_file(checkpoint={"dir": ""}), "checkpoint.dir"),
], ids=["core-form", "job-file"])
def test_a_run_the_launch_spec_cannot_hold_is_refused_at_submit(api, body, field):
    """Read into the typed launch spec when it is accepted, not first when it is launched."""
    response = api.post_job(body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert not api.store.list_jobs().items


def test_the_stored_run_is_the_versioned_launch_spec(api):
    job = api.post_job(job_file(entrypoint=["python", "-c", "1"])).json()
    run = api.store.get_job(job["id"]).run
    assert run["version"] == 2
    assert read_run(run).stored() == dict(run)
