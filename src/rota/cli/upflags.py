"""The options of ``rota up``, declared once for its signature (``rota.cli.up.up``): their
flags, defaults and help. The options of one backend only are checked by that backend's factory
(``rota.server.backends``), which refuses them with another backend."""

from __future__ import annotations

import typer

DATA_DIR = typer.Option(
    None, "--data-dir", metavar="DIR",
    help="Where the store, job directories and uploads live (default: $XDG_DATA_HOME/rota).")

DB = typer.Option(
    None, "--db", metavar="URL", envvar="ROTA_DB_URL", show_envvar=True,
    help="Database URL, e.g. postgresql+psycopg://user@host/rota (default: SQLite in DIR). "
         "A password here shows in ps: use ROTA_DB_URL, --db-file or ~/.pgpass instead.")

DB_FILE = typer.Option(
    None, "--db-file", metavar="FILE",
    help="Read the database URL from the first line of FILE (keep it mode 0600).")

PORT = typer.Option(8470, "--port", min=0, max=65535,
                    help="Port of the HTTP API; 0 picks a free one.")

HOST = typer.Option(
    "127.0.0.1", "--host",
    help="Address the HTTP API listens on. Beyond loopback it serves HTTPS: with --tls-cert, "
         "else with a certificate of its own CA, made in DIR/tls (its fingerprint is printed "
         "for rota login --fingerprint).")

JOBS_URL = typer.Option(
    None, "--jobs-url", metavar="URL",
    help="The API's URL as jobs reach it, their ROTA_URL (e.g. a Service's) [default: "
         "--host's address; with --host 0.0.0.0, this machine's name for Slurm and "
         "Kubernetes].")

GPUS = typer.Option(
    None, "--gpus", metavar="SPEC",
    help="Declare virtual GPUs instead of asking NVML, e.g. 4xH100-80GB; remembered in the "
         "data directory for the next rota up (none: forget them).")

NODE_FILE = typer.Option(
    None, "--node-file", metavar="FILE", help="This machine's inventory as a YAML node file.")

MIG_PLAN = typer.Option(
    None, "--mig-plan", metavar="FILE",
    help="MIG geometries and the calendar that switches this machine's GPUs between them "
         "(YAML; see docs/mig.md).")

POLICY = typer.Option(
    None, "--policy", "-p", metavar="NAME|FILE",
    help="Scheduling policy preset or YAML policy file (default: default).")

INTERVAL = typer.Option(2.0, "--interval", min=0.05, metavar="SECONDS",
                        help="Seconds between passes of the control loop when "
                             "nothing wakes it.")

INVENTORY_INTERVAL = typer.Option(
    10.0, "--inventory-interval", min=0.05, metavar="SECONDS",
    help="Seconds between readings of the backend's nodes (their GPUs and what work outside "
         "rota holds there); Slurm and Kubernetes also have them read at once when work "
         "outside rota starts or ends.")

BACKEND = typer.Option(
    None, "--backend", metavar="NAME",
    help="Where jobs run: local (processes on this machine, the default), slurm (the Slurm "
         "cluster SLURM_CONF names) or kubernetes (Pods rota binds on a cluster); several "
         "joined by commas (slurm,kubernetes) drive them at once, a machine they share being "
         "one node.")

SLURM_GPU_TYPES = typer.Option(
    None, "--slurm-gpu-types", metavar="TYPE=MODEL,...",
    help="Slurm: the model and memory of each GPU GRES type, e.g. "
         "h100=H100-80GB,a100=A100:40Gi (untyped=MODEL for plain gpu:N).")

SLURM_PLACEMENT = typer.Option(
    "rota", "--slurm-placement", metavar="rota|slurm",
    help="Slurm: rota chooses the nodes and pins each job there (rota), or rota admits "
         "and orders jobs and Slurm chooses the nodes (slurm).")

SLURM_PARTITION = typer.Option(
    None, "--slurm-partition", metavar="NAME",
    help="Slurm: the partition rota's jobs are submitted to, unless their queue names one "
         "[default: Slurm's].")

SLURM_ACCOUNTS = typer.Option(
    None, "--slurm-accounts", metavar="PROJECT=ACCOUNT,...",
    help="Slurm: the account each project's jobs run under, e.g. vision=cv-lab "
         "[default: the project's name].")

TLS_CERT = typer.Option(
    None, "--tls-cert", metavar="FILE",
    help="Serve HTTPS with this certificate (PEM; with --tls-key). The CLI on this machine "
         "is told to trust it; others: rota login --ca-file or --fingerprint, or "
         "ROTA_CA_FILE.")

TLS_KEY = typer.Option(
    None, "--tls-key", metavar="FILE",
    help="The private key of --tls-cert (PEM); refused unless only its owner may read it.")

INSECURE_HTTP = typer.Option(
    False, "--insecure-http",
    help="Serve plain HTTP beyond loopback too: tokens then cross the network readable by "
         "anyone on the path. Only behind a proxy that adds TLS, or on a trusted network.")

METRICS_ADDRESS = typer.Option(
    None, "--metrics-address", metavar="HOST:PORT",
    help="Also serve /metrics here without a token, for a Prometheus server (an address "
         "only it reaches; /metrics of the API needs an operator's or a metrics token).")

KEEP_WORKDIRS = typer.Option(
    "7d", "--keep-workdirs", metavar="DURATION",
    help="Remove a finished job's working directory this long after it ended.")

KEEP_LOGS = typer.Option(
    "30d", "--keep-logs", metavar="DURATION",
    help="Remove a finished job's logs (its whole directory) this long after it ended; at "
         "least --keep-workdirs.")

KEEP_UPLOADS = typer.Option(
    "7d", "--keep-uploads", metavar="DURATION",
    help="Remove an upload this long after it was sent, once no job still to run names it.")

KUBECONFIG = typer.Option(
    None, "--kubeconfig", metavar="FILE",
    help="kubernetes: the cluster's kubeconfig [default: $KUBECONFIG, ~/.kube/config, "
         "else the Pod's service account when rota runs in the cluster].")

KUBE_NAMESPACE = typer.Option(
    "rota", "--kube-namespace", metavar="NAME",
    help="kubernetes: the namespace rota creates its jobs' Pods in (it must exist).")

KUBE_DEFAULT_IMAGE = typer.Option(
    None, "--kube-default-image", metavar="IMAGE",
    help="kubernetes: the container image of jobs that name none (image: in a job file).")

KUBE_POD_USER = typer.Option(
    None, "--kube-pod-user", metavar="USER",
    help="kubernetes: the rota user that owns the jobs of Pods created with "
         "schedulerName: rota [default: the operator of the first start].")

KUBE_UID = typer.Option(
    None, "--kube-uid", metavar="UID",
    help="kubernetes: the uid (and gid) of the Pods of jobs whose owner has no OS account, "
         "or root's [default: 1000].")

KUBE_NODE_SELECTOR = typer.Option(
    None, "--kube-node-selector", metavar="SELECTOR",
    help="kubernetes: a label selector of the nodes rota may use (e.g. pool=gpu) "
         "[default: every node].")

KUBE_TOLERATE = typer.Option(
    None, "--kube-tolerate", metavar="KEY",
    help="kubernetes: a taint key rota's Pods tolerate (repeat) [default: nvidia.com/gpu]; "
         "nodes tainted with others take no job.")

KUBE_NODE_LOST_AFTER = typer.Option(
    300.0, "--kube-node-lost-after", metavar="SECONDS", min=0,
    help="kubernetes: how long a node may stay NotReady before the jobs on it count as "
         "lost and are requeued (Kubernetes' own default before it evicts Pods).")

KUBE_LOCK_WAIT = typer.Option(
    60.0, "--kube-lock-wait", metavar="SECONDS", min=0,
    help="kubernetes: how long a bind on a HAMi node waits for HAMi's device plugin to release "
         "its node lock; a lock kept longer shows that the plugin does not serve the node, "
         "whose GPUs are then not offered until it is released or expires.")

JOB_PIDS = typer.Option(
    4096, "--job-pids", metavar="N", min=1, max=4_194_304,
    help="local: the processes and threads one replica of a job may have at once "
         "(cgroup pids.max); a fork bomb stops there.")

JOB_DISK = typer.Option(
    None, "--job-disk", metavar="SIZE",
    help="local: the disk a job's working directory may use when its job file names "
         "none (resources.disk), e.g. 20Gi [default: no limit].")

DATASET_CACHE = typer.Option(
    None, "--dataset-cache", metavar="DIR",
    help="local: where this machine caches the datasets jobs name (docs/datasets.md) "
         "[default: DATA_DIR/dataset-cache].")

DATASET_CACHE_SIZE = typer.Option(
    None, "--dataset-cache-size", metavar="SIZE",
    help="local: the most the dataset cache holds, e.g. 500Gi; least needed copies are "
         "evicted first [default: 100Gi, or half the space free on its file system where "
         "that is less].")

DATASET_BANDWIDTH = typer.Option(
    None, "--dataset-bandwidth", metavar="BYTES/S",
    help="local: how fast a dataset is copied into the cache, e.g. 200M [default: no bound].")

DETACH = typer.Option(False, "--detach", "-d",
                      help="Run in the background; return once it answers. "
                           "Stop it with rota down.")
                      