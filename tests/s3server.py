"""A real S3-compatible server for a test: the binary ``.ci/s3`` builds (gofakes3, checking
each request's AWS Signature Version 4, and sending at most ``bandwidth`` bytes per second),
started over a directory of buckets seeded from ``seed/<bucket>/<key>``, and stopped after.

``ROTA_TEST_S3_SERVER`` names the binary (``eval "$(bash .ci/s3)"``); without it the test skips
(fails where ``CI`` is set)."""

from __future__ import annotations

import os
import secrets
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from requires import required_env


@dataclass(frozen=True)
class Server:
    env: dict[str, str]  # what points rota's S3 client at it (``AWS_*``)
    log: Path            # its request log

    def object_reads(self) -> int:
        """How many objects it was asked for (GET of an object) so far."""
        return self.log.read_text().count("GET OBJECT")


@contextmanager
def s3_server(seed: Path, work: Path, bandwidth: int = 0) -> Iterator[Server]:
    binary = required_env("ROTA_TEST_S3_SERVER", 'run eval "$(bash .ci/s3)"',
                          "S3-compatible dataset sources")
    key, secret = "rota" + secrets.token_hex(4), secrets.token_hex(16)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "requests.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([binary, "-verbose", "-dir", str(work / "store"), "-seed",
                                 str(seed), "-access-key", key, "-secret-key", secret,
                                 "-bandwidth", str(bandwidth)],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        address = proc.stdout.readline().strip()
        if not address.startswith("http://"):
            raise RuntimeError(f"the S3 test server did not start: {log.read_text()}")
        yield Server({"AWS_ENDPOINT_URL": address, "AWS_ACCESS_KEY_ID": key,
                      "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"}, log)
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


@contextmanager
def env_of(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set within (the control plane's environment)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
