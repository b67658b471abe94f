"""A user's defaults for new jobs: which project and queue a job goes to when none is named.

Where a job's project (and likewise its queue) comes from, first wins:

1. the command's option: ``--project``, ``--queue``;
2. for ``rota submit``, the job file's ``project`` and ``queue``;
3. the environment: ``ROTA_PROJECT``, ``ROTA_QUEUE``;
4. the config file ``$XDG_CONFIG_HOME/rota/config.toml`` (``~/.config/rota/config.toml``)::

       project = "vision"
       queue = "research"

5. rota's choice: your only project; the queue named ``default`` when your project may use
   it, else the only queue it may use (``rota.cli.choose``).

This module reads 3 and 4 (``Defaults``); an unknown key or a value that is not a name is an
error naming the file and the key, so that a typo is not silently ignored.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path

KEYS = ("project", "queue")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class Defaults(namedtuple("Defaults", KEYS, defaults=(None, None))):
    """``project`` and ``queue`` (None: not set). A named tuple, and ``tomllib`` and
    ``rota.core`` imported only when needed, because ``rota run`` reads this on its fast path
    (``rota.cli.fast``), where a dataclass alone costs a fifth of the start-up."""

    __slots__ = ()


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rota" / "config.toml"


def read_config(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(str(path), f"cannot read the file ({exc.__class__.__name__})") from None
    import tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(str(path), f"not valid TOML: {exc}") from None
    for key, value in data.items():
        if key not in KEYS:
            raise _invalid(f"{path}: {key}", f"unknown key; known: {', '.join(KEYS)}")
        if not isinstance(value, str) or not _NAME.match(value):
            raise _invalid(f"{path}: {key}", f"expected a name such as \"vision\", got "
                           f"{value!r}")
    return data


def defaults(env: Mapping[str, str] | None = None) -> Defaults:
    """The environment's defaults over the config file's."""
    env = os.environ if env is None else env
    stored = read_config(config_path(env))
    chosen = {}
    for key in KEYS:
        value = env.get(f"ROTA_{key.upper()}") or stored.get(key)
        if value is not None and not _NAME.match(value):
            raise _invalid(f"ROTA_{key.upper()}", f"expected a name, got {value!r}")
        chosen[key] = value
    return Defaults(**chosen)


def _invalid(field: str, reason: str) -> Exception:
    from rota.core import InvalidSpec
    return InvalidSpec(field, reason)
