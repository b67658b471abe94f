"""``rota up --backend kubernetes`` in a subprocess against the test cluster, and the ``rota``
command run against it, as a new user types them.

The control plane uses the test's namespace for its Pods and sees only the test's kwok nodes
(``--kube-node-selector rota.dev/test-group=<namespace>``); its files and the CLI's
credentials live in the test's temporary directory (``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from commands import rota_command
from rotaup import RotaUp

START_TIMEOUT_S = 90.0  # a loaded machine imports slowly; never asserted on


class KubeServer(RotaUp):
    def __init__(self, root: Path, cluster, *extra: str) -> None:
        super().__init__(root, "--backend", "kubernetes",
                         "--kubeconfig", os.environ["ROTA_TEST_KUBECONFIG"],
                         "--kube-namespace", cluster.namespace, "--kube-default-image", "busybox",
                         "--kube-node-selector", cluster.selector, "--interval", "0.3", *extra,
                         start_timeout_s=START_TIMEOUT_S)
        self.cluster, self.cwd = cluster, root
        self.env["COLUMNS"] = "160"  # a terminal wide enough for the tables

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

    def close(self) -> None:
        """Stop it as an operator would (SIGTERM), killing it if it has not ended in 30 s."""
        if self.proc is not None:
            try:
                self.stop(timeout=30)
            except subprocess.TimeoutExpired:
                self.end()
