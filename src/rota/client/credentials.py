"""Where the CLI finds the server and its token.

Order, first wins per value: ``ROTA_URL`` / ``ROTA_TOKEN`` in the environment, then the
credentials file ``$XDG_CONFIG_HOME/rota/credentials.json`` (``~/.config/rota/...`` without
``XDG_CONFIG_HOME``), written by ``rota up`` and ``rota login``, then the default URL
``http://127.0.0.1:8470`` (and no token). The file is ``{"url": ..., "token": ...}``, mode 0600,
with ``"ca_file"`` when the server's HTTPS certificate is checked against a CA file of its own
(``ROTA_CA_FILE`` first; without one, the system's CAs).
"""

from __future__ import annotations

import json
import os
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8470"


class Credentials(namedtuple("Credentials", "url token source ca_file", defaults=(None,))):
    """``url``; ``token`` (None: none); ``source``, where the URL came from (``ROTA_URL``, the
    file's path, or ``default``); ``ca_file``, CA certificates to verify an https URL with
    (None: the system's). A named tuple, not a dataclass: importing ``dataclasses`` costs the
    fast commands (``rota.cli.fast``) about 10 ms, a fifth of their start-up."""

    __slots__ = ()


def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rota" / "credentials.json"


def check_url(url: str, field: str = "url") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _invalid(field, f"expected a URL such as {DEFAULT_URL}, got {url!r}")
    try:
        parts.port
    except ValueError:
        raise _invalid(field, f"has a bad port: {url!r}") from None
    return url.rstrip("/")


def read_file(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise _invalid(str(path), f"cannot read the credentials file ({exc.__class__.__name__});"
                       " write it again with rota login URL") from None
    if not isinstance(data, dict):
        raise _invalid(str(path), "expected {\"url\": ..., \"token\": ...}")
    return {k: v for k, v in data.items() if k in ("url", "token", "ca_file")
            and isinstance(v, str)}


def discover(env: Mapping[str, str] | None = None) -> Credentials:
    env = os.environ if env is None else env
    path = credentials_path(env)
    stored = read_file(path)
    if env.get("ROTA_URL"):
        url, source = check_url(env["ROTA_URL"], "ROTA_URL"), "ROTA_URL"
    elif "url" in stored:
        url, source = check_url(stored["url"], f"{path}: url"), str(path)
    else:
        url, source = DEFAULT_URL, "default"
    if env.get("ROTA_TOKEN"):
        token = check_token(env["ROTA_TOKEN"], "ROTA_TOKEN")
    else:
        token = stored.get("token") and check_token(stored["token"], f"{path}: token")
    return Credentials(url, token, source, env.get("ROTA_CA_FILE") or stored.get("ca_file"))


def check_token(token: str, field: str = "token") -> str:
    """``token`` when it can go in an ``Authorization`` header as it is: visible ASCII, no
    space or line break (a line break would add a header of its own to every request). The
    error never shows the token."""
    bad = [c for c in token if not ("!" <= c <= "~")]
    if bad:
        what = "a line break" if any(c in "\r\n" for c in bad) else \
            "a space" if " " in bad else "a character outside visible ASCII"
        raise _invalid(field, f"the token has {what}; tokens are one word of visible ASCII: "
                              "copy it again (rota login URL, or ROTA_TOKEN)")
    return token


def _invalid(field: str, reason: str) -> Exception:
    """``rota.core.InvalidSpec``, imported only for a mistake: the fast commands of
    ``rota.cli.fast`` read credentials without loading rota's domain model."""
    from rota.core import InvalidSpec
    return InvalidSpec(field, reason)


def save(url: str, token: str, env: Mapping[str, str] | None = None,
         ca_file: str | None = None) -> Path:
    """Write the credentials file (mode 0600, replaced atomically); its path."""
    url, token = check_url(url), check_token(token)
    path = credentials_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"url": url, "token": token}
                  | ({"ca_file": ca_file} if ca_file else {}), f)
    os.chmod(partial, 0o600)
    os.replace(partial, path)
    return path
