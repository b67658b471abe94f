"""The smallest backend rota can drive, and its factory: how to add a backend
(docs/architecture.md, "Adding a backend").

``ExampleBackend`` runs each job's command as a plain process of this machine, one replica,
and reports one node of its own with one virtual GPU, as a cluster would; it implements only
the required methods of ``rota.backends.base.Backend`` (no early ends, no offers: those are
optional protocols). ``ExampleFactory`` is what ``rota up --backend example`` would ask once it
is registered (``rota.server.backends.register``): its one option, its inventory, whether its
jobs run here, how it is built, and what ``rota up`` says about it.

It keeps its processes in memory: a restarted control plane finds every launch of an earlier
one lost (``adopt``), which a real backend must not do.
"""

from __future__ import annotations

import signal as signals
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from rota.backends.base import (
    Activity, BackendError, Capabilities, Handle, LaunchSpec, ReplicaHandle, ReplicaState,
    ReplicaStatus, Status,
)
from rota.backends.gpus import local_node
from rota.control import setup
from rota.core import InvalidSpec, Job, Node, Placement

NAME = "example"


class ExampleBackend:
    name = NAME

    def __init__(self, data_dir: Path, node_name: str) -> None:
        self.logs = Path(data_dir) / "example-logs"
        self.logs.mkdir(exist_ok=True)
        self.node = local_node(name=node_name, gpus="1xH100-80GB")
        self._procs: dict[str, subprocess.Popen] = {}  # launch id -> its process

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(fractional_gpu=False, memory_enforcement=False,
                            compute_enforcement=False, gang=False, signals=True)

    def inventory(self) -> list[Node]:
        return [self.node]

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle:
        launch_id = f"{job.id}.{attempt}"
        if launch_id not in self._procs:
            with open(self.logs / f"{launch_id}.stdout", "wb") as out, \
                    open(self.logs / f"{launch_id}.stderr", "wb") as err:
                self._procs[launch_id] = subprocess.Popen(
                    spec.command, cwd=spec.workdir, env=dict(spec.env), stdout=out, stderr=err,
                    stdin=subprocess.DEVNULL, start_new_session=True)
        (replica,) = placement.replicas
        return Handle(NAME, job.id, launch_id, (ReplicaHandle(0, replica.node,
                                                              replica.devices),),
                      attempt=attempt)

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None:
        return None  # nothing outlives the process that launched it

    def adopt(self, handle: Handle) -> Status:
        if handle.backend != NAME:
            raise BackendError("foreign_handle", f"not an {NAME} handle: {handle.backend}")
        return self.poll([handle])[0]

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        return [Status((self._status(h),)) for h in handles]

    def _status(self, handle: Handle) -> ReplicaStatus:
        proc = self._procs.get(handle.launch_id)
        if proc is None:
            return ReplicaStatus(0, ReplicaState.LOST)
        code = proc.poll()
        if code is None:
            return ReplicaStatus(0, ReplicaState.RUNNING)
        if code < 0:  # killed by signal -code
            return ReplicaStatus(0, ReplicaState.EXITED, 128 - code, signal=-code)
        return ReplicaStatus(0, ReplicaState.EXITED, code)

    def signal(self, handle: Handle, sig: int) -> None:
        proc = self._procs.get(handle.launch_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def cancel(self, handle: Handle, grace_s: float) -> None:
        self.signal(handle, int(signals.SIGTERM) if grace_s > 0 else int(signals.SIGKILL))

    def activity(self, handles: Sequence[Handle]) -> list[Activity]:
        return [Activity() for _ in handles]

    def notify(self, handle: Handle, message: str) -> None:
        pass  # no place of its own for a message

    def watch(self, wake: Callable[[], None]) -> None:
        pass  # the loop's periodic pass sees ends

    def unwatch(self) -> None:
        pass

    def endpoint(self, handle: Handle) -> str | None:
        return None

    def read_log(self, handle: Handle, rank: int, stream: str, offset: int) -> Iterator[bytes]:
        if stream not in ("stdout", "stderr"):
            raise InvalidSpec("stream", f"must be stdout or stderr, got {stream!r}")
        path = self.logs / f"{handle.launch_id}.{stream}"
        if path.exists():
            with open(path, "rb") as f:
                f.seek(offset)
                yield f.read()


class ExampleFactory:
    """``--example-node NAME``: the name of its one node."""

    name = NAME
    runs_here = False  # its node is its own, not this machine
    flags: Mapping[str, Any] = {"--example-node": "example-1"}
    fields: Mapping[str, str] = {"node": "--example-node"}

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        node = values.get("--example-node") or "example-1"
        if not node.isascii() or not node.replace("-", "").isalnum():
            raise InvalidSpec("--example-node", f"must be letters, digits and -, got {node!r}")
        return {"node": node}

    def inventory(self, values: Mapping[str, Any]) -> setup.Inventory:
        return setup.elsewhere(f"not used: jobs run on the {NAME} backend's node")

    def build(self, config) -> ExampleBackend:
        return ExampleBackend(config.data_dir, config.backend_options.get("node", "example-1"))

    def describe(self, plane) -> list[str]:
        return [f"  backend {NAME}: node {plane.loop.backend.node.name}"]

    def standby_refusal(self, config) -> str | None:
        return f"the {NAME} backend keeps its launches in its own data directory"
