"""Which backend a control plane drives: the registry of backend factories, by name.

``FACTORIES`` maps the name ``rota up --backend`` takes to a ``BackendFactory``
(``rota.server.factory``); composition asks the factory of the chosen name everything that
differs between backends, so that adding a backend is one factory module and one ``register``
call (see docs/architecture.md, "Adding a backend"). Each factory imports its backend only
when it is built.

Several names joined by commas (``slurm,kubernetes``) name one control plane that drives those
backends at once: ``factory_of`` answers with a ``SeveralFactory``
(``rota.server.factories.several``) made of theirs, in that order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from rota.backends.base import Backend
from rota.core import InvalidSpec
from rota.server.factories.kubernetes import KubernetesFactory
from rota.server.factories.local import LocalFactory
from rota.server.factories.several import SEPARATOR, SeveralFactory
from rota.server.factories.slurm import SlurmFactory
from rota.server.factory import BackendFactory

if TYPE_CHECKING:
    from rota.server.compose import ServerConfig

FACTORIES: dict[str, BackendFactory] = {}
DEFAULT_BACKEND = "local"  # what ``rota up`` runs jobs with unless told otherwise


def register(factory: BackendFactory) -> None:
    """Make ``factory`` the one of its ``name``; a name taken by another factory is refused."""
    known = FACTORIES.get(factory.name)
    if known is not None and known is not factory:
        raise InvalidSpec("backend", f"a backend named {factory.name!r} is registered already")
    FACTORIES[factory.name] = factory


def unregister(name: str) -> None:
    FACTORIES.pop(name, None)


def factory_of(name: str) -> BackendFactory:
    factory = FACTORIES.get(name)
    if factory is None and SEPARATOR in name:
        return SeveralFactory([factory_of(part.strip()) for part in name.split(SEPARATOR)])
    if factory is None:
        raise InvalidSpec("backend", f"unknown backend {name!r}; known: "
                                     f"{', '.join(sorted(FACTORIES))}, or several of them "
                                     f"joined by {SEPARATOR!r}")
    return factory


def check_flags(name: str, values: Mapping[str, Any]) -> BackendFactory:
    """The factory of ``name``, once no option of another backend was given (a value other
    than that option's default): ``InvalidSpec`` naming the option and its backend."""
    chosen = factory_of(name)
    for option, value in values.items():
        if option in chosen.flags:
            continue
        owner = next((f for f in FACTORIES.values() if option in f.flags), None)
        if owner is not None and value not in (None, (), [], owner.flags[option]):
            elsewhere = (f"; the {chosen.name} backend's nodes are its cluster's, not this "
                         "machine" if owner.runs_here and not chosen.runs_here else "")
            raise InvalidSpec(option, f"applies only with --backend {owner.name}{elsewhere}")
    return chosen


def build_backend(config: ServerConfig) -> Backend:
    return factory_of(config.backend).build(config)


for _factory in (LocalFactory(), SlurmFactory(), KubernetesFactory()):
    register(_factory)
