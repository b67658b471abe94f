"""``rota up``: run the control plane on this machine, in the foreground.

This module parses options and says what happened; ``rota.server`` builds and runs the control
plane (lock, store, lease, first start, this machine as a node, credentials, accounts, loop,
API). SIGINT or SIGTERM stops it cleanly; jobs keep running and are adopted by the next start.

The database URL can hold a password: give it in ``ROTA_DB_URL`` or in a file
(``--db-file``, first line) rather than with ``--db``, whose value every local user (and
every job) can read in ``ps``. It is never printed with its password.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from rota.cli import upflags as flag
from rota.cli.upoptions import (
    address, backend_setup, check_url, database_url, error_option, retention_of, tls_files,
)
from rota.core import InvalidSpec

UP_HELP = (
    "Start the control plane here: the HTTP API and the control loop, running jobs on this "
    "machine (--backend local, the default), on a Slurm cluster (--backend slurm) or as Pods "
    "on a Kubernetes cluster (--backend kubernetes), or on several at once (--backend "
    "slurm,kubernetes: a machine both report is one node with one set of GPUs).\n\n"
    "Stores everything in the data directory (SQLite) unless --db names a PostgreSQL "
    "database, writes the server URL and an operator token to "
    "$XDG_CONFIG_HOME/rota/credentials.json for the CLI, and runs until Ctrl-C. Jobs keep "
    "running when it stops and are adopted when it starts again. With --backend slurm or "
    "kubernetes, a second rota up on a database another control plane leads stands by: it "
    "serves the API and takes over when the leader dies.\n\n"
    "Examples: rota up --gpus 4xH100-80GB; "
    "rota up --backend slurm --slurm-gpu-types h100=H100-80GB,a100=A100-40GB (the cluster "
    "SLURM_CONF names; its nodes, GPUs and other users' jobs are read from Slurm); "
    "rota up --backend kubernetes --kube-default-image python:3.12"
)


def up(
    data_dir: Optional[Path] = flag.DATA_DIR, db: Optional[str] = flag.DB,
    db_file: Optional[Path] = flag.DB_FILE, port: int = flag.PORT, host: str = flag.HOST,
    jobs_url: Optional[str] = flag.JOBS_URL, gpus: Optional[str] = flag.GPUS,
    node_file: Optional[Path] = flag.NODE_FILE, mig_plan: Optional[Path] = flag.MIG_PLAN,
    policy: Optional[str] = flag.POLICY,
    interval: float = flag.INTERVAL, inventory_interval: float = flag.INVENTORY_INTERVAL,
    backend: Optional[str] = flag.BACKEND,
    slurm_gpu_types: Optional[str] = flag.SLURM_GPU_TYPES,
    slurm_placement: str = flag.SLURM_PLACEMENT,
    slurm_partition: Optional[str] = flag.SLURM_PARTITION,
    slurm_accounts: Optional[str] = flag.SLURM_ACCOUNTS,
    tls_cert: Optional[Path] = flag.TLS_CERT, tls_key: Optional[Path] = flag.TLS_KEY,
    insecure_http: bool = flag.INSECURE_HTTP,
    metrics_address: Optional[str] = flag.METRICS_ADDRESS, keep_workdirs: str = flag.KEEP_WORKDIRS,
    keep_logs: str = flag.KEEP_LOGS, keep_uploads: str = flag.KEEP_UPLOADS,
    kubeconfig: Optional[Path] = flag.KUBECONFIG, kube_namespace: str = flag.KUBE_NAMESPACE,
    kube_default_image: Optional[str] = flag.KUBE_DEFAULT_IMAGE,
    kube_pod_user: Optional[str] = flag.KUBE_POD_USER,
    kube_uid: Optional[int] = flag.KUBE_UID,
    kube_node_selector: Optional[str] = flag.KUBE_NODE_SELECTOR,
    kube_tolerate: Optional[List[str]] = flag.KUBE_TOLERATE,
    kube_node_lost_after: float = flag.KUBE_NODE_LOST_AFTER,
    kube_lock_wait: float = flag.KUBE_LOCK_WAIT, job_pids: int = flag.JOB_PIDS,
    job_disk: Optional[str] = flag.JOB_DISK, detach: bool = flag.DETACH,
    dataset_cache: Optional[Path] = flag.DATASET_CACHE,
    dataset_cache_size: Optional[str] = flag.DATASET_CACHE_SIZE,
    dataset_bandwidth: Optional[str] = flag.DATASET_BANDWIDTH,
) -> None:
    from rota.cli.app import fail, resolve_policy
    from rota.control import setup

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        stream=sys.stderr)
    for noisy in ("uvicorn.error", "uvicorn.access", "alembic", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    chosen = resolve_policy(policy, None)
    tls = tls_files(tls_cert, tls_key, insecure_http)
    retention = retention_of(keep_workdirs, keep_logs, keep_uploads)
    metrics_at = None if metrics_address is None else address(metrics_address,
                                                              "--metrics-address")
    if jobs_url is not None:
        check_url(jobs_url, "--jobs-url")
    directory = (data_dir or setup.default_data_dir()).expanduser().resolve()
    db = database_url(db, db_file)
    if detach:
        from rota.cli.daemon import detach as start_detached
        argv = [a for a in sys.argv[2:] if a not in ("-d", "--detach")]
        start_detached(argv, directory, setup.credentials_path())
        return
    values = {"--data-dir": directory, "--gpus": gpus, "--node-file": node_file,
              "--mig-plan": mig_plan, "--job-pids": job_pids,
              "--job-disk": job_disk, "--slurm-gpu-types": slurm_gpu_types,
              "--dataset-cache": dataset_cache, "--dataset-cache-size": dataset_cache_size,
              "--dataset-bandwidth": dataset_bandwidth,
              "--slurm-placement": slurm_placement, "--slurm-partition": slurm_partition,
              "--slurm-accounts": slurm_accounts,
              "--kubeconfig": kubeconfig, "--kube-namespace": kube_namespace,
              "--kube-default-image": kube_default_image, "--kube-pod-user": kube_pod_user,
              "--kube-tolerate": kube_tolerate, "--kube-node-selector": kube_node_selector,
              "--kube-node-lost-after": kube_node_lost_after, "--kube-uid": kube_uid,
              "--kube-lock-wait": kube_lock_wait}
    name, options, inventory = backend_setup(backend, values)
    try:
        _serve(directory, db, host, port, inventory, chosen, (interval, inventory_interval),
               name, options, tls, retention, metrics_at, jobs_url, insecure_http)
    except InvalidSpec as exc:
        option = error_option(name, exc.field)
        if option is not None:
            fail(option, InvalidSpec("", exc.reason))
        fail("--db" if db else "--data-dir", exc)


def _serve(directory: Path, db: Optional[str], host: str, port: int, inventory, policy,
           intervals: tuple[float, float], backend: str, options: dict[str, str],
           tls: tuple[Path, Path] | None = None, retention=None,
           metrics_at: tuple[str, int] | None = None, jobs_url: str | None = None,
           insecure_http: bool = False) -> None:
    from rota.control import DataDirBusy
    from rota.control.lease import held_message
    from rota.server import BackendError, LeaseHeld, ServerConfig, open_control_plane
    from rota.server.compose import BindError

    config = ServerConfig(directory, inventory, policy, db, host, port, intervals[0], backend,
                          options, tls, *(() if retention is None else (retention,)),
                          metrics_address=metrics_at, jobs_url=jobs_url,
                          insecure_http=insecure_http, inventory_s=intervals[1])
    try:
        plane = open_control_plane(config)
    except DataDirBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1)
    except LeaseHeld as exc:
        message = held_message(exc.name, exc.holder, exc.expires_at, time.time())
        reason = getattr(exc, "reason", None)  # NoStandby: why this one cannot stand by
        print(f"error: {message}" + ("" if reason is None else f". No standby: {reason}"),
              file=sys.stderr)
        raise typer.Exit(1)
    except BindError as exc:
        option = "--metrics-address" if "metrics" in str(exc) else "--port"
        print(f"error: {option}: {exc}", file=sys.stderr)
        raise typer.Exit(1)
    except BackendError as exc:
        print(f"error: --backend {backend}: {exc}", file=sys.stderr)
        raise typer.Exit(1)
    try:
        _announce(plane)
        plane.serve(on_started=_adopted)
    finally:
        print("rota: stopping (running jobs keep running and are adopted by the next start)",
              file=sys.stderr)
        plane.close()
    if plane.lease_lost:
        print("error: the control-loop lease was taken over by another control plane; "
              "stopped without acting further", file=sys.stderr)
        raise typer.Exit(3)


def _adopted(first) -> None:
    for job, old, new, reason in first.moves:
        print(f"  job {job}: {old} -> {new}" + (f" ({reason})" if reason else ""),
              file=sys.stderr)


def _announce(plane) -> None:
    """What started, where, and what to do next. Never the token itself: this goes to a
    terminal or to the log of rota up -d, and the token is in the credentials file (0600)."""
    from rota.control import setup
    from rota.server.hidepid import proc_warning
    from rota.server.backends import factory_of
    from rota.server.retention import disk_use

    config, store, inventory = plane.config, plane.store, plane.config.inventory
    where = (store.display_url if not store.url.startswith("sqlite")
             else f"SQLite in {config.data_dir}")
    accounts = plane.accounts
    mode = ("multi-user: each job runs as its owner's OS account" if accounts.multi_user else
            f"single-user: jobs run as OS user {accounts.me}; only its rota users' jobs start")
    lines = [f"rota control plane at {plane.url}",
             f"  dashboard: {plane.url}/ui/ (log in with a token: rota token create web "
             "--operator prints one)", f"  store: {where}"]
    factory = factory_of(config.backend)
    lines += factory.describe(plane)
    if plane.jobs_url != plane.url:
        lines.append(f"  jobs reach the API at {plane.jobs_url}")
    lines += [f"  policy: {config.policy.name}", f"  jobs: {mode}"]
    if plane.held is not None:
        lines.append(f"  role: standby; {plane.held.holder} leads (its control-loop lease "
                     f"runs {max(0.0, plane.held.expires_at - time.time()):.0f} s more unless "
                     "renewed). This control plane serves the API from the same database and "
                     "takes over once that lease expires")
    lines += _https_lines(plane)
    lines.append(f"  metrics: {plane.url}/metrics (an operator's token, or one from rota token "
                 "create NAME --metrics)" + (f"; without a token at {plane.metrics_url}"
                                             if plane.metrics_url else ""))
    lines.append(f"  data directory: {config.data_dir}, {_size(disk_use(config.data_dir))} used; "
                 f"finished jobs' working directories kept "
                 f"{_days(config.retention.workdirs_s)}, logs {_days(config.retention.logs_s)}, "
                 f"unused uploads {_days(config.retention.uploads_s)}")
    on_this_machine = factory.runs_here  # jobs elsewhere never enter the data dir
    closed = setup.closed_parents(config.data_dir) if accounts.multi_user and on_this_machine \
        else []
    if closed:
        lines.append(f"  warning: {closed[0]} is closed to other accounts (mode "
                     f"{oct(closed[0].stat().st_mode & 0o777)}), so their jobs cannot reach "
                     f"their working directories under {config.data_dir}: use --data-dir "
                     "/var/lib/rota (the default as root) or open it with chmod o+x")
    if accounts.multi_user and on_this_machine and (hidden := proc_warning()) is not None:
        lines.append(f"  warning: {hidden}")
    if plane.cordoned:
        lines.append("  cordoned local nodes that are not this machine: "
                     f"{', '.join(plane.cordoned)}")
    if plane.operator is not None:
        lines.append(f"  first start: project {setup.DEFAULT_PROJECT!r}, queue "
                     f"{setup.DEFAULT_QUEUE!r}, operator {plane.operator!r}")
    credentials = setup.credentials_path()
    lines.append(f"  credentials for the CLI (URL and {'a new ' if plane.issued else ''}"
                 f"operator token, mode 0600): {credentials}")
    example = ("nvidia-smi" if inventory.nvml is not None or not on_this_machine
               else "sh -c 'echo GPU $CUDA_VISIBLE_DEVICES'")
    lines += ["next: see the nodes: rota nodes; submit a job: rota run --gpus 1 -- " + example,
              "      then watch it: rota ps; rota logs ID -f"]
    print("\n".join(lines), flush=True)


def _https_lines(plane) -> list[str]:
    """How clients elsewhere trust the server, or a warning that they cannot."""
    from rota.server.certs import is_loopback

    served, config = plane.served, plane.config
    if served is None:
        if is_loopback(config.host):
            return []
        return [f"  warning: --insecure-http: plain HTTP on {config.host}: every token sent "
                "to it crosses the network readable by anyone on the path"]
    port = plane.url.rsplit(":", 1)[1]
    where = plane.url if not _wildcard(config.host) else f"https://{_this_host()}:{port}"
    made = "rota's own CA" if served.generated else "--tls-cert"
    lines = [f"  HTTPS: certificate from {made}, CA file {served.ca}",
             f"  CA fingerprint: {served.fingerprint}"]
    if not is_loopback(config.host):
        lines.append(f"  log in from elsewhere: rota login {where} --fingerprint "
                     f"{served.fingerprint} (the token on stdin or at the prompt)")
    return lines


def _wildcard(host: str) -> bool:
    from rota.server.compose import WILDCARDS
    return host in WILDCARDS


def _this_host() -> str:
    import socket
    return socket.gethostname()


def down(
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="The data directory of the control plane to stop (default: $XDG_DATA_HOME/rota)."),
) -> None:
    """Stop a control plane started with rota up (running jobs keep running)."""
    from rota.cli.daemon import down as stop
    from rota.control import setup

    stop((data_dir or setup.default_data_dir()).expanduser().resolve())


def register(app: typer.Typer) -> None:
    app.command("up", help=UP_HELP)(up)
    app.command("down")(down)


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:g} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def _days(seconds: float) -> str:
    return f"{seconds / 86400:g} days" if seconds >= 86400 else f"{seconds:g} s"
