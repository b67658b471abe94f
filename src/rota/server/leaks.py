"""Tokens that reached a log of the control plane are revoked when it starts.

A token is a bearer secret; a log is read by more people, kept longer and copied further
(support tickets, log shippers) than a credentials file. An earlier version, a hand-run
command or a debug print may have written one into ``rota up``'s log, and the store keeps only
hashes (``rota.store.tokens``), so it cannot be looked up by its text. At every start this
module reads the control plane's own logs in the data directory (``rota-up.log``, which
``rota up -d`` writes, and its rotated copies ``rota-up.log.1``, ``rota-up.log.2.gz``, ...),
hashes every string shaped like a token (``rota_`` and 43 URL-safe base64 characters), and
revokes each live token whose hash matches. Each is logged by user, name, role and the
display prefix ``rota token list`` shows, never its secret. An operator token of the
credentials file so revoked is replaced by a new one as the start goes on
(``rota.control.setup.operator_token``).

Jobs' own logs are their owners' and are not read.
"""

from __future__ import annotations

import gzip
import logging
import re
from pathlib import Path

from rota.core.datadir import LOG_FILE
from rota.store import Store, TokenInfo
from rota.store.tokens import token_hash

log = logging.getLogger("rota.server")

TOKEN_TEXT = re.compile(rb"rota_[A-Za-z0-9_-]{43}")
CHUNK = 1 << 20
OVERLAP = 47  # a token cut by a chunk's end is whole in this much of the next read


def log_files(directory: Path) -> list[Path]:
    """The control plane's own logs in ``directory``: regular files, never followed links."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    return sorted(p for p in entries
                  if (p.name == LOG_FILE or p.name.startswith(LOG_FILE + "."))
                  and p.is_file() and not p.is_symlink())


def token_texts(path: Path) -> set[str]:
    """Every token-shaped string in ``path`` (gzip-compressed when it ends in ``.gz``)."""
    found: set[str] = set()
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            tail = b""
            while chunk := f.read(CHUNK):
                text = tail + chunk
                found |= {m.decode("ascii") for m in TOKEN_TEXT.findall(text)}
                tail = text[-OVERLAP:]
    except (OSError, EOFError) as exc:
        log.warning("cannot read %s to look for tokens in it: %s", path, exc)
    return found


def revoke_leaked(store: Store, directory: Path) -> list[tuple[TokenInfo, str]]:
    """Revoke every live token written in a log of ``directory``; each with its log's path."""
    where: dict[str, str] = {}
    for path in log_files(directory):
        for text in token_texts(path):
            where.setdefault(token_hash(text), str(path))
    if not where:
        return []
    out = []
    for hashed, info in sorted(store.revoke_hashed(sorted(where)).items()):
        log.warning("token %r of user %s (%s, %s...) was written to %s: revoked, as anyone "
                    "who read that log could use it; issue a new one with rota token create",
                    info.name, info.user, str(info.role), info.display, where[hashed])
        out.append((info, where[hashed]))
    return out
