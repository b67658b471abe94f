"""How a certificate is named to a person: ``SHA256:`` and the base64 of the SHA-256 of its DER
bytes, without padding, as ``ssh`` names host keys. ``rota up`` prints its CA's; ``rota login``
shows the one a server presents and compares it with ``--fingerprint``, which may also be given
as ``openssl x509 -noout -fingerprint -sha256`` prints it (hex pairs with colons)."""

from __future__ import annotations

import base64
import binascii
import hashlib

PREFIX = "SHA256:"


def fingerprint(der: bytes) -> str:
    digest = hashlib.sha256(der).digest()
    return PREFIX + base64.b64encode(digest).decode("ascii").rstrip("=")


def digest_of(text: str) -> bytes | None:
    """The 32 bytes a fingerprint written either way stands for; None when ``text`` is
    neither."""
    text = text.strip()
    body = text[len(PREFIX):] if text.upper().startswith(PREFIX) else text
    hexed = body.replace(":", "")
    if len(hexed) == 64:
        try:
            return bytes.fromhex(hexed)
        except ValueError:
            pass
    try:
        digest = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return digest if len(digest) == 32 else None
