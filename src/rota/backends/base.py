"""The protocol every execution backend implements, and the values it exchanges.

Vocabulary:
- A **handle** names one launch of one job (an *attempt*): ``Handle``, plain data that
  round-trips through JSON (``rota.backends.handles``), which the control plane persists
  before acting and hands back after a restart (``adopt``), without looking inside it.
- An **attempt number** (the job's ``attempts`` in the store) makes a launch idempotent:
  ``launch(..., attempt=n)`` never starts attempt ``n`` of a job twice, and ``recover`` finds
  an attempt that was started but whose handle was never saved (the control plane died in
  between). Only an attempt that provably never started is started again. Backends derive the
  names of what they create from (job id, attempt), so that ``recover`` can find it.
- A replica is **running**, **exited** (with an exit code; a replica killed by signal ``s``
  exits with ``128 + s`` and ``signal == s``) or **lost** (nothing runs and nothing recorded
  how it ended: the control plane requeues it).
- **Status comes in bulk**: ``poll(handles)`` answers for every handle at once, so that a pass
  over thousands of running jobs costs the backend one round of questions, not one each. A
  backend that chooses devices or nodes itself reports where the replicas landed
  (``Status.placement``); the control plane records it as the job's placement.
- **Waiting**: a launch that its backend's system holds but has not started (Slurm: a job
  still pending in its queue) is reported with ``Status.waiting``, the system's own reason
  ("Resources", "Priority"), its replicas counted as running (nothing of it ended). A backend
  whose launches may wait so says ``Capabilities.queued``: the control loop keeps such a job
  SCHEDULED (*starting*) until ``poll`` reports it without ``waiting``, and only then counts it
  running. ``Status.displaced`` says that it waits because work outside rota holds the
  devices it was placed on: the control loop takes it back and places it again.
- **Logs come from the backend** (``read_log``), so that the API never opens a file itself.
- **Activity** (``activity``): what the backend can see of a launch for idle reclamation: its
  GPUs' utilisation and when it last wrote output (None where it cannot see either);
  ``notify`` puts a line from rota where the job's owner reads its output.
- **Capabilities** are what a backend can enforce; the control plane and the CLI read them
  instead of guessing from the backend's name. The scheduler reads them as *node features*
  (``Node.features``, ``rota.core.nodes``), which each backend sets on every node it reports,
  per node where nodes differ (Kubernetes: GPU sharing only where HAMi runs; Slurm: only
  where the node has shards); ``Capabilities.features`` is the mapping for a backend whose
  nodes are all alike.
- A **launch request** (``LaunchSpec``) is what to run: the command, its working directory, the
  job's own environment, the OS account it runs as (``RunAs``; None: the account of the
  control plane itself, which only a single-user control plane uses) and the container image
  it names (None: none). A backend that runs commands on its hosts refuses an image; one that
  runs containers (``Capabilities.containers``) takes the working directory as a path in the
  image and prepares nothing on this machine. ``port`` asks for a server's port: the job's
  command listens on ``ROTA_PORT``, and ``endpoint(handle)`` says where rota reaches it
  (``host:port`` of rank 0; services, ``rota.control.serving``, route requests there).
- An **offer** (``Offer``) is work that already exists in a backend and asks rota to schedule
  it (Kubernetes: Pods that users created with ``schedulerName: rota``). A backend that has
  such work implements ``Offering``; the control loop submits each offer once, as a job
  labelled ``OFFER_LABEL: <key>``, and the backend's ``launch`` of that job starts the work
  that was offered instead of creating new work.

- An **early end** (``reported``) is an attempt's own word that it ended, sent from inside it
  before the backend's system says so (a Slurm batch script reports its status and keeps its
  allocation until rota answered, so that the next job is queued on its GPUs before they
  free up). A backend that takes it reports the attempt exited with that code from its next
  ``poll`` on, while its system finishes the attempt; its system stays the truth: once it
  reports the end itself, that is what ``poll`` says, and an attempt it still runs
  ``REPORT_TRUST_S`` after the report is named by ``overdue`` for the control loop to stop.
  A backend keeps the word until its system confirms the end, across a restart of the
  control plane (which counts the attempt ended already): ``overdue`` names it then too. A
  backend whose system reports ends at once (local processes, Pods) takes no such word: only
  a backend that implements ``EarlyEnding`` does.
- A **takeover** is a control plane that starts leading after another one, with a data
  directory of its own, died or froze (a standby, ``rota.control.standby``). A backend whose
  ``recover`` trusts files of its data directory to say that an attempt was never launched
  implements ``Succeeding``: while told that it takes over, ``recover`` asks its system
  (Slurm: the attempt's name in ``squeue``/``sacct``) instead, so that an attempt the other
  control plane launched without recording it is found, never launched again.

- An **interactive stream** (``Channel``) is a duplex byte stream to something inside a
  running replica, for ``rota exec``, ``rota shell`` and ``rota forward``. A backend that
  opens them (``Interactive``; ``Capabilities.interactive``) gives ``open_exec(handle, rank,
  argv, tty)``: ``argv`` run inside replica ``rank`` as the job's owner, with the job's
  environment and devices, in its working directory, on a terminal of its own when ``tty``
  (without one, its stderr is merged into the stream, after its stdout as written); and
  ``open_port(handle, rank, port)``: a TCP connection to ``port`` where replica ``rank``
  listens. Faults (no such replica, a job that does not run, a refused port) are
  ``BackendError`` with a message that says what to do.

- A **dataset cache** holds, on a node, copies of the datasets jobs name. A backend whose
  nodes have one (``DatasetCaching``; ``Capabilities.datasets``) copies a launch's
  ``LaunchSpec.datasets`` there before it starts, gives the job ``ROTA_DATASETS``, never
  evicts what a running launch reads, and reports each node's copies (``dataset_caches``),
  which the control loop records with the inventory.

Backends report outcomes as ``Status`` values; ``BackendError`` is for faults (a handle from
another backend, a process that cannot be started) and carries a stable ``code``.
"""

from __future__ import annotations

import enum
import signal as signals
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from rota.backends.handles import Handle, ReplicaHandle  # noqa: F401 - the protocol's values
from rota.core import End, InvalidSpec, Job, Node, Placement, RotaError
from rota.core.datasets import Dataset
from rota.core.mounts import Volume
from rota.core.nodes import (
    CONTAINERS, GPU_COMPUTE_LIMIT, GPU_MEMORY_LIMIT, GPU_SHARING, SIGNALS,
)


class BackendError(RotaError):
    """A backend could not do what it was asked. ``code`` is stable, e.g. ``foreign_node``."""

    code = "backend_error"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Capabilities:
    fractional_gpu: bool       # several jobs may share one device
    memory_enforcement: bool   # a job over its GPU-memory share is stopped
    compute_enforcement: bool  # a job's compute share is capped (MPS daemon running)
    gang: bool                 # all replicas of a job start together
    signals: bool              # arbitrary signals reach the job (checkpoint on SIGUSR1, ...)
    run_as_owner: bool = False  # jobs run under their owner's OS account, not the control plane's
    containers: bool = False   # jobs run in container images elsewhere: a workdir is a path in
                               # the image, and nothing of this machine's files is carried
    walltime: bool = False     # the backend's system itself sends the checkpoint signal before a
                               # job's walltime and stops it at the limit (Slurm's --time and
                               # --signal): the control loop then sends neither
    queued: bool = False       # a launch may wait in the backend's system before it runs
                               # (``Status.waiting``): its job stays SCHEDULED until it runs;
                               # otherwise a launch runs once ``launch`` returns
    interactive: bool = False  # commands and ports inside running replicas can be reached
                               # (``Interactive``: rota exec, shell and forward)
    datasets: bool = False     # nodes cache the datasets a job names and the job finds them at
                               # $ROTA_DATASETS/<name> (``rota.backends.datacache``)

    @property
    def features(self) -> frozenset[str]:
        """The node features (``rota.core.nodes``) these capabilities amount to on a node."""
        return frozenset(name for name, on in (
            (GPU_SHARING, self.fractional_gpu), (GPU_MEMORY_LIMIT, self.memory_enforcement),
            (GPU_COMPUTE_LIMIT, self.compute_enforcement), (SIGNALS, self.signals),
            (CONTAINERS, self.containers)) if on)


@dataclass(frozen=True, slots=True)
class RunAs:
    """The OS account a job runs as: its user and primary group ids and its supplementary
    groups, its home directory and login shell (the job's HOME and SHELL)."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    home: str = "/"
    shell: str = "/bin/sh"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """What one attempt runs: ``command`` (argv) in ``workdir`` with the job's own ``env`` on
    top of what the backend sets, as ``run_as`` (None: the control plane's own account), in the
    container ``image`` (None: none named). ``checkpoint_signal`` and ``grace_s`` (None: the
    job's own grace period) are how the job is warned before it is stopped, for a backend that
    stops a job at its walltime by itself (Slurm's ``--signal``)."""

    command: tuple[str, ...]
    workdir: str
    env: Mapping[str, str] = field(default_factory=dict)
    run_as: RunAs | None = None
    checkpoint_signal: int = int(signals.SIGTERM)
    grace_s: float | None = None
    image: str | None = None
    port: int | None = None  # a server's port (ROTA_PORT): a number, 0: any the backend
                             # finds free on the replica's host; None: the job serves nothing
    disk_mib: int | None = None  # what the working directory may hold (None: the backend's
                                 # default, if it has one)
    volumes: tuple[Volume, ...] = ()  # claims mounted in the container (containers only)
    shm_mib: int | None = None        # /dev/shm's size in the container (containers only)
    # partition, qos, reservation, constraint (``rota.core.batchopts``): a backend that
    # submits to a batch system passes them on; the others ignore them
    batch: Mapping[str, str] = field(default_factory=dict)
    # the datasets the job reads (copied into its nodes' caches before it starts), and the
    # cache keys live jobs name (``rota.core.datasets``: evicted last)
    datasets: tuple[Dataset, ...] = ()
    datasets_wanted: frozenset[str] = frozenset()


DEFAULT_SERVICE_PORT = 8000  # ROTA_PORT where a replica has an address of its own (a Pod)
REPORT_TRUST_S = 30.0  # how long an attempt reported ended may still run in its backend


@dataclass(frozen=True, slots=True)
class Activity:
    """What a launch was seen doing: the utilisation of its GPUs now (percent, averaged over
    its devices; its own processes' share on a shared device), and when it last wrote output
    (seconds since the epoch). None: the backend cannot see it."""

    gpu_util: float | None = None
    last_output_at: float | None = None


class ReplicaState(enum.StrEnum):
    RUNNING = "running"
    EXITED = "exited"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """``exit_code`` is ``None`` while running, when lost, and for a replica stopped before its
    command started; ``reason`` says why it was stopped (cancelled, over its GPU memory, ...);
    ``finished_at`` is when an exited replica ended (seconds since the epoch), when known.
    ``cause`` says which fault of the infrastructure lost a replica, where the backend knows:
    ``End.GPU_UNHEALTHY``, or ``End.PREEMPTED`` when the site took it back (an eviction, no
    fault: the job is requeued as preempted); otherwise a lost replica counts as
    ``End.NODE_LOST``. An exited
    replica's ``End.WALLTIME``: the backend's system stopped it at its walltime. ``max_rss_kib``:
an exited replica's peak resident memory in KiB, where its backend tells it (local: its
largest process's, from the kernel's resource usage)."""

    rank: int
    state: ReplicaState
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    finished_at: float | None = None
    cause: End | None = None
    max_rss_kib: int | None = None  # an exited replica's peak resident memory, where known


@dataclass(frozen=True, slots=True)
class Status:
    """What a job's replicas are doing. ``state`` sums them up: lost when any replica is lost,
    exited when all have exited, running otherwise. ``placement`` is where the replicas run
    when the backend chose that itself (Slurm picks the devices on each node, or the nodes
    too) and it differs from the placement the launch was given; None: as given.
    ``waiting``: the backend's system holds the launch but has not started it, and why, in
    the system's words (Slurm's pending reason); None: it runs (or ended). ``displaced``: it
    waits because work outside rota holds the devices it was placed on, and which (None:
    not known to)."""

    replicas: tuple[ReplicaStatus, ...]
    placement: Placement | None = None
    waiting: str | None = None
    displaced: str | None = None

    @property
    def state(self) -> ReplicaState:
        states = {r.state for r in self.replicas}
        if ReplicaState.LOST in states:
            return ReplicaState.LOST
        if states == {ReplicaState.EXITED}:
            return ReplicaState.EXITED
        return ReplicaState.RUNNING

    @property
    def exit_codes(self) -> tuple[int | None, ...]:
        return tuple(r.exit_code for r in self.replicas)

    @property
    def succeeded(self) -> bool:
        return self.state is ReplicaState.EXITED and all(c == 0 for c in self.exit_codes)

    @property
    def max_rss_kib(self) -> int | None:
        """The largest peak resident memory of a replica, in KiB (None: none known)."""
        known = [r.max_rss_kib for r in self.replicas if r.max_rss_kib is not None]
        return max(known) if known else None

    @property
    def finished_at(self) -> float | None:
        """When the last replica ended, if nothing runs and every end time is known."""
        ends = [r.finished_at for r in self.replicas]
        if self.state is ReplicaState.RUNNING or not ends or None in ends:
            return None
        return max(e for e in ends if e is not None)


OFFER_LABEL = "rota.offer"  # the label of a job submitted for an offer: the offer's key


def offer_key(job: Job) -> str | None:
    """The key of the offer ``job`` was submitted for (its ``OFFER_LABEL``); None for a job
    submitted otherwise."""
    return dict(job.labels).get(OFFER_LABEL)


@dataclass(frozen=True, slots=True)
class Offer:
    """Work a backend holds that asks rota to schedule it. ``key`` names it in its backend,
    the same across restarts; ``job`` is what to submit (its id, state and placement are
    ignored; its labels get ``OFFER_LABEL: key``), ``name`` the job's name and ``run`` its
    ``run`` mapping (what people see of its command)."""

    key: str
    job: Job
    name: str = ""
    run: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Offering(Protocol):
    """A backend with work of its own to offer (``Offer``)."""

    def offers(self) -> list[Offer]:
        """The offers that wait now, each until a job was launched for it; cheap (from what
        the backend keeps current), so that the control loop may ask every pass."""

    def decline(self, offer: Offer, reason: str) -> None:
        """The offer could not be submitted as a job, for ``reason``; tell its maker."""


@runtime_checkable
class EarlyEnding(Protocol):
    """A backend that takes an attempt's own word that it ended (an early end, see the module
    docstring) and leaves launches to finish in the background (Slurm). The control loop checks
    for it once; a backend whose system reports an attempt's end at once (local processes,
    Pods) does not implement it: it takes no report, none is ever overdue, and a launch is
    complete when ``launch`` returns."""

    def reported(self, handle: Handle, exit_code: int,
                 replicas: tuple[int, ...] | None = None) -> bool:
        """The attempt says every replica of it ended, the batch with ``exit_code`` and each
        replica with its code in ``replicas`` by rank, where it knows them. True: taken,
        ``poll`` says so from now on; False: the attempt is not one it tracks (nothing
        changes)."""

    def overdue(self) -> list[Handle]:
        """The attempts reported ended that the backend's system still runs
        ``REPORT_TRUST_S`` after their report, each named once: the control loop stops them."""

    def flush_launches(self) -> None:
        """Finish now what the launches made so far left to do in the background (Slurm:
        release the held jobs queued for one ``scontrol release``), so that they are in the
        backend's system when this returns."""


@runtime_checkable
class Channel(Protocol):
    """A duplex byte stream to something inside a running replica (the module docstring)."""

    def read(self, n: int = 65536) -> bytes:
        """At most ``n`` bytes; blocks until some come; ``b""`` at the end of the stream."""

    def write(self, data: bytes) -> None:
        """Send ``data``; ``BackendError`` once the channel is closed."""

    def resize(self, rows: int, cols: int) -> None:
        """A terminal's new size (nothing for a port, or an exec without a terminal)."""

    def close(self) -> None:
        """End the process or the connection; calling it again does nothing."""

    def exit_code(self) -> int | None:
        """An exec's exit status once it ended (``128 + n`` when killed by signal ``n``);
        None before, and for a port."""


@runtime_checkable
class Interactive(Protocol):
    """A backend that reaches inside running replicas (``Capabilities.interactive``)."""

    def open_exec(self, handle: Handle, rank: int, argv: Sequence[str],
                  tty: bool) -> Channel:
        """Run ``argv`` inside replica ``rank`` as the job's owner, with its environment and
        devices, in its working directory; on a terminal when ``tty``, else with stderr
        merged into the stream."""

    def open_port(self, handle: Handle, rank: int, port: int) -> Channel:
        """A TCP connection to ``port`` where replica ``rank`` listens."""


@runtime_checkable
class DatasetCaching(Protocol):
    """A backend whose nodes cache datasets (``Capabilities.datasets``)."""

    def dataset_caches(self) -> Mapping[str, Sequence[Any]]:
        """Per node name, the complete copies its cache holds now, each with ``dataset``,
        ``version``, ``bytes`` and ``last_used`` (``rota.backends.datacache.Held``)."""


@runtime_checkable
class DatasetPrefetching(Protocol):
    """A backend that can fill a node's dataset cache ahead of a launch
    (``rota.control.prefetch``)."""

    def prefetch(self, node: str, datasets: Sequence[Dataset], wanted: frozenset[str]) -> None:
        """Copy ``datasets`` into ``node``'s cache (at once: the caller runs it on a thread of
        its own), evicting as a launch would but never what running jobs read; ``wanted``: the
        cache keys live jobs name."""


@runtime_checkable
class Succeeding(Protocol):
    """A backend that must know of a takeover (module docstring)."""

    def taking_over(self, unsure: bool) -> None:
        """``unsure``: from now on, until told False, attempts may have been launched by
        another control plane whose files this one cannot see."""


class Backend(Protocol):
    """Runs placed jobs. Every method is safe to call again with the same handle."""

    name: str

    @property
    def capabilities(self) -> Capabilities: ...

    def inventory(self) -> list[Node]: ...

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle: ...

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None: ...

    def adopt(self, handle: Handle) -> Status:
        """Take over a handle saved by an earlier control plane and say what it does now;
        ``BackendError`` or ``InvalidSpec`` when it is not this backend's or cannot be read."""

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        """The status of every handle, in the same order, in one round of questions."""

    def signal(self, handle: Handle, sig: int) -> None: ...

    def cancel(self, handle: Handle, grace_s: float) -> None: ...

    def activity(self, handles: Sequence[Handle]) -> list[Activity]:
        """What each launch is seen doing, in the same order, in one round of questions."""

    def notify(self, handle: Handle, message: str) -> None:
        """Put ``message`` where the job's owner reads its output (a warning before idle
        reclamation); a backend without such a place does nothing."""

    def watch(self, wake: Callable[..., None]) -> None:
        """From now on, call ``wake`` soon after a launch this backend tracks changes state
        (a replica exits), so that the control loop need not wait for its period; a backend
        that offers work (``Offering``) calls ``wake(arrived=True)`` soon after new work
        waits for rota, so that the loop places it without resting after its pass; one that
        sees work outside rota start or end calls ``wake(inventory=True)``, so that the loop
        reads its inventory at once. A backend without such news does nothing here: the
        loop's periodic pass (and inventory reading) covers it."""

    def unwatch(self) -> None:
        """Stop calling ``wake`` and release what ``watch`` holds."""

    def endpoint(self, handle: Handle) -> str | None:
        """``host:port`` where rank 0 of a launch that asked for a port (``LaunchSpec.port``)
        listens, as the control plane reaches it; None while it is not known yet (a Pod with
        no IP) or for a launch that asked for none."""

    def read_log(self, handle: Handle, rank: int, stream: str, offset: int) -> Iterator[bytes]:
        """What replica ``rank`` wrote to ``stream`` (stdout or stderr) from byte ``offset``
        on, as far as it has been written; nothing when there is nothing (yet)."""
