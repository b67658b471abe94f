"""Services in the store, on SQLite and PostgreSQL: created from a replica template checked as
a submit, one service per model name, replicas found by their label."""

import pytest

from rota.core import GpuRequest, JobKind, JobState, Queue, ReplicaRequest
from rota.core.serving import ServiceSettings
from rota.store import AlreadyExists, NotFound, Submission
from rota.store.services import SERVICE_LABEL, ModelTaken, service_of


@pytest.fixture
def tenants(store):
    store.create_project("p")
    store.create_project("q")
    store.create_user("alice", ["p"])
    store.put_queue(Queue("default"))
    return store


def template(project="p", user="alice", **changes) -> Submission:
    base = dict(project=project, queue="default", user=user, name="tiny", priority=100,
                kind=JobKind.SERVICE,
                request=ReplicaRequest(500, 256, GpuRequest(1, 1000, None, ("*H100*",))),
                run={"command": ["python", "serve.py"], "port": 0}, grace_s=5.0,
                selector={"zone": "a"})
    base.update(changes)
    return Submission(**base)


SETTINGS = ServiceSettings(models=("tiny", "tiny-chat"), min_replicas=0, max_replicas=2)


def test_a_service_keeps_its_settings_and_its_replica_template(tenants):
    made = tenants.services.create("tiny", SETTINGS, template())
    assert made == tenants.services.get("tiny") == tenants.services.list()[0]
    assert made.settings == SETTINGS
    t = made.template
    assert (t.project, t.user, t.priority, t.kind, t.request, t.run, t.grace_s,
            dict(t.selector)) == ("p", "alice", 100, JobKind.SERVICE, template().request,
                                  template().run, 5.0, {"zone": "a"})
    assert dict(t.labels) == {SERVICE_LABEL: "tiny"}


def test_a_model_is_served_by_one_service_only(tenants):
    tenants.services.create("tiny", SETTINGS, template())
    with pytest.raises(ModelTaken) as raised:
        tenants.services.create("other", ServiceSettings(models=("x", "tiny-chat")), template())
    assert raised.value.service == "tiny" and "tiny-chat" in str(raised.value)
    with pytest.raises(AlreadyExists):
        tenants.services.create("tiny", ServiceSettings(models=("y",)), template())
    tenants.services.remove("tiny")
    tenants.services.create("other", ServiceSettings(models=("x", "tiny-chat")), template())


def test_a_template_is_checked_as_a_submit_of_its_user(tenants):
    with pytest.raises(Exception) as raised:
        tenants.services.create("tiny", SETTINGS, template(project="q"), member=True)
    assert getattr(raised.value, "field", None) == "project"
    with pytest.raises(NotFound):
        tenants.services.get("tiny")


def test_replicas_are_the_live_jobs_labelled_with_a_service(tenants):
    svc = tenants.services.create("tiny", SETTINGS, template())
    first = tenants.submit_record(svc.template)
    second = tenants.submit_record(svc.template)
    tenants.submit_record(template(kind=JobKind.BATCH, name="batch"))
    tenants.submit_record(template(name="plain-service"))  # kind service, no label
    tenants.request_cancel(second.id, by="alice")
    found = tenants.services.replicas()
    assert [r.id for r in found] == [first.id]
    assert service_of(found[0]) == "tiny" and found[0].state is JobState.PENDING


def test_a_replicas_preemptible_is_changed_by_protect_with_an_event(tenants):
    svc = tenants.services.create("tiny", SETTINGS, template())
    replica = tenants.submit_record(svc.template)
    before = tenants.get_job(replica.id).version
    assert tenants.services.protect(replica.id, False, "loading") is True
    after = tenants.get_job(replica.id)
    assert (after.job.preemptible, after.version) == (False, before + 1)  # the snapshot sees it
    assert [e.message for e in tenants.events(replica.id) if e.kind == "protection"] == \
        ["loading"]
    assert tenants.services.protect(replica.id, False, "again") is False  # so already
    batch = tenants.submit_record(template(kind=JobKind.BATCH, name="batch"))
    with pytest.raises(Exception) as raised:  # only a service's replica
        tenants.services.protect(batch.id, False, "no")
    assert getattr(raised.value, "field", None) == "job"
    assert tenants.get_job(batch.id).job.preemptible is True
