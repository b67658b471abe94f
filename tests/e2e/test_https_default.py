"""``rota up`` beyond loopback serves HTTPS without being asked: with a CA of its own, made
once in the data directory (keys 0600) and kept across restarts, and a server certificate for
the address listened on, this machine's names and, on every interface, its addresses; the CA's
fingerprint is printed. ``--insecure-http`` keeps plain HTTP, with a warning; loopback stays
plain HTTP. A ``--tls-key`` its group or others may read is refused, naming the file and mode.

Real ``rota up`` processes, real HTTPS on an address of this machine that is not loopback."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import ssl
import stat
import subprocess
import sys

import httpx
import pytest
from rotaup import up_once
from serverkit import RotaServer, make_cert, outside_address

ADDRESS = outside_address()
# a machine with loopback alone cannot have these tests, CI or not (``may_skip``)
_no_address = pytest.mark.skipif(ADDRESS is None,
                                 reason="this machine has no address but loopback to serve on")


def needs_address(test):
    return pytest.mark.may_skip(_no_address(test))


def fingerprint_of(pem_file) -> str:
    der = ssl.PEM_cert_to_DER_cert(pem_file.read_text())
    return "SHA256:" + base64.b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")


def names_in(chain_file) -> set[str]:
    from cryptography import x509
    cert = x509.load_pem_x509_certificate(chain_file.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(sans.get_values_for_type(x509.DNSName)) | {
        str(a) for a in sans.get_values_for_type(x509.IPAddress)}


def whoami(url: str, token: str, verify) -> int:
    return httpx.get(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {token}"},
                     verify=verify, timeout=10).status_code


@needs_address
def test_beyond_loopback_it_serves_https_with_a_ca_of_its_own_kept_across_restarts(tmp_path):
    server = RotaServer(tmp_path, extra=("--host", ADDRESS))
    try:
        server.start()
        assert server.url.startswith(f"https://{ADDRESS}:")
        tls = server.data_dir / "tls"
        ca, chain = tls / "ca.pem", tls / "server.pem"
        for key in ("ca.key", "server.key"):
            assert stat.S_IMODE((tls / key).stat().st_mode) == 0o600, key
        assert stat.S_IMODE(tls.stat().st_mode) == 0o700
        printed = fingerprint_of(ca)
        assert f"CA fingerprint: {printed}" in server.output()
        assert f"--fingerprint {printed}" in server.output()
        assert {ADDRESS, "127.0.0.1", "localhost", socket.gethostname()} <= names_in(chain)
        assert json.loads(server.credentials.read_text())["ca_file"] == str(ca)
        # the CLI on this machine verifies it with the CA the credentials file names
        who = subprocess.run([sys.executable, "-m", "rota.cli.main", "whoami", "--json"],
                             env=server.env, capture_output=True, text=True, timeout=60)
        assert who.returncode == 0 and json.loads(who.stdout)["role"] == "operator", who.stderr
        assert whoami(server.url, server.token, ssl.create_default_context(cafile=ca)) == 200
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            whoami(server.url, server.token, True)  # the system's CAs only
        with pytest.raises(httpx.HTTPError):
            whoami(server.url.replace("https://", "http://"), server.token, True)
        # jobs verify the API with the same CA
        assert (server.data_dir / "api-certificate.pem").read_bytes() == ca.read_bytes()

        before = ca.read_bytes()
        server.restart()
        assert ca.read_bytes() == before  # what clients pinned stays valid
        assert server.output().count(f"CA fingerprint: {printed}") == 2
        assert whoami(server.url, server.token, ssl.create_default_context(cafile=ca)) == 200
    finally:
        server.close()


@needs_address
def test_on_every_interface_the_certificate_names_this_machine_s_addresses(tmp_path):
    server = RotaServer(tmp_path, extra=("--host", "0.0.0.0"))
    try:
        server.start()
        port = server.url.rsplit(":", 1)[1]
        ca = ssl.create_default_context(cafile=server.data_dir / "tls" / "ca.pem")
        assert names_in(server.data_dir / "tls" / "server.pem") >= {ADDRESS, "127.0.0.1"}
        for host in (ADDRESS, "127.0.0.1", "localhost"):
            assert whoami(f"https://{host}:{port}", server.token, ca) == 200, host
        for name in {socket.gethostname(), socket.getfqdn()}:
            assert whoami(f"https://{name}:{port}", server.token, ca) == 200, name
        assert "0.0.0.0" not in names_in(server.data_dir / "tls" / "server.pem")
    finally:
        server.close()


@needs_address
def test_insecure_http_keeps_plain_http_beyond_loopback_with_a_warning(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "loopback").mkdir()
    server = RotaServer(tmp_path / "open", extra=("--host", ADDRESS, "--insecure-http"))
    try:
        server.start()
        assert server.url.startswith(f"http://{ADDRESS}:")
        assert f"warning: --insecure-http: plain HTTP on {ADDRESS}" in server.output()
        assert not (server.data_dir / "tls").exists()
        login = subprocess.run(
            [sys.executable, "-m", "rota.cli.main", "login", server.url], input=server.token,
            env={**server.env, "XDG_CONFIG_HOME": str(tmp_path / "user")}, capture_output=True,
            text=True, timeout=60)
        assert login.returncode == 0, login.stderr
        assert f"warning: {server.url} is plain HTTP: the token crosses the network" in \
            login.stderr
    finally:
        server.close()
    loopback = RotaServer(tmp_path / "loopback")  # as before: no certificate, no warning
    try:
        loopback.start()
        assert loopback.url.startswith("http://127.0.0.1:")
        assert "--insecure-http" not in loopback.output()
        assert "HTTPS" not in loopback.output()
        assert not (loopback.data_dir / "tls").exists()
    finally:
        loopback.close()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604], ids=lambda m: f"{m:04o}")
def test_a_tls_key_its_group_or_others_may_read_is_refused(tmp_path, mode):
    cert, key = make_cert(tmp_path)
    key.chmod(mode)
    env = RotaServer(tmp_path).env
    result = up_once(env, "--port", "0", "--data-dir", str(tmp_path / "data"), "--gpus",
                     "1xH100-80GB", "--tls-cert", str(cert), "--tls-key", str(key), timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: --tls-key: {key.resolve()} has mode {mode:04o}"), \
        result.stderr
    assert f"chmod 600 {key.resolve()}" in result.stderr
    assert not (tmp_path / "data").exists()
