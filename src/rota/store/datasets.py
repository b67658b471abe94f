"""Datasets in the store (``datasets``), what each node's cache holds (``dataset_caches``) and
per-project quotas on cached bytes (``dataset_quotas``); ``rota.core.datasets`` defines them.

Rules kept here, each in the transaction that needs it:
- a dataset name is unique; its project must exist, and a member creates datasets only in
  her own projects;
- a job names datasets in ``run.datasets``; each must exist and belong to the job's project
  (``check_job``, called by the submit's own checks, so a dataset removed meanwhile cannot
  slip in);
- a dataset that a live job (pending, scheduled, running, ...) names cannot be removed: the
  refusal (``InUse``, code ``dataset_in_use``) lists those jobs;
- a project's quota bounds the bytes of its datasets that all nodes' caches hold together:
  a dataset larger than the quota alone is refused at create, and ``quota_refusal`` says why a
  node may not copy one more (the launch refuses it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from sqlalchemy import Connection, delete, func, insert, select

from rota.core import InvalidSpec, JobState
from rota.core.datasets import Dataset, cache_key, check_name, check_names
from rota.store.errors import AlreadyExists, InUse, NotFound
from rota.store.schema import dataset_caches, dataset_quotas, datasets, jobs, memberships, projects

if TYPE_CHECKING:
    from rota.store.store import Store

_LIVE = tuple(str(s) for s in JobState if not s.terminal)


@dataclass(frozen=True, slots=True)
class Cached:
    """One node's copy of one version of a dataset."""

    node: str
    dataset: str
    version: str
    bytes: int
    last_used: float


def _record(row: Any) -> Dataset:
    return Dataset(row.name, row.project, row.source, row.version, row.size_bytes, row.user,
                   row.created_at)


def create(conn: Connection, ds: Dataset, member: bool) -> Dataset:
    check_name(ds.name)
    if conn.execute(select(projects.c.name).where(projects.c.name == ds.project)).first() is None:
        raise InvalidSpec("project", f"no project named {ds.project!r}")
    if member and conn.execute(select(memberships.c.user).where(
            memberships.c.user == ds.user, memberships.c.project == ds.project)).first() is None:
        raise InvalidSpec("project", f"{ds.user} is not a member of project {ds.project!r}")
    if conn.execute(select(datasets.c.name).where(datasets.c.name == ds.name)).first():
        raise AlreadyExists("dataset", ds.name)
    quota = quota_of(conn, ds.project)
    if quota is not None and ds.size_bytes is not None and ds.size_bytes > quota:
        raise InvalidSpec("size", f"{ds.size_bytes} bytes is more than project {ds.project}'s "
                                  f"quota on cached datasets ({quota} bytes): no node could "
                                  "cache it; ask an operator for more")
    conn.execute(insert(datasets).values(
        name=ds.name, project=ds.project, user=ds.user, source=ds.source, version=ds.version,
        size_bytes=ds.size_bytes, created_at=ds.created_at))
    return get(conn, ds.name)


def get(conn: Connection, name: str) -> Dataset:
    row = conn.execute(select(datasets).where(datasets.c.name == name)).first()
    if row is None:
        raise NotFound("dataset", name)
    return _record(row)


def all_datasets(conn: Connection) -> list[Dataset]:
    return [_record(r) for r in conn.execute(select(datasets).order_by(datasets.c.name))]


def live_jobs_naming(conn: Connection, project: str) -> dict[str, list[str]]:
    """Per dataset name, the ids of the project's live jobs that name it."""
    out: dict[str, list[str]] = {}
    rows = conn.execute(select(jobs.c.id, jobs.c.spec).where(
        jobs.c.project == project, jobs.c.state.in_(_LIVE)).order_by(jobs.c.id))
    for row in rows:
        for name in (row.spec.get("run") or {}).get("datasets") or ():
            out.setdefault(name, []).append(str(row.id))
    return out


def remove(conn: Connection, name: str) -> Dataset:
    """Delete the dataset and what the store knows of its cached copies; refused while a live
    job names it."""
    found = get(conn, name)
    users = live_jobs_naming(conn, found.project).get(name, [])
    if users:
        raise InUse("dataset_in_use", f"dataset {name} is named by live jobs "
                    f"{', '.join(users)}; cancel them or wait until they end",
                    {"live": len(users)})
    conn.execute(delete(dataset_caches).where(dataset_caches.c.dataset == name))
    conn.execute(delete(datasets).where(datasets.c.name == name))
    return found


def check_job(conn: Connection, project: str, run: dict[str, Any],
              field: str = "datasets") -> None:
    """Every dataset ``run.datasets`` names exists in ``project``."""
    names = check_names(run.get("datasets"), field)
    if not names:
        return
    found = {r.name: r.project for r in conn.execute(
        select(datasets.c.name, datasets.c.project).where(datasets.c.name.in_(names)))}
    for k, name in enumerate(names):
        if found.get(name) != project:
            raise InvalidSpec(f"{field}.{k}", f"no dataset {name!r} in project {project} "
                              "(rota dataset ls lists those you can use)")


def resolve(conn: Connection, names: Iterable[str]) -> list[Dataset]:
    return [get(conn, n) for n in names]


def wanted(conn: Connection) -> frozenset[str]:
    """The cache keys (``name@version``) that live jobs name: evicted last."""
    names = {n for per in (live_jobs_naming(conn, p) for p in _projects_with_datasets(conn))
             for n in per}
    if not names:
        return frozenset()
    rows = conn.execute(select(datasets.c.name, datasets.c.version)
                        .where(datasets.c.name.in_(sorted(names))))
    return frozenset(cache_key(r.name, r.version) for r in rows)


def _projects_with_datasets(conn: Connection) -> list[str]:
    return list(conn.execute(select(datasets.c.project).distinct()).scalars())


def record_node(conn: Connection, node: str, entries: Iterable[Cached]) -> None:
    """What ``node``'s cache holds now, replacing what was recorded before."""
    conn.execute(delete(dataset_caches).where(dataset_caches.c.node == node))
    rows = [{"node": node, "dataset": e.dataset, "version": e.version, "bytes": e.bytes,
             "last_used": e.last_used} for e in entries]
    if rows:
        conn.execute(insert(dataset_caches), rows)


def caches(conn: Connection, name: str | None = None) -> list[Cached]:
    query = select(dataset_caches).order_by(dataset_caches.c.dataset, dataset_caches.c.node)
    if name is not None:
        query = query.where(dataset_caches.c.dataset == name)
    return [Cached(r.node, r.dataset, r.version, r.bytes, r.last_used)
            for r in conn.execute(query)]


def quota_of(conn: Connection, project: str) -> int | None:
    return conn.execute(select(dataset_quotas.c.cache_bytes)
                        .where(dataset_quotas.c.project == project)).scalar()


def set_quota(conn: Connection, project: str, cache_bytes: int | None) -> None:
    """Set (None: remove) the project's quota on cached bytes."""
    if cache_bytes is not None and (isinstance(cache_bytes, bool) or not isinstance(
            cache_bytes, int) or cache_bytes < 0):
        raise InvalidSpec("cache_bytes", f"must be 0 or more bytes, got {cache_bytes!r}")
    if conn.execute(select(projects.c.name).where(projects.c.name == project)).first() is None:
        raise NotFound("project", project)
    conn.execute(delete(dataset_quotas).where(dataset_quotas.c.project == project))
    if cache_bytes is not None:
        conn.execute(insert(dataset_quotas).values(project=project, cache_bytes=cache_bytes))


def cached_bytes(conn: Connection, project: str) -> int:
    """The bytes of ``project``'s datasets that all nodes' caches hold together."""
    total = conn.execute(select(func.coalesce(func.sum(dataset_caches.c.bytes), 0))
                         .select_from(dataset_caches.join(
                             datasets, datasets.c.name == dataset_caches.c.dataset))
                         .where(datasets.c.project == project)).scalar()
    return int(total or 0)


def quota_refusal(conn: Connection, node: str, ds: Dataset) -> str:
    """Why ``node`` may not copy ``ds`` now under its project's quota ("": it may). A copy the
    node holds already costs nothing more; one of unknown size is let through."""
    quota = quota_of(conn, ds.project)
    if quota is None or ds.size_bytes is None:
        return ""
    held = conn.execute(select(dataset_caches.c.node).where(
        dataset_caches.c.node == node, dataset_caches.c.dataset == ds.name,
        dataset_caches.c.version == ds.version)).first()
    if held is not None:
        return ""
    used = cached_bytes(conn, ds.project)
    if used + ds.size_bytes <= quota:
        return ""
    return (f"caching dataset {ds.name} ({ds.size_bytes} bytes) on node {node} would bring "
            f"project {ds.project}'s cached datasets to {used + ds.size_bytes} bytes, over its "
            f"quota of {quota}")


class Datasets:
    """The store's datasets, each method one transaction (``Store.datasets``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, ds: Dataset, member: bool = False) -> Dataset:
        with self._store._write() as conn:
            return create(conn, ds, member)

    def get(self, name: str) -> Dataset:
        with self._store._read() as conn:
            return get(conn, name)

    def list(self) -> list[Dataset]:
        with self._store._read() as conn:
            return all_datasets(conn)

    def remove(self, name: str) -> Dataset:
        with self._store._write() as conn:
            return remove(conn, name)

    def for_launch(self, names: Iterable[str],
                   nodes: Iterable[str]) -> tuple[list[Dataset], frozenset[str]]:
        """The datasets a launch on ``nodes`` reads and the cache keys live jobs name;
        ``InvalidSpec`` on ``datasets`` when one is gone or over its project's quota."""
        with self._store._read() as conn:
            try:
                found = resolve(conn, names)
            except NotFound as exc:
                raise InvalidSpec("datasets", f"dataset {exc.key!r} no longer exists") from None
            for node in nodes:
                for ds in found:
                    why = quota_refusal(conn, node, ds)
                    if why:
                        raise InvalidSpec("datasets", why)
            return found, wanted(conn)

    def record_node(self, node: str, entries: Iterable[Cached]) -> None:
        with self._store._write() as conn:
            record_node(conn, node, list(entries))

    def caches(self, name: str | None = None) -> list[Cached]:
        with self._store._read() as conn:
            return caches(conn, name)

    def set_quota(self, project: str, cache_bytes: int | None) -> None:
        with self._store._write() as conn:
            set_quota(conn, project, cache_bytes)

    def quota(self, project: str) -> tuple[int | None, int]:
        """The project's quota on cached bytes (None: none) and what its datasets hold now."""
        with self._store._read() as conn:
            return quota_of(conn, project), cached_bytes(conn, project)
