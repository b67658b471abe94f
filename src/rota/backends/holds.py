"""Holds: each engine told what rota launched through another one on the nodes they share.

Vocabulary:
- a *hold* is a placeholder that one member of a composite (``rota.backends.several``) keeps
  on a node it shares with another member, for an attempt that other member runs there: it
  holds exactly the GPUs (device indices) rota placed the attempt on, so that work started
  directly on the holding engine (a Pod of the default scheduler, a plain ``sbatch``) is not
  given those GPUs;
- the *launcher* is the member that runs the attempt; a hold names it, with the attempt's
  job, number and rank (``Held``), so that it can be found again after a restart;
- a member that keeps holds is ``Holding``: Kubernetes with a placeholder Pod bound to the
  node (``rota.backends.kube.holds``), Slurm with a placeholder job (``rota.backends.slurm.
  holds``). Slurm picks a placeholder's GPUs itself (``chooses_devices``): the attempt is then
  launched on the GPUs Slurm gave it (``given``), so that both engines agree on its indices;
- a member that can say which of its attempts still live is ``Attesting`` (Slurm: ``squeue``
  by the attempts' names; Kubernetes: its cached Pods).

Invariants (``Keeper``):
- a hold is made before its attempt is launched, and removed once the launcher reports the
  attempt ended (``ended``), or when it fails to launch; where the launcher reports that it
  gave the attempt other devices than rota placed it on (Slurm picks the indices of
  ``--gres=gpu:N`` itself), the holds are told those (``moved``);
- a hold whose attempt is neither being launched nor known live here is checked with its
  launcher: when the launcher says the attempt does not live (a control plane killed between
  the hold and the launch, or while the attempt ended), the hold is removed (``sweep``). A
  hold whose launcher cannot say is kept: one GPU held too long, never one with two owners;
- a hold is made at most once per (attempt, rank): its name is derived from them, so that a
  second launch of the same attempt (after a restart) finds it and makes no other; an
  attempt found again after a restart is looked for on the GPUs its holds were given
  (``held_placement``).
Only whole GPUs are held: a fractional share of a GPU is not told to the other engine.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Mapping, Protocol, Sequence, runtime_checkable

from rota.backends.base import Backend, BackendError, Handle, ReplicaState, Status
from rota.core import MILLI, Job, Placement

log = logging.getLogger("rota.holds")
Attempt = tuple[str, int]  # (job id, attempt number)


@dataclass(frozen=True, slots=True)
class Held:
    """One hold as its holding member keeps it."""

    job_id: str
    attempt: int
    rank: int
    node: str
    devices: tuple[int, ...]
    launcher: str


@dataclass(frozen=True, slots=True)
class ToHold:
    """What one replica of an attempt holds on a node: its whole GPUs' indices."""

    rank: int
    node: str
    devices: tuple[int, ...]


@runtime_checkable
class Holding(Protocol):
    """A member that keeps holds on its nodes for attempts other members launch;
    ``chooses_devices``: whether it picks a hold's GPUs itself (``hold`` returns them)."""

    chooses_devices: bool

    def hold(self, job: Job, attempt: int, launcher: str,
             replicas: Sequence[ToHold]) -> Mapping[int, tuple[int, ...]] | None:
        """Make the holds (each once: an existing one is kept). Where the holding engine
        chooses the GPUs itself (Slurm), the indices it gave each rank, which the attempt
        is then launched on; None where the holds are on the indices asked."""
        ...

    def unhold(self, job_id: str, attempt: int) -> None:
        """Remove every hold of the attempt (none: nothing to do)."""
        ...

    def holds(self) -> list[Held]:
        """The holds that exist now."""
        ...

    def moved(self, job_id: str, attempt: int, replicas: Sequence[ToHold]) -> None:
        """The launcher says the attempt's replicas run on these devices (it chose them
        itself): the holds on those nodes name them."""
        ...


@runtime_checkable
class Attesting(Protocol):
    """A member that can say which of its attempts live (submitted, not ended)."""

    def live_attempts(self, attempts: Sequence[Attempt]) -> set[Attempt]: ...


def given(placement: Placement, chosen: Mapping[int, tuple[int, ...]]) -> Placement:
    """``placement`` with each rank in ``chosen`` on the whole GPUs chosen for it."""
    replicas = list(placement.replicas)
    for rank, indices in chosen.items():
        replica = replicas[rank]
        whole = [d for d in replica.devices if d.milli >= MILLI]
        if len(whole) != len(indices):
            continue
        moved = dict(zip((d.index for d in whole), indices))
        replicas[rank] = replace(replica, devices=tuple(
            replace(d, index=moved[d.index]) if d.index in moved else d
            for d in replica.devices))
    return replace(placement, replicas=tuple(replicas))


def to_hold(placement: Placement, nodes: frozenset[str]) -> list[ToHold]:
    """The whole GPUs of each replica of ``placement`` on one of ``nodes``."""
    out = []
    for rank, replica in enumerate(placement.replicas):
        whole = tuple(d.index for d in replica.devices if d.milli >= MILLI)
        if replica.node in nodes and whole:
            out.append(ToHold(rank, replica.node, whole))
    return out


class Keeper:
    """The holds of a composite's launches (module docstring): made before each launch,
    removed at its end, and swept of those whose attempt is gone."""

    def __init__(self, members: Mapping[str, Backend]) -> None:
        self.members = members
        self.holding = {n: m for n, m in members.items() if isinstance(m, Holding)}
        self._lock = threading.Lock()
        self._launching: set[Attempt] = set()
        self._live: set[Attempt] = set()
        self._reported: Mapping[str, frozenset[str]] = {}  # node -> the members reporting it

    def reported(self, by_node: Mapping[str, frozenset[str]]) -> None:
        """Which members report each node, as the last inventory said."""
        self._reported = by_node

    def _holders(self, launcher: str, placement: Placement) -> list[tuple[Holding, list[ToHold]]]:
        out = []
        for name, member in self.holding.items():
            if name == launcher:
                continue
            nodes = frozenset(n for n, members in self._reported.items() if name in members)
            replicas = to_hold(placement, nodes)
            if replicas:
                out.append((member, replicas))
        return out

    def before_launch(self, launcher: str, job: Job, placement: Placement,
                      attempt: int) -> Placement:
        """Hold the GPUs of the attempt on every other member that reports its nodes; the
        placement to launch it on (the GPUs a holding engine chose, where it chose them)."""
        key = (str(job.id), attempt)
        with self._lock:
            self._launching.add(key)
        try:
            for member, replicas in self._holders(launcher, placement):
                chosen = member.hold(job, attempt, launcher, replicas)
                if chosen:
                    placement = given(placement, chosen)
        except BaseException:
            self.launch_failed(job, attempt)
            raise
        return placement

    def launched(self, handle: Handle) -> None:
        if handle.attempt is None:
            return
        key = (handle.job_id, handle.attempt)
        with self._lock:
            self._live.add(key)
            self._launching.discard(key)

    def launch_failed(self, job: Job, attempt: int) -> None:
        key = (str(job.id), attempt)
        with self._lock:
            self._launching.discard(key)
            self._unhold(key)

    def ended(self, handles: Sequence[Handle], statuses: Sequence[Status]) -> None:
        """Remove the holds of the attempts ``statuses`` say ended; note the live ones."""
        for handle, status in zip(handles, statuses):
            if handle.attempt is None or not self.holding:
                continue
            key = (handle.job_id, handle.attempt)
            with self._lock:
                if status.state is ReplicaState.RUNNING:
                    self._live.add(key)
                elif key not in self._launching:
                    self._live.discard(key)
                    self._unhold(key)
            if status.state is ReplicaState.RUNNING and status.placement is not None:
                for member, replicas in self._holders(handle.backend, status.placement):
                    member.moved(handle.job_id, handle.attempt, replicas)

    def chosen(self, handle: Handle) -> bool:
        """Whether a holding engine that picks GPUs itself holds some for the attempt (its
        launch went to those GPUs)."""
        return any(member.chooses_devices and name != handle.backend
                   and any((h.job_id, h.attempt) == (handle.job_id, handle.attempt)
                           for h in member.holds())
                   for name, member in self.holding.items())

    def held_placement(self, job: Job, placement: Placement, attempt: int) -> Placement:
        """``placement`` on the GPUs that holding engines which pick them gave the attempt's
        holds (where it was launched, found again after a restart)."""
        chosen = {h.rank: h.devices for m in self.holding.values() if m.chooses_devices
                  for h in m.holds() if (h.job_id, h.attempt) == (str(job.id), attempt)
                  and h.devices}
        return given(placement, chosen) if chosen else placement

    def sweep(self) -> None:
        """Remove the holds whose attempt their launcher says does not live."""
        held: dict[str, set[Attempt]] = {}
        for member in self.holding.values():
            for h in member.holds():
                held.setdefault(h.launcher, set()).add((h.job_id, h.attempt))
        with self._lock:
            unknown = {launcher: keys - self._launching - self._live
                       for launcher, keys in held.items()}
        for launcher, keys in unknown.items():
            member = self.members.get(launcher)
            if not keys or not isinstance(member, Attesting):
                continue  # kept: no one can say that its attempt ended
            try:
                alive = member.live_attempts(sorted(keys))
            except BackendError as exc:  # asked again at the next pass
                log.warning("cannot ask %s which attempts live: %s", launcher, exc)
                continue
            with self._lock:
                for key in sorted(keys - alive - self._launching - self._live):
                    log.info("removing the holds of attempt %s of job %s: %s does not run it",
                             key[1], key[0], launcher)
                    self._unhold(key)

    def _unhold(self, key: Attempt) -> None:
        for member in self.holding.values():
            member.unhold(*key)
