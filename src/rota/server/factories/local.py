"""The local backend's factory: jobs run as processes on this machine (``rota.backends.local``).

Its options are each job's limits (``--job-pids``, ``--job-disk``) and this machine's
inventory (``--gpus``, ``--node-file``, else NVML); it is the one backend whose jobs run here.
"""

from __future__ import annotations

from typing import Any, Mapping

from rota.backends.base import Backend
from rota.backends.cgroups import DEFAULT_PIDS
from rota.control import setup
from rota.core import InvalidSpec, parse_memory_mib


class LocalFactory:
    """No standby: its jobs are processes of this machine, which no other can adopt."""

    name = "local"
    runs_here = True
    flags: Mapping[str, Any] = {"--gpus": None, "--node-file": None,
                                "--job-pids": DEFAULT_PIDS, "--job-disk": None}
    fields: Mapping[str, str] = {}

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {"job_pids": values.get("--job-pids", DEFAULT_PIDS)}
        disk = values.get("--job-disk")
        if disk is not None:
            try:
                options["job_disk_mib"] = parse_memory_mib(disk, "")
            except InvalidSpec as exc:
                raise InvalidSpec("--job-disk", exc.reason) from None
            if options["job_disk_mib"] <= 0:
                raise InvalidSpec("--job-disk", f"must be more than 0, got {disk!r}")
        return options

    def inventory(self, values: Mapping[str, Any]) -> setup.Inventory:
        gpus, node_file = values.get("--gpus"), values.get("--node-file")
        if gpus and node_file:
            raise InvalidSpec("--gpus", "give --gpus or --node-file, not both")
        try:
            return setup.this_machine(gpus, node_file)
        except InvalidSpec as exc:
            reason = f"{exc.field}: {exc.reason}" if exc.field else exc.reason
            raise InvalidSpec("--node-file" if node_file else "--gpus", reason) from None

    def build(self, config) -> Backend:
        from rota.backends.local import LocalBackend
        options = config.backend_options
        return LocalBackend(config.data_dir, node=config.inventory.node,
                            nvml=config.inventory.nvml,
                            job_pids=int(options.get("job_pids", DEFAULT_PIDS)),
                            job_disk_mib=options.get("job_disk_mib"))

    def describe(self, plane) -> list[str]:
        """This machine, and whether the cgroup limits of each job hold (a warning if not)."""
        inventory = plane.config.inventory
        said = plane.loop.backend.limits_enforced()
        limits = ("  warning: jobs' CPU, memory and process limits are " if
                  said.startswith("not enforced") else
                  "  jobs' CPU, memory and process limits: ") + said
        return [f"  this machine: {inventory.node.name}, {inventory.source}", limits]

    def standby_refusal(self, config) -> str | None:
        return ("the local backend's jobs are processes of the machine that leads, which "
                "another control plane cannot adopt; restart that one instead")
