"""HTTPS for a control plane that listens beyond loopback, and the checks of a certificate
given to it.

Tokens are bearer secrets: sent over plain HTTP on a network, whoever sees one traffic can act
as its owner. So ``rota up`` on any address but loopback serves HTTPS. Without ``--tls-cert``
it makes its own, in ``<data dir>/tls/``:

- ``ca.pem`` and ``ca.key``: a certificate authority of this control plane alone, made once
  (ten years) and kept across restarts, so that what a client pinned (``rota login``) stays
  valid;
- ``server.pem`` (the server's certificate followed by the CA's, the chain the server sends, so
  that a client sees the CA it is asked to trust) and ``server.key``: signed by that CA for
  this machine's names and addresses, ``localhost``, ``127.0.0.1`` and ``::1`` and the address
  listened on; on every interface (``0.0.0.0``, ``::``), every address of this machine. It is
  made again, by the same CA, when an address it should name is missing or it ends within 30
  days, so a client's pin holds.

Keys are 0600 in a 0700 directory. The CA's fingerprint (``rota.core.fingerprint``) is what
``rota up`` prints and ``rota login --fingerprint`` checks.

A key given with ``--tls-key`` that its group or others may read (or write) is refused: anyone
with a shell on this machine could then impersonate the server.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from rota.core import InvalidSpec
from rota.core.datadir import TLS_DIR
from rota.core.fingerprint import fingerprint

CA_DAYS = 3650
SERVER_DAYS = 365
RENEW_BEFORE_DAYS = 30
WILDCARDS = ("0.0.0.0", "", "::")


@dataclass(frozen=True, slots=True)
class Served:
    """What HTTPS is served with: the certificate chain and key files, the CA file a client
    verifies with, its fingerprint, and whether rota made them."""

    cert: Path
    key: Path
    ca: Path
    fingerprint: str
    generated: bool


def is_loopback(host: str) -> bool:
    """``host`` reaches only this machine: ``localhost``, ``127.0.0.0/8``, ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_private_key(key: Path) -> None:
    """``InvalidSpec("tls-key")`` when anyone but its owner may read or write ``key``."""
    try:
        mode = stat.S_IMODE(key.stat().st_mode)
    except OSError as exc:
        raise InvalidSpec("tls-key", f"cannot read {key}: {exc.strerror}") from None
    if mode & 0o077:
        raise InvalidSpec("tls-key", f"{key} has mode {mode:04o}: its group or other users "
                          "may read it, and whoever holds the key can impersonate this server; "
                          f"run chmod 600 {key} (and make a new key if others may have read it)")


def given(cert: Path, key: Path) -> Served:
    """A certificate and key from ``--tls-cert``/``--tls-key``: the key private, the pair
    loading together; the certificate file is what clients verify with."""
    import ssl
    check_private_key(key)
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidSpec("tls-cert", f"cannot serve HTTPS with {cert} and {key}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return Served(cert, key, cert, fingerprint(_last_der(cert)), False)


def _last_der(chain: Path) -> bytes:
    """The DER bytes of the last certificate of a PEM file: the one a client that pins what
    the server sends (``rota.client.pinning``) sees last in its chain."""
    import ssl
    end = "-----END CERTIFICATE-----"
    text = chain.read_text()
    last = text[:text.rindex(end) + len(end)]
    return ssl.PEM_cert_to_DER_cert(last[last.rindex("-----BEGIN CERTIFICATE-----"):])


def own(directory: Path, host: str) -> Served:
    """This control plane's own CA and a server certificate for ``host`` (module docstring)."""
    from cryptography.hazmat.primitives import serialization

    where = directory / TLS_DIR
    where.mkdir(mode=0o700, exist_ok=True)
    os.chmod(where, 0o700)
    ca_cert, ca_key = _ca(where)
    dns, ips = names_for(host)
    chain, key = where / "server.pem", where / "server.key"
    if not _covers(chain, key, ca_cert, dns, ips):
        cert_pem, key_pem = _server(ca_cert, ca_key, dns, ips)
        _write(key, key_pem, 0o600)
        _write(chain, cert_pem + ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    for path in (key, where / "ca.key"):
        os.chmod(path, 0o600)
    return Served(chain, key, where / "ca.pem",
                  fingerprint(ca_cert.public_bytes(serialization.Encoding.DER)), True)


def names_for(host: str) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses a certificate for ``host`` names."""
    dns = {"localhost", socket.gethostname(), socket.getfqdn()}
    ips = {"127.0.0.1", "::1"}
    if host in WILDCARDS:
        ips |= _local_addresses()
    else:
        try:
            ips.add(str(ipaddress.ip_address(host)))
        except ValueError:
            dns.add(host)
    for name in sorted(dns):
        ips |= _resolved(name)
    return sorted(d for d in dns if d and _dns_name(d)), sorted(ips)


def _dns_name(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return False
    except ValueError:
        return all(part.replace("-", "").isalnum() for part in name.split("."))


def _resolved(name: str) -> set[str]:
    try:
        return {str(ipaddress.ip_address(info[4][0].split("%")[0]))
                for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError, ValueError):
        return set()


def _local_addresses() -> set[str]:
    """This machine's own addresses (Linux: the kernel's local routes and IPv6 interface
    table), link-local ones left out (a URL cannot name them without an interface)."""
    found: set[str] = set()
    try:
        previous = ""
        for line in Path("/proc/net/fib_trie").read_text().splitlines():
            if "/32 host LOCAL" in line:
                found.add(previous.split()[-1])
            previous = line
    except OSError:
        pass
    try:
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            found.add(str(ipaddress.ip_address(bytes.fromhex(line.split()[0]))))
    except (OSError, ValueError, IndexError):
        pass
    out = set()
    for text in found:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if not address.is_link_local:
            out.add(str(address))
    return out


def _ca(where: Path):
    """The CA's certificate and key, made the first time."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_path, key_path = where / "ca.pem", where / "ca.key"
    if cert_path.exists() and key_path.exists():
        return (x509.load_pem_x509_certificate(cert_path.read_bytes()),
                serialization.load_pem_private_key(key_path.read_bytes(), None))
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         f"rota control plane CA ({socket.gethostname()})")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    _write(key_path, _pem_key(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert, key


def _server(ca_cert, ca_key, dns: list[str], ips: list[str]) -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i))
                                              for i in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        socket.gethostname() or "rota")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=SERVER_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _covers(chain: Path, key: Path, ca_cert, dns: list[str], ips: list[str]) -> bool:
    """The server certificate there is the CA's, names everything wanted and is not about to
    end."""
    from cryptography import x509
    if not (chain.exists() and key.exists()):
        return False
    try:
        cert = x509.load_pem_x509_certificate(chain.read_bytes())
        cert.verify_directly_issued_by(ca_cert)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except Exception:  # noqa: BLE001 - unreadable, foreign or without names: make it again
        return False
    named = set(sans.get_values_for_type(x509.DNSName)) | {
        str(a) for a in sans.get_values_for_type(x509.IPAddress)}
    ends = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    return set(dns) | set(ips) <= named and ends > datetime.timedelta(days=RENEW_BEFORE_DAYS)


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomically, with ``mode`` from the start."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
