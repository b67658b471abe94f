"""The options of ``rota up`` read into what ``rota.server.ServerConfig`` takes: addresses,
the database URL (never echoed with its password), retention, and each backend's options,
those of another backend refused. Every refusal names its option (``error: --OPTION:
REASON``, exit 2) before anything starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from rota.core import InvalidSpec


def check_url(text: str, option: str) -> None:
    from urllib.parse import urlsplit

    from rota.cli.app import fail
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        fail(option, InvalidSpec("", f"{text!r} is not a URL: {exc}"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(option, InvalidSpec("", f"expected http://HOST[:PORT] or https://..., got "
                                 f"{text!r}"))


def address(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT`` for 127.0.0.1) as a (host, port)."""
    from rota.cli.app import fail
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(option, InvalidSpec("", f"must be HOST:PORT with a port 0-65535, got {text!r}"))
    return host, int(port)


def backend_setup(backend: Optional[str], values: Mapping[str, Any]) -> tuple[str, dict, Any]:
    """The chosen backend's name (several joined by commas: ``slurm,kubernetes``), its ``ServerConfig.backend_options`` and this machine's
    inventory, each asked of its factory (``rota.server.backends``): an option of another
    backend, a bad value or an unknown backend exits naming the option."""
    from rota.cli.app import fail
    from rota.server.backends import DEFAULT_BACKEND, check_flags
    name = backend or DEFAULT_BACKEND
    try:
        factory = check_flags(name, values)
        return factory.name, factory.options(values), factory.inventory(values)
    except InvalidSpec as exc:
        fail(exc.field if exc.field.startswith("--") else f"--{exc.field}",
             InvalidSpec("", exc.reason))


def error_option(backend: str, field: str) -> Optional[str]:
    """The ``rota up`` option an error of the control plane's start is about: one of the
    backend's (its factory's ``fields``), ``--backend`` or a TLS file; None: the store's."""
    from rota.server.backends import factory_of
    if field == "backend":
        return "--backend"
    option = factory_of(backend).fields.get(field)
    if option is None and field.split(".")[0] in ("tls-cert", "tls-key"):
        option = f"--{field.split('.')[0]}"
    return option


def tls_files(cert: Optional[Path], key: Optional[Path],
              insecure_http: bool) -> Optional[tuple[Path, Path]]:
    """``--tls-cert`` and ``--tls-key`` as absolute paths, both or neither; never with
    ``--insecure-http``."""
    from rota.cli.app import fail
    if (cert is None) != (key is None):
        fail("--tls-key" if key is None else "--tls-cert",
             InvalidSpec("", "give both --tls-cert and --tls-key to serve HTTPS"))
    if cert is None or key is None:
        return None
    if insecure_http:
        fail("--insecure-http", InvalidSpec("", "give --insecure-http or --tls-cert, not both"))
    return cert.expanduser().resolve(), key.expanduser().resolve()


def retention_of(workdirs: str, logs: str, uploads: str):
    """The ``--keep-*`` options as a ``Retention``, each error naming its option."""
    from rota.cli.app import fail
    from rota.core import parse_duration_s
    from rota.server.retention import Retention
    seconds = {}
    for option, text in (("keep-workdirs", workdirs), ("keep-logs", logs),
                         ("keep-uploads", uploads)):
        try:
            seconds[option] = parse_duration_s(text, option)
        except InvalidSpec as exc:
            fail(f"--{option}", InvalidSpec("", exc.reason))
    try:
        return Retention(seconds["keep-workdirs"], seconds["keep-logs"], seconds["keep-uploads"])
    except InvalidSpec as exc:
        fail(f"--{exc.field}", InvalidSpec("", exc.reason))


def database_url(db: Optional[str], db_file: Optional[Path]) -> Optional[str]:
    """The URL from ``--db``/``ROTA_DB_URL`` or ``--db-file``; a warning when a password was
    typed on the command line."""
    import os

    from rota.cli.app import fail
    if db is not None and db_file is not None:
        fail("--db-file", InvalidSpec("", "give --db (or ROTA_DB_URL) or --db-file, not both"))
    if db_file is not None:
        try:
            lines = db_file.read_text().splitlines()
        except OSError as exc:
            fail("--db-file", InvalidSpec("", f"cannot read {db_file}: {exc.strerror}"))
        if not lines or not lines[0].strip():
            fail("--db-file", InvalidSpec("", f"{db_file} is empty; write the URL on its first "
                                              "line"))
        return lines[0].strip()
    if db is not None and db != os.environ.get("ROTA_DB_URL") and _has_password(db):
        print("warning: --db: the database password on the command line is visible to every "
              "local user in ps; give the URL in ROTA_DB_URL or --db-file instead",
              file=sys.stderr)
    return db


def _has_password(url: str) -> bool:
    from sqlalchemy.engine import make_url
    try:
        return bool(make_url(url).password)
    except Exception:  # not a URL: the store says so, naming --db
        return False
