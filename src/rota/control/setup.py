"""Starting a control plane: where its files live, what a first start creates, and this machine.

- Data directory: ``--data-dir``, else ``$XDG_DATA_HOME/rota`` when that is set, else
  ``/var/lib/rota`` for root (multi-user mode: jobs of other accounts must be able to pass
  through its parents to reach their working directories, which root's home forbids) and
  ``~/.local/share/rota`` for anyone else. It holds the SQLite store (unless ``--db`` names
  another), job directories, uploads, the lock.
- Credentials: ``$XDG_CONFIG_HOME/rota/credentials.json`` (``~/.config/rota``), mode 0600,
  ``{"url": ..., "token": ...}``; the CLI reads it. Every start writes the current URL; the
  token in it is kept while it still authenticates as an operator against this store, and a
  new operator token is issued otherwise (the store keeps only hashes, so a lost file cannot be
  recovered, only replaced).
- First start (a store without users): project ``default``, queue ``default`` without quota
  limits, and an operator user (the login name when it is a valid rota name, else ``admin``)
  who is a member of ``default`` and whose jobs run as the OS account that started rota.
- This machine as a node: a node file, else virtual GPUs (``--gpus 4xH100-80GB``), else NVML
  when the machine has NVIDIA GPUs, else a CPU-only node. Other nodes the local backend
  registered earlier (another host name, another node file) are cordoned: nothing here can
  run jobs on them.
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rota.backends.gpus import local_node
from rota.backends.nvml import Nvml
from rota.core import Node, Queue
from rota.store import AlreadyExists, Role, Store
from rota.store.admin import UNIX_NAME
from rota.store.jobs import NAME

DEFAULT_PROJECT = "default"
DEFAULT_QUEUE = "default"
DEFAULT_PORT = 8470


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable)
    return Path(value) if value else Path.home() / fallback


def default_data_dir() -> Path:
    if not os.environ.get("XDG_DATA_HOME") and os.geteuid() == 0:
        return Path("/var/lib/rota")
    return _xdg("XDG_DATA_HOME", ".local/share") / "rota"


def closed_parents(directory: Path) -> list[Path]:
    """The directories above ``directory`` that other accounts may not pass through (no
    search permission for others): jobs running as their owners could not reach their
    working directories inside it."""
    return [p for p in directory.resolve().parents
            if p.exists() and not p.stat().st_mode & 0o001]


def credentials_path() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "rota" / "credentials.json"


@dataclass(frozen=True, slots=True)
class Inventory:
    node: Node
    source: str        # said in the startup message
    nvml: Nvml | None  # for GPU-memory enforcement


def elsewhere(why: str) -> Inventory:
    """The inventory of a control plane whose jobs run on another backend's nodes: this
    machine is described (its name, CPUs and memory) but runs nothing."""
    return Inventory(local_node(), why, None)


def this_machine(gpus: str | None, node_file: Path | None) -> Inventory:
    if node_file is not None:
        node = local_node(node_file=node_file)
        return Inventory(node, f"node file {node_file}: {_gpus_text(node)}", None)
    if gpus:
        node = local_node(gpus=gpus)
        return Inventory(node, f"virtual GPUs from --gpus {gpus}: {_gpus_text(node)}", None)
    nvml = Nvml.load()
    node = local_node(nvml=nvml)
    if nvml is not None and node.devices:
        return Inventory(node, f"NVML: {_gpus_text(node)}", nvml)
    return Inventory(node, "no NVIDIA GPU found: a CPU-only node (use --gpus 4xH100-80GB to "
                           "declare virtual GPUs)", None)


def _gpus_text(node: Node) -> str:
    if not node.devices:
        return "no GPUs"
    models: dict[str, int] = {}
    for d in node.devices:
        models[d.model] = models.get(d.model, 0) + 1
    return ", ".join(f"{n} x {m}" for m, n in models.items())


def register(store: Store, node: Node, backend: str) -> list[str]:
    """Record this machine's node as one of ``backend`` (the backend whose jobs run here);
    cordon the other nodes that backend registered earlier. Returns the names cordoned."""
    store.upsert_nodes([node], backend=backend)
    cordoned = []
    for other, owner, _seen in store.list_nodes():
        if owner == backend and other.name != node.name and other.schedulable:
            store.set_schedulable(other.name, False)
            cordoned.append(other.name)
    return cordoned


def first_start(store: Store) -> str | None:
    """Create the defaults on a store without users; returns the operator's name, or None when
    the store was set up before."""
    if store.list_users():
        return None
    login = _login()
    user = operator_name()
    store.create_project(DEFAULT_PROJECT)
    store.put_queue(Queue(DEFAULT_QUEUE))
    unix_user = login if login and login != user and UNIX_NAME.match(login) else None
    store.create_user(user, [DEFAULT_PROJECT], unix_user=unix_user)
    return user


def operator_name() -> str:
    """The rota name of the operator a first start creates: the login name when it is a
    valid rota name, else ``admin``."""
    login = _login()
    return login if NAME.match(login) else "admin"


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def operator_token(store: Store, path: Path, user: str | None) -> tuple[str, bool]:
    """The operator token for the credentials file: the one already there when it is still
    valid here, else a new one (second value True). ``user``: the operator created by this
    start; otherwise the owner of an existing operator token is used."""
    current = read_credentials(path).get("token")
    if user is None and isinstance(current, str):
        try:
            if store.authenticate(current).operator:
                return current, False
        except Exception:  # unknown, revoked or malformed: replace it
            pass
    if user is None:
        owners = [t.user for t in store.list_tokens() if t.role is Role.OPERATOR]
        user = owners[0] if owners else store.list_users()[0]
    taken = {t.name for t in store.list_tokens(user)}
    name = next(f"rota-up-{n}" for n in range(1, len(taken) + 2) if f"rota-up-{n}" not in taken)
    try:
        return store.issue_token(user, name, Role.OPERATOR).token, True
    except AlreadyExists:  # another process issued that name in between
        return store.issue_token(user, f"{name}-{os.getpid()}", Role.OPERATOR).token, True


def read_credentials(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_credentials(path: Path, url: str, token: str, ca_file: str | None = None) -> None:
    """Atomically, mode 0600 from the start (the token never sits in a readable file);
    ``ca_file``: what the CLI verifies an https ``url`` with."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token} | ({"ca_file": ca_file} if ca_file else {}), f)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
