"""Several backends driven as one: a control plane over Slurm and Kubernetes (and local) at once.

``several(members)`` is a ``Backend`` over its *members* (each a backend of its own, with a
name of its own, in the order they were named: ``rota up --backend slurm,kubernetes``):

- **Inventory** is the members' nodes made one (``rota.backends.engines.merge``): a machine
  that several members report under the same name is one node with one device inventory, and
  foreign work that any member sees counts against its GPUs for all. Each node carries the
  label ``rota.dev/engine-<member>: "true"`` of every member that can launch jobs there, and
  the features those members give it.
- **Which member launches a job** (``member_for``): among the members that reach every node of
  the placement, with the node features the job needs on each (``features_needed``), those its
  ``selector`` asks for by engine label when it names any; then one that runs commands on its
  hosts for a job without a container image (Slurm, local) before one that runs containers,
  and one that runs containers for a job with an image; then the first named. A job that a
  member offered (``Offering``: a Pod created with ``schedulerName: rota``) is launched by that
  member, and its offer's job asks for that member's engine label, so that it is placed where
  that member reaches. A job ``selector: {rota.dev/engine-kubernetes: "true"}`` runs through
  Kubernetes. The scheduler places a gang on nodes that one member reaches
  (``rota.scheduler.placement.place_gang``); a placement that no one member reaches all of
  (one made before a node's labels changed) is refused at launch (``BackendError``
  ``no_engine``).
- **Everything about a launch** (poll, adopt, cancel, signal, logs, activity, endpoint, exec,
  early ends) goes to the member its handle names (``Handle.backend``): each member writes its
  own name into the handles it makes. ``recover`` asks each member that reaches the
  placement's nodes. ``watch``, ``unwatch``, ``taking_over`` and ``flush_launches`` reach every
  member that has them.
- **Capabilities**: what every member can do (``Capabilities``: signals, walltime, containers
  ...), except ``fractional_gpu``, ``queued`` and ``interactive``, which one member having is
  enough for (a launch's own member says the rest for it: ``job_capabilities``). The optional
  protocols (``Offering``, ``EarlyEnding``, ``Interactive``, ``Succeeding``) are implemented
  exactly when a member implements them, so the control loop treats the composite as it would
  treat its members.

- **Holds** (``rota.backends.holds``): before a member launches an attempt, every other
  member that keeps holds (Kubernetes, Slurm) and reports one of its nodes is told the GPUs
  it holds there (a placeholder Pod, a placeholder Slurm job); the holds go when the attempt
  ends or fails to launch, and each pass removes those whose attempt their launcher says does
  not live (after a restart). Slurm chooses a placeholder's GPUs itself: the attempt is
  launched on those, and its status says so (``Status.placement``); after a restart,
  ``recover`` looks for it there and ``adopt`` says where its handle was launched.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

from rota.backends.base import (
    Activity, Backend, BackendError, Capabilities, Channel, EarlyEnding, Handle, Interactive,
    LaunchSpec, Offer, Offering, ReplicaState, Status, Succeeding, offer_key,
)
from rota.backends.engines import asked_engines, engine_label, merge
from rota.backends.holds import Keeper
from rota.core import InvalidSpec, Job, Node, Placement, ReplicaPlacement
from rota.core.nodes import features_needed

T = TypeVar("T")


@runtime_checkable
class PerJob(Protocol):
    """A backend whose capabilities differ by job: those of the member that launches it."""

    def job_capabilities(self, job: Job) -> Capabilities: ...


def launched_by(backend: Backend, handle: Handle) -> bool:
    """Whether ``handle`` is one of ``backend``'s launches: made by it, or by one of its
    members when it drives several."""
    return handle.backend == backend.name or handle.backend in getattr(backend, "members", ())


class Several:
    """The composite backend (module docstring); made by ``several``."""

    def __init__(self, members: Sequence[Backend]) -> None:
        names = [m.name for m in members]
        if len(members) < 2:
            raise InvalidSpec("backend", "several backends at once need at least two")
        if len(set(names)) != len(names):
            raise InvalidSpec("backend", f"each backend may be named once, got {', '.join(names)}")
        self.name = ",".join(names)
        self.members: dict[str, Backend] = dict(zip(names, members))
        self._reach: dict[str, Mapping[str, frozenset[str]]] | None = None
        self._offered: dict[str, str] = {}  # offer key -> the member that offered it
        self.holds = Keeper(self.members)
        self._moved: set[tuple[str, int | None]] = set()  # launched elsewhere than placed

    @property
    def capabilities(self) -> Capabilities:
        caps = [m.capabilities for m in self.members.values()]
        every = {f: all(getattr(c, f) for c in caps) for f in (
            "memory_enforcement", "compute_enforcement", "gang", "signals", "run_as_owner",
            "containers", "walltime")}
        return Capabilities(fractional_gpu=any(c.fractional_gpu for c in caps),
                            queued=any(c.queued for c in caps),
                            interactive=any(c.interactive for c in caps), **every)

    def job_capabilities(self, job: Job) -> Capabilities:
        """The capabilities of the member that launches (or launched) ``job``."""
        assert job.placement is not None
        return self.member_for(job, job.placement).capabilities

    # inventory and the choice of a launch's member

    def inventory(self) -> list[Node]:
        reports = [(name, m.inventory()) for name, m in self.members.items()]
        merged = merge(reports)
        self._reach = dict(merged.reach)
        by_node: dict[str, set[str]] = {}
        for name, nodes in reports:
            for node in nodes:
                by_node.setdefault(node.name, set()).add(name)
        self.holds.reported({n: frozenset(m) for n, m in by_node.items()})
        self.holds.sweep()
        return list(merged.nodes)

    def member_for(self, job: Job, placement: Placement) -> Backend:
        """The member that launches ``job`` on ``placement`` (module docstring)."""
        offered = self._offered.get(offer_key(job) or "")
        if offered is not None:
            return self.members[offered]
        if self._reach is None:
            self.inventory()
        assert self._reach is not None
        nodes = {r.node for r in placement.replicas}
        needs = features_needed(job)
        able = [m for name, m in self.members.items()
                if all(name in self._reach.get(n, {}) and needs <= self._reach[n][name]
                       for n in nodes)]
        asked = asked_engines(job.selector)
        if asked:
            able = [m for m in able if m.name in asked]
        if not able:
            raise BackendError("no_engine", (
                f"no one backend of {', '.join(self.members)} reaches every node of job "
                f"{job.id}'s placement ({', '.join(sorted(nodes))})"
                + (" with the features it needs" if needs else "")
                + "; ask for one engine with the selector rota.dev/engine-NAME: \"true\""))
        in_image = job.image is not None
        fitting = [m for m in able if m.capabilities.containers == in_image]
        return (fitting or able)[0]

    def _of(self, handle: Handle) -> Backend:
        member = self.members.get(handle.backend)
        if member is None:
            raise BackendError("foreign_handle", f"handle of backend {handle.backend!r}, "
                                                 f"this control plane runs {self.name}")
        return member

    def _grouped(self, handles: Sequence[Handle],
                 ask: Callable[[Backend, list[Handle]], list[T]]) -> list[T]:
        """``ask`` each member about its own handles, in one call each; the answers in the
        order of ``handles``."""
        groups: dict[str, list[int]] = {}
        for i, handle in enumerate(handles):
            groups.setdefault(self._of(handle).name, []).append(i)
        out: list[Any] = [None] * len(handles)
        for name, at in groups.items():
            for i, answer in zip(at, ask(self.members[name], [handles[i] for i in at])):
                out[i] = answer
        return out

    # launches

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle:
        """Through ``member_for``'s member, the other members holding its GPUs first."""
        member = self.member_for(job, placement)
        if attempt is None:  # the member numbers it: the holds follow the launch
            handle = member.launch(job, placement, spec, attempt)
            self.holds.before_launch(member.name, job, placement, handle.attempt or 0)
        else:
            on = self.holds.before_launch(member.name, job, placement, attempt)
            try:
                handle = member.launch(job, on, spec, attempt)
            except BaseException:
                self.holds.launch_failed(job, attempt)
                raise
            if on != placement:  # on the GPUs a holding engine chose: the status says so
                self._moved.add((handle.job_id, attempt))
        self.holds.launched(handle)
        return handle

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None:
        """The attempt, asked of every member that reaches the placement (the inventory may
        have changed since it launched), the chosen one first."""
        try:
            first = [self.member_for(job, placement)]
        except BackendError:
            first = []
        nodes = {r.node for r in placement.replicas}
        reach = self._reach or {}
        others = [m for name, m in self.members.items() if m not in first
                  and all(name in reach.get(n, {}) for n in nodes)]
        on = self.holds.held_placement(job, placement, attempt)
        for member in first + others:
            found = member.recover(job, on, attempt)
            if found is not None:
                self.holds.launched(found)
                if on != placement:  # launched on the GPUs a holding engine chose
                    self._moved.add((found.job_id, found.attempt))
                return found
        return None

    def adopt(self, handle: Handle) -> Status:
        status = self._of(handle).adopt(handle)
        if self.holds.chosen(handle):
            self._moved.add((handle.job_id, handle.attempt))
            status = _as_launched(handle, status)
        self.holds.ended([handle], [status])
        return status

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        statuses = self._grouped(handles, lambda m, hs: m.poll(hs))
        if self._moved:
            statuses = [_as_launched(h, s) if (h.job_id, h.attempt) in self._moved else s
                        for h, s in zip(handles, statuses)]
            self._moved -= {(h.job_id, h.attempt) for h, s in zip(handles, statuses)
                            if s.state is not ReplicaState.RUNNING}
        self.holds.ended(handles, statuses)
        return statuses

    def activity(self, handles: Sequence[Handle]) -> list[Activity]:
        return self._grouped(handles, lambda m, hs: m.activity(hs))

    def signal(self, handle: Handle, sig: int) -> None:
        self._of(handle).signal(handle, sig)

    def cancel(self, handle: Handle, grace_s: float) -> None:
        self._of(handle).cancel(handle, grace_s)

    def notify(self, handle: Handle, message: str) -> None:
        self._of(handle).notify(handle, message)

    def endpoint(self, handle: Handle) -> str | None:
        return self._of(handle).endpoint(handle)

    def read_log(self, handle: Handle, rank: int, stream: str, offset: int) -> Iterator[bytes]:
        return self._of(handle).read_log(handle, rank, stream, offset)

    def watch(self, wake: Callable[..., None]) -> None:
        for member in self.members.values():
            member.watch(wake)

    def unwatch(self) -> None:
        for member in self.members.values():
            member.unwatch()

    def _having(self, protocol: type) -> list[Any]:
        return [m for m in self.members.values() if isinstance(m, protocol)]


def _as_launched(handle: Handle, status: Status) -> Status:
    """``status`` saying where the handle's replicas were launched, when its member does not
    say (a launch moved to the GPUs a holding engine chose: ``rota.backends.holds``)."""
    if status.placement is not None:
        return status
    return replace(status, placement=Placement(tuple(ReplicaPlacement(r.node, r.devices)
                                                     for r in handle.replicas)))


class _Offering:
    """Offers of every member that has them; each launched and declined by its maker."""

    def offers(self: Any) -> list[Offer]:
        out = []
        for member in self._having(Offering):
            for offer in member.offers():
                self._offered[offer.key] = member.name
                job = offer.job
                label = (engine_label(member.name), "true")
                if label not in job.selector:
                    job = replace(job, selector=tuple(sorted((*job.selector, label))))
                out.append(replace(offer, job=job))
        return out

    def decline(self: Any, offer: Offer, reason: str) -> None:
        maker = self._offered.get(offer.key)
        if maker is not None:
            self.members[maker].decline(offer, reason)


class _EarlyEnding:
    """Early ends taken by the member that launched the attempt, where it takes them."""

    def reported(self: Any, handle: Handle, exit_code: int,
                 replicas: tuple[int, ...] | None = None) -> bool:
        member = self._of(handle)
        return isinstance(member, EarlyEnding) and member.reported(handle, exit_code, replicas)

    def overdue(self: Any) -> list[Handle]:
        return [h for m in self._having(EarlyEnding) for h in m.overdue()]

    def flush_launches(self: Any) -> None:
        for member in self._having(EarlyEnding):
            member.flush_launches()


class _Interactive:
    """Commands and ports inside a replica, through the member that runs it."""

    def _inside(self: Any, handle: Handle) -> Interactive:
        member = self._of(handle)
        if not member.capabilities.interactive or not isinstance(member, Interactive):
            raise BackendError("unsupported", f"the {member.name} backend cannot reach inside "
                                              f"running jobs, and it runs job {handle.job_id}")
        return member

    def open_exec(self: Any, handle: Handle, rank: int, argv: Sequence[str],
                  tty: bool) -> Channel:
        return self._inside(handle).open_exec(handle, rank, argv, tty)

    def open_port(self: Any, handle: Handle, rank: int, port: int) -> Channel:
        return self._inside(handle).open_port(handle, rank, port)


class _Succeeding:
    def taking_over(self: Any, unsure: bool) -> None:
        for member in self._having(Succeeding):
            member.taking_over(unsure)


_OPTIONAL = ((Offering, _Offering), (EarlyEnding, _EarlyEnding), (Interactive, _Interactive),
             (Succeeding, _Succeeding))


def several(members: Sequence[Backend]) -> Several:
    """The composite of ``members``, with each optional protocol that one of them has."""
    mixins = tuple(mixin for protocol, mixin in _OPTIONAL
                   if any(isinstance(m, protocol) for m in members))
    return _composite(mixins)(members)


@cache
def _composite(mixins: tuple[type, ...]) -> type[Several]:
    if not mixins:
        return Several
    return type("Several", (*mixins, Several), {"__doc__": Several.__doc__})
