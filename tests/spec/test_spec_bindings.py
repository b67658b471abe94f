"""Queues bound to projects: ``projects:`` on a queue, in a cluster file and a queues file."""

from __future__ import annotations

import pytest
from specdata import base_cluster, base_job, setin

from rota.core import InvalidSpec
from rota.spec import build_cluster, build_jobs, build_queues


def bound(projects):
    return setin(base_cluster(), "queues.0.projects", projects)


def test_a_queue_without_projects_is_open_and_a_list_binds_it():
    cluster = build_cluster(bound(["vision"]))
    assert cluster.bindings == {"research": ("vision",), "product": None}
    assert build_cluster(bound([])).bindings["research"] == ()


@pytest.mark.parametrize("projects, field, words", [
    (["vision", "nlp"], "queues[0].projects[1]", "unknown project 'nlp'; projects: llm, vision"),
    (["vision", "vision"], "queues[0].projects[1]", "listed twice"),
    ("vision", "queues[0].projects", "expected a list"),
    (["Bad name!"], "queues[0].projects[0]", "must be 1 to 63 letters"),
], ids=["unknown", "twice", "not-a-list", "not-a-name"])
def test_bad_bindings_name_the_entry(projects, field, words):
    with pytest.raises(InvalidSpec) as err:
        build_cluster(bound(projects))
    assert err.value.field == field
    assert words in err.value.reason


def test_any_project_name_binds_when_the_cluster_lists_none():
    data = bound(["anyone"])
    del data["projects"]
    assert build_cluster(data).bindings["research"] == ("anyone",)


@pytest.mark.parametrize("projects, job_project, admitted", [
    (None, "llm", True),
    (["vision"], "vision", True),
    (["vision"], "llm", False),
    ([], "vision", False),
], ids=["open", "listed", "not-listed", "closed"])
def test_a_pending_job_must_name_a_queue_open_to_its_project(projects, job_project, admitted):
    data = base_cluster() if projects is None else bound(projects)
    cluster = build_cluster(data)
    jobs = {"jobs": [base_job("a", queue="product"), base_job("b", project=job_project)]}
    if admitted:
        assert [j.project for j in build_jobs(cluster, jobs)] == ["vision", job_project]
        return
    with pytest.raises(InvalidSpec) as err:
        build_jobs(cluster, jobs)
    assert err.value.field == "jobs[1].queue"
    assert f"does not admit project {job_project}" in err.value.reason


def test_running_jobs_stay_whatever_the_binding_says():
    data = setin(bound(["llm"]), "running", [
        {**base_job("old"), "placement": [{"node": "h-0", "gpus": [0, 1]}]}])
    assert [j.project for j in build_cluster(data).snapshot.jobs] == ["vision"]


def test_a_queues_file_checks_bindings_against_the_projects_that_exist():
    body = {"queues": [{"name": "a"}, {"name": "b", "projects": ["vision", "nlp"]}]}
    with pytest.raises(InvalidSpec) as err:
        build_queues(body, {"default"}, known_projects={"vision"})
    assert err.value.field == "queues[1].projects[1]"
    applied = build_queues(body, {"default"}, known_projects={"vision", "nlp"})
    assert applied.bindings == {"a": None, "b": ("vision", "nlp")}
    assert list(applied.queues) == ["a", "b"] and applied.flavors == {}
