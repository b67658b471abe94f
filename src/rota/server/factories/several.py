"""The factory of several backends at once (``rota up --backend slurm,kubernetes``): one
control plane whose jobs run through each of them, over one inventory
(``rota.backends.several``).

It is made from its members' factories, in the order they were named, and asks each the same
questions composition asks a single one:

- ``flags`` and ``fields``: every member's; ``options(values)``: each member's options, by
  member name (``ServerConfig.backend_options``);
- ``inventory(values)``: this machine as the member whose jobs run here says (local), else a
  machine that runs only the control plane; ``runs_here``: a member's jobs run here;
- ``build(config)``: each member built from the configuration it would have alone (its own
  name and options), then the composite of them;
- ``describe(plane)``: which backends there are, then each member's lines as it says them
  alone;
- ``standby_refusal(config)``: the first member's refusal, naming it: a standby must be able
  to adopt the jobs of every member.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

from rota.backends.base import Backend
from rota.control import setup
from rota.core import InvalidSpec
from rota.server.factory import BackendFactory

SEPARATOR = ","  # between the names of ``rota up --backend slurm,kubernetes``


class SeveralFactory:
    def __init__(self, members: Sequence[BackendFactory]) -> None:
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise InvalidSpec("backend", f"names a backend twice: {SEPARATOR.join(names)}")
        self.members = tuple(members)
        self.name = SEPARATOR.join(names)
        self.runs_here = any(m.runs_here for m in members)
        self.flags: Mapping[str, Any] = {k: v for m in members for k, v in m.flags.items()}
        self.fields: Mapping[str, str] = {k: v for m in members for k, v in m.fields.items()}

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {m.name: m.options(values) for m in self.members}

    def inventory(self, values: Mapping[str, Any]) -> setup.Inventory:
        here = [m for m in self.members if m.runs_here]
        if here:
            return here[0].inventory(values)
        return setup.elsewhere(f"not used: jobs run on the clusters of {', '.join(self._names)}")

    def build(self, config) -> Backend:
        from rota.backends.several import several
        return several([m.build(self._alone(config, m)) for m in self.members])

    def describe(self, plane) -> list[str]:
        backend = plane.loop.backend
        lines = [f"  backends: {', '.join(self._names)}, one node per machine name; a job "
                 "asks for one with the selector rota.dev/engine-NAME: \"true\""]
        for member in self.members:
            alone = SimpleNamespace(config=self._alone(plane.config, member),
                                    loop=SimpleNamespace(backend=backend.members[member.name]),
                                    jobs_url=plane.jobs_url, url=plane.url)
            lines += member.describe(alone)
        return lines

    def standby_refusal(self, config) -> str | None:
        for member in self.members:
            reason = member.standby_refusal(self._alone(config, member))
            if reason is not None:
                return f"--backend {member.name}: {reason}"
        return None

    @property
    def _names(self) -> list[str]:
        return [m.name for m in self.members]

    @staticmethod
    def _alone(config, member: BackendFactory):
        """``config`` as ``member`` alone would have it: its name and its own options."""
        return replace(config, backend=member.name,
                       backend_options=config.backend_options.get(member.name, {}))
