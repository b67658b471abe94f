"""The caller's environment a job takes: ``rota run --export``, ``--env``, ``--env-file``, and a
job file's ``export``. Read by both paths (``rota.cli.jobs`` and ``rota.cli.fastjobs``), so this
module imports nothing of typer, rich, pydantic or rota's domain model.

The environment is read here, on the client, and sent as the job's ``env``; the server adds
nothing of its own beyond what ``rota.backends.env`` says a job inherits. What is sent, lowest
first, later ones winning:

1. ``--export``: ``ALL`` (every variable of yours that may be sent, see below), ``NONE``
   (nothing), or a comma-separated list of names (those of yours, a name you do not have is
   left out, as ``sbatch`` does), ``NAME=VALUE`` items (that value) and ``ALL`` (``ALL,K=V``).
   Without ``--export``, ``rota run`` sends ``ALL`` when the server is on this machine (where
   it also runs the job in your current directory, ``rota.cli.making.on_this_machine``), and
   ``NONE`` otherwise: a path of this machine means nothing on another. A job file's
   ``export`` (``all``, ``none`` or a list of names) says the same; without it, ``none``;
2. ``--env-file FILE``: one ``NAME=VALUE`` a line (``export NAME=VALUE`` too; blank lines and
   ``#`` comments skipped; a value in matching single or double quotes loses them, nothing
   else is expanded), then a job file's ``env``;
3. ``--env NAME=VALUE``, given once per variable.

What ``ALL`` never sends (as ``sbatch --export=ALL`` does, less what would be wrong or unsafe
in a job that rota places and pins):

- ``NEVER_PREFIXES`` and ``NEVER``: rota's own ``ROTA_*`` (among them your ``ROTA_TOKEN`` and
  ``ROTA_URL``: a job gets its own), the devices of the shell you run in (``CUDA_VISIBLE_DEVICES``
  and its kin, the MPS client's limits: the job gets its own), and Slurm's ``SLURM_*``,
  ``SBATCH_*``, ``SRUN_*``, ``SALLOC_*`` (inside an allocation; Slurm would read them as the
  job's options). Naming one of these in an ``--export`` list is refused;
- ``ACCOUNT``: ``HOME``, ``USER``, ``LOGNAME``, ``SHELL``, ``MAIL``: the account the job runs as
  sets them;
- ``SHELL_NOISE`` and ``SESSION``: what belongs to your shell and login (``PWD``, ``OLDPWD``,
  ``SHLVL``, ``_``, the prompt, ``SSH_AUTH_SOCK``, ``DISPLAY``, ...), and names that are no
  variable name (bash's exported functions);
- torchrun's names (``TORCH_NAMES``): rota sets them for each replica; a job that wants its
  own says so with ``--env`` or an ``--export`` list.

A job's environment has limits (``rota.spec.limits``, here as ``MAX_ENV_*``, checked equal by
the tests): an environment over them is refused here, naming the option, with what to do.
"""

from __future__ import annotations

import os
import re
from typing import Mapping, NamedTuple, Sequence

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NEVER_PREFIXES = ("ROTA_", "SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "CUDA_MPS_")
NEVER = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
                   "GPU_DEVICE_ORDINAL", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})
ACCOUNT = frozenset({"HOME", "USER", "LOGNAME", "SHELL", "MAIL"})
SHELL_NOISE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PS4", "PROMPT_COMMAND",
                         "COLUMNS", "LINES", "HOSTNAME"})
SESSION = frozenset({"SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_CONNECTION", "SSH_CLIENT",
                     "SSH_TTY", "DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR", "XDG_SESSION_ID",
                     "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "DBUS_SESSION_BUS_ADDRESS",
                     "TMUX", "TMUX_PANE", "STY", "WINDOWID"})
TORCH_NAMES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
               "LOCAL_WORLD_SIZE", "NODE_RANK")  # rota.backends.env.TORCH_NAMES
MAX_ENV_VARS = 1000           # rota.spec.limits.MAX_ENV_VARS
MAX_ENV_CHARS = 512 * 1024    # rota.spec.limits.MAX_ENV_CHARS
MAX_ARG_CHARS = 128 * 1024 - 1  # rota.spec.limits.MAX_ARG_CHARS
FEWER = ("send fewer: --export NONE, or a list of the names the job needs "
         "(--export PATH,VIRTUAL_ENV)")
LARGER = "pass large settings in a file of the working directory"


class EnvOptionError(ValueError):
    """A mistake of ``--export``, ``--env`` or ``--env-file`` (or a job file's ``export``),
    named by ``option``."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}")
        self.option, self.reason = option, reason


class Export(NamedTuple):
    """What to take from the caller: ``everything`` (``ALL``), ``names`` (of the caller's
    variables), ``values`` (set as given). A named tuple: the fast path loads no dataclasses."""

    everything: bool = False
    names: tuple[str, ...] = ()
    values: Mapping[str, str] = {}


NONE = Export()
ALL = Export(everything=True)


def never_sent(name: str) -> bool:
    return name.startswith(NEVER_PREFIXES) or name in NEVER


def sendable(name: str) -> bool:
    """Whether ``ALL`` sends the caller's variable ``name``."""
    return bool(NAME.match(name)) and not (never_sent(name) or name in ACCOUNT
                                           or name in SHELL_NOISE or name in SESSION
                                           or name in TORCH_NAMES)


def parse_export(text: str, option: str = "--export") -> Export:
    """``ALL``, ``NONE`` (either case), or ``NAME``, ``NAME=VALUE`` and ``ALL`` items, comma-
    separated."""
    if text.strip().upper() == "NONE":
        return NONE
    everything, names, values = False, [], {}
    for item in text.split(","):
        item = item.strip()
        name, eq, value = item.partition("=")
        if not eq and name.upper() == "ALL":
            everything = True
            continue
        if not eq and name.upper() == "NONE":
            raise EnvOptionError(option, "NONE sends nothing and goes alone; give variables "
                                 "with --env NAME=VALUE")
        _check_name(name, option, item)
        if never_sent(name):
            raise EnvOptionError(option, f"{name} is never sent: {_why_never(name)}")
        if eq:
            values[name] = value
        else:
            names.append(name)
    return Export(everything, tuple(names), values)


def export_of_file(value: object) -> Export:
    """A job file's ``export``: ``all``, ``none`` or a list of names."""
    if isinstance(value, str) and value.strip().upper() in ("ALL", "NONE"):
        return parse_export(value, "export")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        for k, name in enumerate(value):
            _check_name(name, f"export[{k}]", name)
            if never_sent(name):
                raise EnvOptionError(f"export[{k}]", f"{name} is never sent: "
                                     f"{_why_never(name)}")
        return Export(names=tuple(value))
    raise EnvOptionError("export", f"expected all, none or a list of variable names, got "
                         f"{value!r}")


def parse_env(items: Sequence[str] | None) -> dict[str, str]:
    """``--env NAME=VALUE``, given any number of times."""
    out: dict[str, str] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq:
            raise EnvOptionError("--env", f"expected NAME=VALUE, got {item!r} (to send your "
                                 f"own {name} as it is, name it in --export: "
                                 f"--export ALL,{name})")
        _check_name(name, "--env", item)
        out[name] = value
    return out


def read_env_file(path: str | None) -> dict[str, str]:
    """``--env-file FILE`` (see the module)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvOptionError("--env-file", f"cannot read {path}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("export "):
            text = text[len("export "):].lstrip()
        name, eq, value = text.partition("=")
        where = f"{path} line {number}"
        if not eq:
            raise EnvOptionError("--env-file", f"{where}: expected NAME=VALUE, got {text!r}")
        _check_name(name, "--env-file", f"{where}: {name}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[name] = value
    return out


def default_export(here: bool) -> Export:
    """What ``rota run`` sends without ``--export``: ``ALL`` with a server on this machine."""
    return ALL if here else NONE


def taken(export: Export, environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's variables ``export`` takes (step 1 of the module)."""
    out = {k: v for k, v in environ.items() if sendable(k)} if export.everything else {}
    out.update((k, environ[k]) for k in export.names if k in environ)
    out.update(export.values)
    return out


def job_env(export: Export, environ: Mapping[str, str] | None = None,
            *over: Mapping[str, str]) -> dict[str, str]:
    """What a job is sent: ``export``'s variables of ``environ`` (None: this process's), then
    each of ``over`` in turn (``--env-file``, then ``--env``), checked against the limits."""
    env = taken(export, os.environ if environ is None else environ)
    captured = bool(env)
    for more in over:
        env.update(more)
    check_size(env, "--export" if captured else "--env")
    return env


def check_size(env: Mapping[str, str], option: str) -> None:
    """``rota.spec.limits.check_env``'s limits, said with what to do about them."""
    advice = FEWER if option == "--export" else LARGER
    if len(env) > MAX_ENV_VARS:
        raise EnvOptionError(option, f"the job would get {len(env)} variables; at most "
                             f"{MAX_ENV_VARS} are allowed: {advice}")
    for name, value in env.items():
        if len(name) + len(value) + 1 > MAX_ARG_CHARS:
            raise EnvOptionError(option, f"{name} is {len(value)} characters long; a variable "
                                 f"must stay under {MAX_ARG_CHARS + 1} characters (Linux "
                                 f"refuses to start a program with a longer one): {advice}")
    total = sum(len(k) + len(v) for k, v in env.items())
    if total > MAX_ENV_CHARS:
        raise EnvOptionError(option, f"the job's variables would hold {total} characters; at "
                             f"most {MAX_ENV_CHARS} are allowed: {advice}")


def _check_name(name: str, option: str, item: str) -> None:
    if not NAME.match(name):
        raise EnvOptionError(option, f"{item!r}: {name!r} is not a variable name (letters, "
                             "digits and _, not starting with a digit)")


def _why_never(name: str) -> str:
    if name.startswith("ROTA_"):
        return "rota's own variables are set by rota for each job (your ROTA_TOKEN is yours)"
    if name.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")):
        return "Slurm reads these as a job's options, and rota places the job itself"
    return "a job's devices and their limits are set by rota for the devices it placed it on"
