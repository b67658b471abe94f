"""Build a control plane on this machine: store, lease, backend, accounts, loop and API.

``open_control_plane(config)``, in order: make the data directory private
(``rota.server.secure``) and take its lock (one control plane per data directory); open the
store and take its ``control-loop`` lease (one per database), or, while a live control plane
of another site holds it, stand by (``rota.control.standby``) unless the backend's factory
refuses (``NoStandby``: the local backend always does); set up a first start (default
project and queue, the operator and its token); revoke every live token that a log of the
control plane holds (``rota.server.leaks``); build the backend from its factory
(``rota.server.backends``; several at once: ``rota.server.factories.several``) and, when its
jobs run here, register this machine as a node (as the local backend's); bind the HTTP
socket (``port`` 0 picks a free one), HTTPS with the given certificate or, beyond loopback,
rota's own (``rota.server.certs``); write the credentials file the CLI reads; build
the accounts its jobs run as, and the control loop. Anything that fails on the way releases
what was taken. ``ControlPlane.serve`` then adopts what an earlier control plane left
running, serves the API (uvicorn, in this process) while the loop runs on its own thread, and
stops both on SIGINT or SIGTERM; jobs keep running and are adopted by the next start. A
standby serves the API at once, from the shared database, and starts the loop (adopting, as
after a restart) and the serving runtime only once it took the lease; until then it takes
no attempt's report of its end (the leader's API does). ``ControlPlane.role`` says which
role it has and who leads.

Errors are the parts' own: ``DataDirBusy``, ``LeaseHeld`` (``NoStandby``), ``BindError``,
``InvalidSpec`` (a bad database URL or data directory); ``rota up`` turns them into messages.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from rota.control import ControlLoop, DataDirLock, setup
from rota.control.accounts import Accounts
from rota.control.forecasts import Forecasts
from rota.control.lease import LeaseKeeper
from rota.control.loop import HANDOFF_WAIT_S
from rota.control.metrics import Metrics, Reading
from rota.control.logs import log_reader
from rota.control.reconcile import PassReport
from rota.control.serving import Serving
from rota.control.sessions import Sessions
from rota.control.standby import Role, Standby, leading
from rota.control.servingmetrics import ServingMetrics
from rota.scheduler import Policy
from rota.server.backends import DEFAULT_BACKEND, factory_of
from rota.server.certs import Served, is_loopback
from rota.server.certs import given as given_tls
from rota.server.certs import own as own_tls
from rota.server.leaks import revoke_leaked
from rota.server.retention import Retention, Sweeper
from rota.server.secure import private_umask, secure_data_dir
from rota.store import Store, TokenInfo
from rota.store.lease import LeaseHeld

log = logging.getLogger("rota.server")


class BindError(OSError):
    """The API's address cannot be listened on."""


WILDCARDS = ("0.0.0.0", "", "::")  # --host values that listen on every interface


@dataclass(frozen=True, slots=True)
class ServerConfig:
    data_dir: Path
    inventory: setup.Inventory     # this machine (the local backend's node)
    policy: Policy
    db: str | None = None          # a database URL; None: SQLite in the data directory
    host: str = "127.0.0.1"
    port: int = setup.DEFAULT_PORT
    interval_s: float = 2.0
    backend: str = DEFAULT_BACKEND  # a name of ``rota.server.backends.FACTORIES``
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # for that backend
    tls: tuple[Path, Path] | None = None  # certificate and key files: serve HTTPS
    retention: Retention = Retention()    # what is removed from the data directory, when
    metrics_address: tuple[str, int] | None = None  # also serve /metrics there, without a token
    jobs_url: str | None = None  # the API's URL as jobs reach it; None: ``jobs_api_url``
    insecure_http: bool = False  # beyond loopback without ``tls``: plain HTTP, not rota's own
    inventory_s: float = 10.0    # between readings of the backend's nodes (``InventorySync``)


@dataclass(slots=True)
class ControlPlane:
    config: ServerConfig
    lock: DataDirLock
    store: Store
    loop: ControlLoop
    accounts: Accounts
    sock: socket.socket
    url: str
    token: str
    issued: bool                   # the token was issued by this start (else: the file's)
    operator: str | None           # the operator a first start created
    cordoned: list[str] = field(default_factory=list)
    lease_lost: bool = False
    metrics: Metrics | None = None
    metrics_url: str | None = None  # the metrics address's, when one was given
    jobs_url: str | None = None     # the API's URL as jobs reach it (``jobs_api_url``)
    served: Served | None = None    # what HTTPS is served with; None: plain HTTP
    leaked: list[tuple[TokenInfo, str]] = field(default_factory=list)  # revoked at start
    held: LeaseHeld | None = None   # the lease's live holder at start: this plane stands by
    standby: Standby | None = None  # while serving with ``held``
    _metrics_server: Any = None

    def role(self) -> Role:
        """Leader or standby, and who leads."""
        if self.standby is not None:
            return self.standby.role()
        assert self.loop.lease is not None
        return leading(self.loop.lease)

    def serve(self, on_started=lambda report: None) -> None:
        """Adopt, then serve until SIGINT or SIGTERM (or a lost lease: ``lease_lost``)."""
        import uvicorn

        from rota.api import create_app

        serving = Serving(self.store, self.loop.backend, self.loop.wake)
        if self.held is None:
            report: PassReport = self.loop.start()
            on_started(report)
            serving.start()
        else:
            def promote() -> None:  # the lease is this plane's now: lead
                on_started(self.loop.start(taking_over=True))
                serving.start()
            keeper = self.loop.lease
            assert keeper is not None
            self.standby = Standby(keeper, self.held, promote)
        here = _here(factory_of(self.config.backend), self.loop.backend)
        watcher = _memory_watcher(None if here is None else here[1], self.config.inventory)
        sweeper = Sweeper(self.store, self.config.data_dir, self.config.retention, time.time)
        sweeper.start()
        containers = self.loop.backend.capabilities.containers  # a workdir is in the image
        if self.metrics is not None:
            self.metrics.registry.register(ServingMetrics(serving))
        idle = self.loop.reconciler.idle
        app = create_app(self.store, data_dir=self.config.data_dir, on_change=self.loop.wake,
                         read_log=log_reader(self.loop.backend),
                         workdir_refusal=None if containers else self.accounts.workdir_refusal,
                         on_touch=self.loop.reconciler.idle.touch,
                         metrics=None if self.metrics is None else self.metrics.exposition,
                         serving=serving, on_exit=self._exited,
                         role=lambda: self.role().to_dict(time.time()),
                         exit_wait_s=HANDOFF_WAIT_S,
                         sessions=Sessions(self.loop.backend, idle.opened, idle.closed))
        cert, key = (None, None) if self.served is None else (self.served.cert,
                                                               self.served.key)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                               lifespan="off", ssl_certfile=cert,
                                               ssl_keyfile=key))

        def lease_lost() -> None:  # another control plane may act now: stop serving
            self.lease_lost = True
            server.should_exit = True
        self.loop.on_lease_lost = lease_lost
        # uvicorn restores and re-raises the handlers it found once it has shut down: make
        # those harmless ones, so that the cleanup below runs
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        if self.standby is not None:
            self.standby.start()
        try:
            server.run(sockets=[self.sock])
        finally:
            if self.standby is not None:
                self.standby.stop()
            app.state.offload.close()  # its worker processes (rota.api.offload)
            serving.stop()
            sweeper.stop()
            if watcher is not None:
                watcher.stop()
            self.loop.stop()

    def _exited(self, job_id: str, attempt: int, exit_code: int,
                replicas: tuple[int, ...] | None = None):
        """An attempt's report of its end, taken only while this plane leads."""
        if self.standby is not None and not self.standby.promoted.is_set():
            return None
        return self.loop.exited(job_id, attempt, exit_code, replicas)

    def close(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        self.store.close()
        self.lock.release()


def open_control_plane(config: ServerConfig) -> ControlPlane:
    """Everything up to serving (see the module docstring)."""
    private_umask()
    served = None if config.tls is None else given_tls(*config.tls)  # before anything is made
    directory = config.data_dir
    secure_data_dir(directory)
    lock = DataDirLock(directory)
    lock.acquire()
    store = None
    try:
        served = served or _https(config)  # under the lock: one CA per data directory
        # usage decays as the policy's fair share reads it (``Policy.usage_half_life_s``)
        store = Store.open(config.db or directory,
                           usage_half_life_s=config.policy.usage_half_life_s)
        keeper = LeaseKeeper(store, directory)
        factory = factory_of(config.backend)
        held = _lead_or_stand_by(keeper, lambda: factory.standby_refusal(config))
        operator = setup.first_start(store)
        leaked = revoke_leaked(store, directory)
        backend = factory.build(config)
        here = _here(factory, backend)
        cordoned = [] if here is None else setup.register(store, config.inventory.node,
                                                          here[0])
        sock = _bind(config.host, config.port)
        scheme = "http" if served is None else "https"
        url = f"{scheme}://{_url_host(config.host)}:{sock.getsockname()[1]}"
        jobs_url = config.jobs_url or jobs_api_url(config.host, config.backend, scheme,
                                                   sock.getsockname()[1])
        token, issued = setup.operator_token(store, setup.credentials_path(), operator)
        ca_file = None if served is None else str(served.ca)
        setup.write_credentials(setup.credentials_path(), url, token, ca_file)
        accounts = Accounts(store.unix_users)
        metrics = Metrics(store, _readings(factory.runs_here, config.inventory),
                          lambda: None if keeper.held is None else keeper.held.expires_at)
        loop = ControlLoop(store, backend, config.policy, directory,
                           interval_s=config.interval_s, lease=keeper, accounts=accounts,
                           inventory_s=config.inventory_s,
                           api_url=jobs_url, api_ca_file=_public_certificate(served, directory),
                           metrics=metrics, forecasts=Forecasts(background=True))
        attach = getattr(factory, "attach", None)  # the backend's own part of the loop
        if attach is not None:
            attach(loop, config)
        plane = ControlPlane(config, lock, store, loop, accounts, sock, url, token, issued,
                             operator, cordoned, metrics=metrics, jobs_url=jobs_url,
                             served=served, leaked=leaked, held=held)
        if config.metrics_address is not None:
            plane._metrics_server, plane.metrics_url = _serve_metrics(metrics,
                                                                      *config.metrics_address)
        return plane
    except BaseException:
        if store is not None:
            store.close()
        lock.release()
        raise


class NoStandby(LeaseHeld):
    """The lease is held, and this control plane may not stand by, for ``reason`` (its
    factory's ``standby_refusal``)."""

    def __init__(self, held: LeaseHeld, reason: str) -> None:
        super().__init__(held.name, held.holder, held.expires_at)
        self.reason = reason


def _lead_or_stand_by(keeper: LeaseKeeper,
                      refusal: Callable[[], str | None]) -> LeaseHeld | None:
    """Take the lease (None), or the refusal to stand by with; ``NoStandby`` when the
    backend's factory says this plane may not stand by."""
    try:
        keeper.acquire(time.time())
        return None
    except LeaseHeld as held:
        reason = refusal()
        if reason is not None:
            raise NoStandby(held, reason) from None
        return held


def _https(config: ServerConfig) -> Served | None:
    """Without a certificate given: rota's own when the API listens beyond loopback
    (``rota.server.certs``), unless plain HTTP was asked for; None: plain HTTP."""
    if is_loopback(config.host) or config.insecure_http:
        return None
    return own_tls(config.data_dir, config.host)


def _public_certificate(served: Served | None, directory: Path) -> str | None:
    """A copy of the CA file clients verify the API with (public, unlike its key) in the data
    directory, which every account may pass through, so that jobs can verify the API:
    ``ROTA_CA_FILE``."""
    if served is None:
        return None
    copy = directory / "api-certificate.pem"
    tmp = copy.with_suffix(".tmp")
    tmp.write_bytes(served.ca.read_bytes())
    tmp.chmod(0o644)
    os.replace(tmp, copy)
    return str(copy)


def _readings(runs_here: bool, inventory) -> Callable[[], list[Reading]] | None:
    """This machine's GPU figures for the metrics, where its backend runs jobs here and NVML
    is present."""
    nvml, node = inventory.nvml, inventory.node.name
    if nvml is None or not runs_here:
        return None

    def read() -> list[Reading]:
        util, used = nvml.utilization(), nvml.memory_used()
        return [Reading(node, i, util.get(i), used.get(i)) for i in sorted({*util, *used})]
    return read


def _serve_metrics(metrics: Metrics, host: str, port: int) -> tuple[Any, str]:
    """``GET /metrics`` on an address of its own, without a token (the operator's choice: a
    private address that only the Prometheus server reaches)."""
    from prometheus_client import start_http_server

    try:
        server, _ = start_http_server(port, host, registry=metrics.registry)
    except OSError as exc:
        raise BindError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") \
            from None
    return server, f"http://{_url_host(host)}:{server.server_address[1]}/metrics"


def _here(factory, backend) -> tuple[str, Any] | None:
    """The name and the backend of what runs jobs on this machine: ``backend`` itself, or the
    member of several backends at once that does (``SeveralFactory.members``); None when
    jobs run elsewhere."""
    for member in getattr(factory, "members", (factory,)):
        if member.runs_here:
            return member.name, getattr(backend, "members", {member.name: backend})[member.name]
    return None


def _memory_watcher(backend, inventory):
    if inventory.nvml is None or backend is None:  # it watches processes here
        return None
    from rota.backends.watcher import MemoryWatcher

    watcher = MemoryWatcher(backend, inventory.nvml)
    watcher.start()
    return watcher


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # connections of a socket whose protocol says TCP; without it an answer written in two
    # parts waited for the client's delayed ACK, 40 ms on every request (bench/RESULTS.md)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    return sock


def jobs_api_url(host: str, backend: str, scheme: str, port: int) -> str:
    """The API's URL as jobs reach it (their ``ROTA_URL``): the address it listens on
    (``host``). On every interface (``0.0.0.0``, ``::``) that is loopback for jobs on this
    machine, and this machine's name for a ``backend`` that runs them elsewhere (its factory
    is not ``runs_here``: Slurm, Kubernetes, or several backends of which one is), where
    loopback is the node itself."""
    factory = factory_of(backend)
    if host in WILDCARDS and not all(f.runs_here for f in getattr(factory, "members",
                                                                  (factory,))):
        return f"{scheme}://{_url_host(socket.getfqdn())}:{port}"
    return f"{scheme}://{_url_host(host)}:{port}"


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        host = "::1"
    return f"[{host}]" if ":" in host else host
