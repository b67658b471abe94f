"""``rota up --backend kubernetes`` in a subprocess against the test cluster, and the ``rota``
command run against it, as a new user types them.

The control plane uses the test's namespace for its Pods and sees only the test's kwok nodes
(``--kube-node-selector rota.dev/test-group=<namespace>``); its files and the CLI's
credentials live in the test's temporary directory (``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from commands import rota_command

START_TIMEOUT_S = 90.0  # a loaded machine imports slowly; never asserted on


class KubeServer:
    def __init__(self, root: Path, cluster, *extra: str) -> None:
        self.root, self.cluster = root, cluster
        self.env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
        self.env.update(XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "share"),
                        COLUMNS="160")  # a terminal wide enough for the tables
        self.credentials = root / "config" / "rota" / "credentials.json"
        self.log = root / "rota-up.log"
        self.argv = [sys.executable, "-m", "rota.cli.main", "up", "--backend", "kubernetes",
                     "--kubeconfig", os.environ["ROTA_TEST_KUBECONFIG"],
                     "--kube-namespace", cluster.namespace, "--kube-default-image", "busybox",
                     "--kube-node-selector", cluster.selector, "--port", "0",
                     "--data-dir", str(root / "data"), "--interval", "0.3", *extra]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True,
                                         cwd=self.root)
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"rota up exited with {self.proc.returncode}:\n"
                                     f"{self.output()}")
            if self.credentials.exists() and self.rota("whoami").returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"rota up did not become ready:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def rota(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*rota_command(), *args], env=self.env, cwd=self.root, text=True,
                              input=stdin, capture_output=True, timeout=120)

    def ok(self, *args: str) -> str:
        done = self.rota(*args)
        assert done.returncode == 0, f"rota {' '.join(args)}: {done.stderr}\n{self.output()}"
        return done.stdout

    def json(self, *args: str) -> Any:
        """``rota ARGS --json``, the option before a ``--`` that starts a command."""
        at = args.index("--") if "--" in args else len(args)
        return json.loads(self.ok(*args[:at], "--json", *args[at:]))

    def submit_file(self, name: str, text: str) -> str:
        """Submit the job file ``text``, written as ``<root>/<name>.yaml``; its job's id."""
        path = self.root / f"{name}.yaml"
        path.write_text(text)
        return self.json("submit", str(path))["id"]

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc = None
