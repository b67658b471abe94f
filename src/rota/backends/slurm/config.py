"""What a site tells rota about its Slurm cluster, checked; and the backend built from it.

``rota up --backend slurm`` passes its Slurm options as text (``ServerConfig.backend_options``);
``parse_options`` turns them into a ``SlurmConfig``, refusing a bad value with the option's
name:

- ``gpu_types`` (``--slurm-gpu-types``): ``h100=H100-80GB,a100=A100:40Gi``, the model and
  memory of each Slurm GPU type (``untyped=T4-16GB`` for GPUs declared as plain ``gpu:N``);
- ``placement`` (``--slurm-placement``): ``rota`` (rota chooses the nodes and pins the job
  there; the default) or ``slurm`` (rota admits and orders, Slurm chooses the nodes);
- ``partition`` (``--slurm-partition``): the partition rota's jobs go to (default: Slurm's),
  unless their queue names one (``rota.core.batchopts``);
- ``accounts`` (``--slurm-accounts``): ``vision=cv-lab,nlp=nlp-lab``, the Slurm account of
  each project's jobs (``--account``); a project not listed runs under the account of its own
  name.

``build(data_dir, options)`` (what ``rota.server.factories.slurm`` builds with) checks that Slurm
answers before the control plane starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from rota.backends.slurm.nodes import GpuType, parse_gpu_types
from rota.core import DEFAULT_GROUP, InvalidSpec
from rota.core.batchopts import check_name

if TYPE_CHECKING:
    from rota.backends.slurm.backend import SlurmBackend

PLACEMENTS = ("rota", "slurm")
UNTYPED = "untyped"
OPTIONS = {"gpu_types": "slurm-gpu-types", "placement": "slurm-placement",
           "partition": "slurm-partition", "accounts": "slurm-accounts"}


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    gpu_types: Mapping[str, GpuType] = field(default_factory=dict)
    placement: str = "rota"
    partition: str | None = None
    accounts: Mapping[str, str] = field(default_factory=dict)  # project -> Slurm account
    resource_group: str = DEFAULT_GROUP
    reservation_lead_s: float = 3600.0  # a reservation closes its nodes this long before it
    node_refresh_s: float = 5.0         # how old node states may be when jobs are polled

    @property
    def pinned(self) -> bool:
        return self.placement == "rota"

    def account(self, project: str) -> str:
        """The Slurm account of ``project``'s jobs: the one mapped to it, else its name."""
        return self.accounts.get(project, project)


def parse_options(options: Mapping[str, str]) -> SlurmConfig:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidSpec(unknown[0], f"is not a Slurm option; known: {', '.join(OPTIONS)}")
    placement = options.get("placement") or "rota"
    if placement not in PLACEMENTS:
        raise InvalidSpec(OPTIONS["placement"], f"must be rota or slurm, got {placement!r}")
    partition = options.get("partition") or None
    if partition is not None and not partition.replace("-", "").replace("_", "").isalnum():
        raise InvalidSpec(OPTIONS["partition"], f"is not a partition name: {partition!r}")
    return SlurmConfig(gpu_types=parse_gpu_type_list(options.get("gpu_types") or ""),
                       placement=placement, partition=partition,
                       accounts=parse_accounts(options.get("accounts") or ""))


def parse_accounts(text: str) -> dict[str, str]:
    """``vision=cv-lab,nlp=nlp-lab`` -> the Slurm account by project."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",") if i.strip()):
        project, sep, account = (p.strip() for p in item.partition("="))
        if not sep or not project or not account:
            raise InvalidSpec(OPTIONS["accounts"], f"expected PROJECT=ACCOUNT items such as "
                                                   f"vision=cv-lab, got {item!r}")
        if project in out:
            raise InvalidSpec(OPTIONS["accounts"], f"names project {project!r} twice")
        try:
            out[project] = check_name(account, OPTIONS["accounts"])
        except InvalidSpec as exc:
            raise InvalidSpec(OPTIONS["accounts"], f"account of project {project!r}: "
                                                   f"{exc.reason}") from None
    return out


def parse_gpu_type_list(text: str) -> dict[str, GpuType]:
    """``h100=H100-80GB,untyped=T4-16GB`` -> GPU types by Slurm GRES type."""
    table: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",") if i.strip()):
        key, sep, model = item.partition("=")
        if not sep or not key.strip() or not model.strip():
            raise InvalidSpec(OPTIONS["gpu_types"], f"expected TYPE=MODEL-<memory>GB items such "
                                                    f"as h100=H100-80GB, got {item!r}")
        key = key.strip()
        table["" if key == UNTYPED else key] = model.strip()
    return parse_gpu_types(table, OPTIONS["gpu_types"])


def build(data_dir: Path, options: Mapping[str, str]) -> SlurmBackend:
    """The Slurm backend of a control plane with this data directory and these options, once
    Slurm answers."""
    from rota.backends.slurm.backend import SlurmBackend
    from rota.backends.slurm.commands import SlurmCommands, SlurmCommandError

    commands = SlurmCommands.from_environment()
    where = f"SLURM_CONF={commands.slurm_conf}" if commands.slurm_conf else (
        "Slurm's default configuration (SLURM_CONF is not set)")
    if commands.slurm_conf and not Path(commands.slurm_conf).is_file():
        raise InvalidSpec("backend", f"slurm: {where} names no file")
    try:
        commands.run(("scontrol", "ping"))
    except SlurmCommandError as exc:
        raise InvalidSpec("backend", f"slurm: Slurm does not answer through {where}: "
                                     f"{exc}") from None
    return SlurmBackend(data_dir, parse_options(options), commands)
