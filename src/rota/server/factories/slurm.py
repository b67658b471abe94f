"""The Slurm backend's factory: jobs run on the cluster ``SLURM_CONF`` names
(``rota.backends.slurm``), whose nodes, GPUs and other users' jobs are read from Slurm; this
machine only runs the control plane."""

from __future__ import annotations

from typing import Any, Mapping

from rota.backends.base import Backend
from rota.control import setup
from rota.core.datadir import SLURM_INSTANCE


class SlurmFactory:
    name = "slurm"
    runs_here = False
    flags: Mapping[str, Any] = {"--slurm-gpu-types": None, "--slurm-placement": "rota",
                                "--slurm-partition": None, "--slurm-accounts": None}
    fields: Mapping[str, str] = {"slurm-gpu-types": "--slurm-gpu-types",
                                 "slurm-placement": "--slurm-placement",
                                 "slurm-partition": "--slurm-partition",
                                 "slurm-accounts": "--slurm-accounts"}

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"gpu_types": values.get("--slurm-gpu-types") or "",
                "placement": values.get("--slurm-placement") or "rota",
                "partition": values.get("--slurm-partition") or "",
                "accounts": values.get("--slurm-accounts") or ""}

    def inventory(self, values: Mapping[str, Any]) -> setup.Inventory:
        return setup.elsewhere("not used: jobs run on the Slurm cluster")

    def build(self, config) -> Backend:
        from rota.backends.slurm.config import build
        return build(config.data_dir, config.backend_options)

    def describe(self, plane) -> list[str]:
        return plane.loop.backend.describe(plane.jobs_url)

    def standby_refusal(self, config) -> str | None:
        """A standby must use the leader's Slurm instance (the comment of rota's Slurm jobs),
        or it would take the leader's jobs for another installation's."""
        if (config.data_dir / SLURM_INSTANCE).exists():
            return None
        return (f"a Slurm standby uses the Slurm instance of the control plane that leads: "
                f"copy {SLURM_INSTANCE} from that one's data directory into "
                f"{config.data_dir} first")
