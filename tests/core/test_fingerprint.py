"""A certificate's fingerprint as ``rota up`` prints it and ``rota login --fingerprint`` reads
it: ``SHA256:`` and unpadded base64, as ssh writes it; also read in the hex form ``openssl x509
-fingerprint -sha256`` prints, which must name the same certificate."""

from __future__ import annotations

import ssl
import subprocess

from rota.core.fingerprint import digest_of, fingerprint


def test_the_printed_and_the_openssl_forms_name_the_same_certificate(tmp_path):
    cert = tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=x",
                    "-keyout", str(tmp_path / "k.pem"), "-out", str(cert)],
                   check=True, capture_output=True)
    openssl = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in",
                              str(cert)], check=True, capture_output=True, text=True).stdout
    hexed = openssl.strip().split("=", 1)[1]  # AB:CD:...
    printed = fingerprint(ssl.PEM_cert_to_DER_cert(cert.read_text()))
    assert printed.startswith("SHA256:") and len(printed) == 7 + 43 and "=" not in printed
    assert digest_of(printed) == digest_of(hexed) == bytes.fromhex(hexed.replace(":", ""))
    assert digest_of(printed.lower().replace("sha256:", "SHA256:")) != digest_of(printed)


def test_what_is_no_fingerprint_reads_as_none():
    for text in ("", "SHA256:", "SHA256:abc", "MD5:" + "A" * 43, "zz" * 32, "A" * 40):
        assert digest_of(text) is None, text
