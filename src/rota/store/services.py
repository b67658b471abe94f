"""Model-serving services in the store (``services``, ``service_models``) and their replicas.

A service row holds what its replicas are made from: ``template`` is a ``Submission`` as JSON
(``template_json``), validated like a submit when the service is created, so that every replica
job made from it later is accepted. A model name belongs to one service at a time
(``service_models``' primary key): a second service naming it is refused with
``model_taken``. Replicas are jobs of kind service with the label ``SERVICE_LABEL: <name>``;
``replicas`` lists those not yet ended, of every service, in one query.

A replica's ``preemptible`` is the serving runtime's to change while the job lives
(``protect``): a replica that is loading (not ready yet) is not preemptible, whatever its
service's template says; once ready it is what the template says again. Each change is a job
event, so ``rota show`` tells it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from sqlalchemy import Connection, delete, insert, select

from rota.core import InvalidSpec, JobKind, JobState, RotaError
from rota.core.serving import ServiceSettings
from rota.store import convert
from rota.store.errors import AlreadyExists, NotFound
from rota.store.jobs import check_name
from rota.store.jobs import get as get_job
from rota.store.moves import write
from rota.store.records import JobRecord, Submission
from rota.store.schema import jobs, service_models, services
from rota.store.submit import _validate

if TYPE_CHECKING:
    from rota.store.store import Store

SERVICE_LABEL = "rota.service"
_LIVE = tuple(str(s) for s in JobState if not s.terminal)


class ModelTaken(RotaError):
    """A model name is already served by another service."""

    code = "model_taken"

    def __init__(self, model: str, service: str) -> None:
        super().__init__(f"model {model!r} is already served by service {service!r}; "
                         "choose another name, or delete that service first")
        self.model, self.service = model, service


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    name: str
    project: str
    queue: str
    user: str
    settings: ServiceSettings
    template: Submission  # what each replica job is submitted as
    created_at: float


def template_json(sub: Submission) -> dict[str, Any]:
    return {"spec": convert.spec_json(sub), "name": sub.name, "priority": sub.priority}


def _template(record: Mapping[str, Any], project: str, queue: str, user: str,
              service: str) -> Submission:
    spec = record["spec"]
    return Submission(
        project=project, queue=queue, user=user, request=convert.request_from_spec(spec),
        name=record.get("name") or service, priority=int(record.get("priority", 0)),
        kind=JobKind.SERVICE, walltime_s=spec.get("walltime_s"),
        preemptible=bool(spec.get("preemptible", True)), grace_s=float(spec.get("grace_s", 30)),
        resource_group=spec.get("resource_group"), selector=dict(spec.get("selector") or {}),
        labels={**(spec.get("labels") or {}), SERVICE_LABEL: service}, run=spec.get("run", {}))


def _record(row: Any) -> ServiceRecord:
    return ServiceRecord(row.name, row.project, row.queue, row.user,
                         ServiceSettings.from_json(row.settings),
                         _template(row.template, row.project, row.queue, row.user, row.name),
                         row.created_at)


def create(conn: Connection, name: str, settings: ServiceSettings, template: Submission,
           member: bool, now: float) -> ServiceRecord:
    """A new service; ``template`` is checked as a submit by its user would be (``member``:
    the user must belong to the project)."""
    check_name(name, "name")
    _validate(conn, template, member, {})
    if conn.execute(select(services.c.name).where(services.c.name == name)).first():
        raise AlreadyExists("service", name)
    for model in settings.models:
        owner = conn.execute(select(service_models.c.service)
                             .where(service_models.c.model == model)).scalar()
        if owner is not None:
            raise ModelTaken(model, owner)
    conn.execute(insert(services).values(
        name=name, project=template.project, queue=template.queue, user=template.user,
        settings=settings.to_json(), template=template_json(template), created_at=now))
    conn.execute(insert(service_models), [{"model": m, "service": name} for m in settings.models])
    return get(conn, name)


def get(conn: Connection, name: str) -> ServiceRecord:
    row = conn.execute(select(services).where(services.c.name == name)).first()
    if row is None:
        raise NotFound("service", name)
    return _record(row)


def all_services(conn: Connection) -> list[ServiceRecord]:
    return [_record(r) for r in conn.execute(select(services).order_by(services.c.name))]


def remove(conn: Connection, name: str) -> ServiceRecord:
    """Delete the service (its replicas are stopped by the serving runtime, which finds them
    without a service)."""
    found = get(conn, name)
    conn.execute(delete(service_models).where(service_models.c.service == name))
    conn.execute(delete(services).where(services.c.name == name))
    return found


def replicas(conn: Connection) -> list[JobRecord]:
    """Every replica job not yet ended, of every service, in id order."""
    rows = conn.execute(select(jobs).where(jobs.c.kind == str(JobKind.SERVICE),
                                           jobs.c.state.in_(_LIVE)).order_by(jobs.c.id))
    out = [convert.record_from_row(r) for r in rows]
    return [r for r in out if dict(r.job.labels).get(SERVICE_LABEL)]


def service_of(rec: JobRecord) -> str | None:
    return dict(rec.job.labels).get(SERVICE_LABEL)


def protect(conn: Connection, job_id: str, preemptible: bool, why: str, now: float) -> bool:
    """Set a live replica job's ``preemptible`` (module docstring); False if it was so already
    or the job has ended."""
    row = get_job(conn, job_id, lock=True)
    if row.kind != str(JobKind.SERVICE) or SERVICE_LABEL not in (row.spec.get("labels") or {}):
        raise InvalidSpec("job", f"job {row.id} is not a replica of a service")
    if JobState(row.state).terminal or bool(row.spec["preemptible"]) is preemptible:
        return False
    write(conn, row, now, "protection", why, {"preemptible": preemptible},
          spec={**row.spec, "preemptible": preemptible})
    return True



class Services:
    """The store's services, each method one transaction (``Store.services``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, name: str, settings: ServiceSettings, template: Submission,
               member: bool = False) -> ServiceRecord:
        with self._store._write() as conn:
            return create(conn, name, settings, template, member, self._store.clock())

    def get(self, name: str) -> ServiceRecord:
        with self._store._read() as conn:
            return get(conn, name)

    def list(self) -> list[ServiceRecord]:
        with self._store._read() as conn:
            return all_services(conn)

    def remove(self, name: str) -> ServiceRecord:
        with self._store._write() as conn:
            return remove(conn, name)

    def replicas(self) -> list[JobRecord]:
        with self._store._read() as conn:
            return replicas(conn)

    def protect(self, job_id: str, preemptible: bool, why: str) -> bool:
        with self._store._write() as conn:
            return protect(conn, job_id, preemptible, why, self._store.clock())
