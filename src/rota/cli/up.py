"""``rota up``: run the control plane on this machine, in the foreground.

Steps: take the data directory's lock (one control plane per data directory), open the store,
set up a first start (default project and queue, operator and token), register this machine
as a node, bind the HTTP socket (``--port 0`` picks a free port), write the credentials file
the CLI reads, adopt every job left running by an earlier control plane, then serve the API
(uvicorn, in this process) while the control loop runs on its own thread. SIGINT or SIGTERM
stops both cleanly; jobs keep running and are adopted by the next start.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from pathlib import Path
from typing import Optional

import typer

from rota.core import InvalidSpec

UP_HELP = (
    "Start the control plane here: the HTTP API and the control loop with the local backend.\n\n"
    "Stores everything in the data directory (SQLite) unless --db names a PostgreSQL "
    "database, writes the server URL and an operator token to "
    "$XDG_CONFIG_HOME/rota/credentials.json for the CLI, and runs until Ctrl-C. Jobs keep "
    "running when it stops and are adopted when it starts again.\n\n"
    "Example: rota up --gpus 4xH100-80GB"
)


def up(
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="Where the store, job directories and uploads live [default: $XDG_DATA_HOME/rota]."),
    db: Optional[str] = typer.Option(
        None, "--db", metavar="URL",
        help="Database URL, e.g. postgresql+psycopg://user@host/rota [default: SQLite in DIR]."),
    port: int = typer.Option(8470, "--port", min=0, max=65535,
                             help="Port of the HTTP API; 0 picks a free one."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the HTTP API listens on."),
    gpus: Optional[str] = typer.Option(
        None, "--gpus", metavar="SPEC",
        help="Declare virtual GPUs instead of asking NVML, e.g. 4xH100-80GB."),
    node_file: Optional[Path] = typer.Option(
        None, "--node-file", metavar="FILE", help="This machine's inventory as a YAML node file."),
    policy: Optional[str] = typer.Option(
        None, "--policy", "-p", metavar="NAME|FILE",
        help="Scheduling policy preset or YAML policy file [default: default]."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, metavar="SECONDS",
                                   help="Seconds between passes of the control loop when "
                                        "nothing wakes it."),
    detach: bool = typer.Option(False, "--detach", "-d",
                                help="Run in the background; return once it answers. "
                                     "Stop it with rota down."),
) -> None:
    from rota.cli.main import fail, resolve_policy
    from rota.control import setup

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        stream=sys.stderr)
    for noisy in ("uvicorn.error", "uvicorn.access", "alembic", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    chosen = resolve_policy(policy, None)
    if gpus and node_file:
        fail("--gpus", InvalidSpec("", "give --gpus or --node-file, not both"))
    directory = (data_dir or setup.default_data_dir()).expanduser().resolve()
    if detach:
        from rota.cli.daemon import detach as start_detached
        argv = [a for a in sys.argv[2:] if a not in ("-d", "--detach")]
        start_detached(argv, directory, setup.credentials_path())
        return
    try:
        inventory = setup.this_machine(gpus, node_file)
    except InvalidSpec as exc:
        fail("--node-file" if node_file else "--gpus", exc)
    try:
        _serve(directory, db, host, port, inventory, chosen, interval)
    except InvalidSpec as exc:
        fail("--db" if db else "--data-dir", exc)


def _serve(directory: Path, db: Optional[str], host: str, port: int, inventory, policy,
           interval: float) -> None:
    from rota.control import ControlLoop, DataDirBusy, DataDirLock, setup
    from rota.store import Store

    lock = DataDirLock(directory)
    try:
        lock.acquire()
    except DataDirBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1)
    try:
        store = Store.open(db or directory)
        keeper = _take_lease(store, directory)
        operator = setup.first_start(store)
        cordoned = setup.register(store, inventory.node)
        sock = _bind(host, port)
        url = f"http://{_url_host(host)}:{sock.getsockname()[1]}"
        token, issued = setup.operator_token(store, setup.credentials_path(), operator)
        setup.write_credentials(setup.credentials_path(), url, token)
        loop = ControlLoop(store, _backend(directory, inventory), policy, directory,
                           interval_s=interval, lease=keeper)
        _announce(url, store, directory, inventory, policy, operator, token, issued, cordoned)
        _run(store, loop, directory, sock, inventory)
    finally:
        lock.release()


def _take_lease(store, directory: Path):
    """The database's control-loop lease, or exit 1 saying who holds it and what to do."""
    import time

    from rota.control.lease import LeaseKeeper, held_message
    from rota.store.lease import LeaseHeld

    keeper = LeaseKeeper(store, directory)
    try:
        keeper.acquire(time.time())
    except LeaseHeld as exc:
        print(f"error: {held_message(exc.name, exc.holder, exc.expires_at, time.time())}",
              file=sys.stderr)
        raise typer.Exit(1)
    return keeper


def _backend(directory: Path, inventory):
    from rota.backends.local import LocalBackend

    return LocalBackend(directory, node=inventory.node, nvml=inventory.nvml)


def _run(store, loop, directory: Path, sock: socket.socket, inventory) -> None:
    import uvicorn

    from rota.api import create_app
    from rota.control.logs import log_reader

    first = loop.start()
    for job, old, new, reason in first.moves:
        print(f"  job {job}: {old} -> {new}" + (f" ({reason})" if reason else ""),
              file=sys.stderr)
    watcher = _memory_watcher(loop.backend, inventory)
    app = create_app(store, data_dir=directory, on_change=loop.wake,
                     read_log=log_reader(loop.backend))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off"))
    lost = []

    def lease_lost() -> None:  # another control plane may act now: stop serving and exit 3
        lost.append(True)
        server.should_exit = True
    loop.on_lease_lost = lease_lost
    # uvicorn restores and re-raises the handlers it found once it has shut down: make those
    # harmless ones, so that cleanup below runs and the exit status is 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        print("rota: stopping (running jobs keep running and are adopted by the next start)",
              file=sys.stderr)
        if watcher is not None:
            watcher.stop()
        loop.stop()
        store.close()
    if lost:
        print("error: the control-loop lease was taken over by another control plane; "
              "stopped without acting further", file=sys.stderr)
        raise typer.Exit(3)


def _memory_watcher(backend, inventory):
    if inventory.nvml is None:
        return None
    from rota.backends.watcher import MemoryWatcher

    watcher = MemoryWatcher(backend, inventory.nvml)
    watcher.start()
    return watcher


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        print(f"error: --port: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        raise typer.Exit(1)
    sock.listen(2048)
    return sock


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _announce(url, store, directory, inventory, policy, operator, token, issued,
              cordoned) -> None:
    from rota.control import setup

    where = store.url if not store.url.startswith("sqlite") else f"SQLite in {directory}"
    lines = [f"rota control plane at {url}",
             f"  store: {where}", f"  this machine: {inventory.node.name}, {inventory.source}",
             f"  policy: {policy.name}"]
    if cordoned:
        lines.append(f"  cordoned local nodes that are not this machine: {', '.join(cordoned)}")
    if operator is not None:
        lines.append(f"  first start: project {setup.DEFAULT_PROJECT!r}, queue "
                     f"{setup.DEFAULT_QUEUE!r}, operator {operator!r}")
    if issued:
        lines.append(f"  operator token (shown once): {token}")
    lines += [f"  credentials for the CLI: {setup.credentials_path()}",
              "next: submit a job: rota run --gpus 1 -- " + (
                  "nvidia-smi" if inventory.nvml is not None
                  else "sh -c 'echo GPU $CUDA_VISIBLE_DEVICES'"),
              "      then watch it: rota ps; rota logs ID -f"]
    print("\n".join(lines), flush=True)


def down(
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="The data directory of the control plane to stop [default: $XDG_DATA_HOME/rota]."),
) -> None:
    """Stop a control plane started with rota up (running jobs keep running)."""
    from rota.cli.daemon import down as stop
    from rota.control import setup

    stop((data_dir or setup.default_data_dir()).expanduser().resolve())


def register(app: typer.Typer) -> None:
    app.command("up", help=UP_HELP)(up)
    app.command("down")(down)
