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
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from rota.core import InvalidSpec

KEYS = ("project", "queue")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass(frozen=True, slots=True)
class Defaults:
    project: str | None = None
    queue: str | None = None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rota" / "config.toml"


def read_config(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise InvalidSpec(str(path), f"not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSpec(str(path), f"cannot read the file ({exc.__class__.__name__})") from None
    for key, value in data.items():
        if key not in KEYS:
            raise InvalidSpec(f"{path}: {key}", f"unknown key; known: {', '.join(KEYS)}")
        if not isinstance(value, str) or not _NAME.match(value):
            raise InvalidSpec(f"{path}: {key}", f"expected a name such as \"vision\", got "
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
            raise InvalidSpec(f"ROTA_{key.upper()}", f"expected a name, got {value!r}")
        chosen[key] = value
    return Defaults(**chosen)
