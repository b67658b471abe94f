"""The local backend's factory: jobs run as processes on this machine (``rota.backends.local``),
in a container image through podman for a job that names one (``rota.backends.localimage``).

Its options are each job's limits (``--job-pids``, ``--job-disk``), this machine's
inventory (``--gpus``, ``--node-file``, else NVML), its dataset cache (``--dataset-cache``
DIR, default ``<data dir>/dataset-cache``; ``--dataset-cache-size``, default 100Gi or half the
space free on its file system where that is less;
``--dataset-bandwidth``, bytes per second a copy may take, default no bound:
``rota.backends.datacache``), and a MIG plan (``--mig-plan FILE``:
``rota.control.migcalendar.load_plan``) carried out on this machine's GPUs through NVML
(``attach``: ``rota.control.migswitch``); it is the one backend whose jobs run here.

Virtual GPUs declared with ``--gpus`` are remembered in the data directory (``local-gpus``)
and declared again by a ``rota up`` that names neither ``--gpus`` nor ``--node-file``, which
says so: a restart keeps the machine it had. ``--gpus none`` forgets them (NVML is asked).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from rota.backends.base import Backend
from rota.backends.cgroups import DEFAULT_PIDS
from rota.control import setup
from rota.core import InvalidSpec, parse_memory_mib
from rota.core.datadir import LOCAL_GPUS
from rota.core.datasets import human_bytes, parse_bytes


class LocalFactory:
    """No standby: its jobs are processes of this machine, which no other can adopt."""

    name = "local"
    runs_here = True
    flags: Mapping[str, Any] = {"--gpus": None, "--node-file": None,
                                "--job-pids": DEFAULT_PIDS, "--job-disk": None,
                                "--mig-plan": None, "--dataset-cache": None,
                                "--dataset-cache-size": None, "--dataset-bandwidth": None}
    fields: Mapping[str, str] = {}

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {"job_pids": values.get("--job-pids", DEFAULT_PIDS)}
        if values.get("--gpus"):  # remembered (or forgotten: none) once the plane is built
            options["gpus"] = values["--gpus"].strip()
        disk = values.get("--job-disk")
        if disk is not None:
            try:
                options["job_disk_mib"] = parse_memory_mib(disk, "")
            except InvalidSpec as exc:
                raise InvalidSpec("--job-disk", exc.reason) from None
            if options["job_disk_mib"] <= 0:
                raise InvalidSpec("--job-disk", f"must be more than 0, got {disk!r}")
        if values.get("--mig-plan") is not None:
            from rota.control.migcalendar import load_plan
            try:
                options["mig_plan"] = load_plan(values["--mig-plan"])
            except InvalidSpec as exc:
                raise InvalidSpec("--mig-plan", f"{exc.field}: {exc.reason}") from None
        return {**options, **_cache_options(values)}

    def inventory(self, values: Mapping[str, Any]) -> setup.Inventory:
        gpus, node_file = values.get("--gpus"), values.get("--node-file")
        if gpus and node_file:
            raise InvalidSpec("--gpus", "give --gpus or --node-file, not both")
        data_dir = values.get("--data-dir")
        kept = None if data_dir is None else Path(data_dir) / LOCAL_GPUS
        remembered = False
        if gpus is not None and gpus.strip().lower() == "none":
            gpus = None
        elif gpus is None and node_file is None and kept is not None and kept.is_file():
            gpus, remembered = kept.read_text().strip() or None, True
        if values.get("--mig-plan") is not None and (gpus or node_file):
            raise InvalidSpec("--mig-plan", "switches MIG geometries through NVML, so this "
                                            "machine's GPUs must come from NVML: give neither "
                                            "--gpus nor --node-file")
        try:
            found = setup.this_machine(gpus, node_file)
        except InvalidSpec as exc:
            reason = f"{exc.field}: {exc.reason}" if exc.field else exc.reason
            if remembered:
                reason += f" (remembered in {kept}; rota up --gpus SPEC or --gpus none)"
            raise InvalidSpec("--node-file" if node_file else "--gpus", reason) from None
        if values.get("--mig-plan") is not None and found.nvml is None:
            raise InvalidSpec("--mig-plan", "no NVIDIA GPU found through NVML: nothing to "
                                            "switch")
        if remembered:
            return replace(found, source=f"{found.source}, as the last rota up --gpus declared "
                                         "them (--gpus none forgets them)")
        return found

    def build(self, config) -> Backend:
        """The backend; the --gpus given is remembered here, where the data directory is the
        control plane's (nothing is written for a start refused before)."""
        from rota.backends.datacache import DataCache, default_capacity
        from rota.backends.local import LocalBackend
        options = config.backend_options
        spec, kept = options.get("gpus"), Path(config.data_dir) / LOCAL_GPUS
        if spec and spec.lower() == "none":
            kept.unlink(missing_ok=True)
        elif spec:
            kept.write_text(spec + "\n")
        cache = options.get("dataset_cache") or Path(config.data_dir) / DATASET_CACHE
        return LocalBackend(config.data_dir, node=config.inventory.node,
                            nvml=config.inventory.nvml,
                            job_pids=int(options.get("job_pids", DEFAULT_PIDS)),
                            job_disk_mib=options.get("job_disk_mib"),
                            dataset_cache=DataCache(
                                cache, options.get("dataset_cache_bytes") or
                                default_capacity(cache), options.get("dataset_bandwidth")))

    def attach(self, loop, config) -> None:
        """Carry out the MIG plan, if one was given, before each pass's inventory."""
        plan = config.backend_options.get("mig_plan")
        if plan is None or config.inventory.nvml is None:  # refused by ``inventory``
            return
        from rota.control.migswitch import MigSwitcher, install
        install(loop, MigSwitcher(plan, config.inventory.nvml, loop.backend, loop.store))

    def describe(self, plane) -> list[str]:
        """This machine, whether the cgroup limits of each job hold (a warning if not), and
        whether jobs that name a container image run here (podman), or why not."""
        inventory = plane.config.inventory
        said = plane.loop.backend.limits_enforced()
        limits = ("  warning: jobs' CPU, memory and process limits are " if
                  said.startswith("not enforced") else
                  "  jobs' CPU, memory and process limits: ") + said
        podman = plane.loop.backend.podman()
        images = ("  container images: " if podman.works else
                  "  container images (image:) are refused: ") + podman.label()
        cache = plane.loop.backend.data.cache
        return [f"  this machine: {inventory.node.name}, {inventory.source}", limits, images,
                f"  dataset cache: {cache.root}, {human_bytes(cache.capacity)}"]

    def standby_refusal(self, config) -> str | None:
        return ("the local backend's jobs are processes of the machine that leads, which "
                "another control plane cannot adopt; restart that one instead")


DATASET_CACHE = "dataset-cache"


def _cache_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """``--dataset-cache``, ``--dataset-cache-size`` and ``--dataset-bandwidth``, checked."""
    out: dict[str, Any] = {}
    if values.get("--dataset-cache"):
        path = Path(values["--dataset-cache"]).expanduser()
        if not path.is_absolute():
            path = path.resolve()
        out["dataset_cache"] = str(path)
    for option, key in (("--dataset-cache-size", "dataset_cache_bytes"),
                        ("--dataset-bandwidth", "dataset_bandwidth")):
        text = values.get(option)
        if text is None:
            continue
        try:
            out[key] = parse_bytes(str(text).removesuffix("/s"), "")
        except InvalidSpec as exc:
            raise InvalidSpec(option, exc.reason) from None
        if out[key] <= 0:
            raise InvalidSpec(option, f"must be more than 0, got {text!r}")
    return out
