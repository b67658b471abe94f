"""The test fixture's kwok serves the kubelet's streaming API, as the real kubectl sees it:
``kubectl exec`` runs the command kwok's ``Exec`` object for the Pod allows (here, in its
directory, with its variables), and ``kubectl port-forward`` connects to the address its
``PortForward`` names, both through the API server, which reaches kwok as the node's kubelet
(its InternalIP and kubelet port, over TLS checked against the fixture's CA)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from requires import required_env
from streamkit import TcpServer, exec_rule, forward_rule, running_pod
from waiting import SLOWDOWN, poll


def kubectl_command(*args: str) -> list[str]:
    where = required_env("ROTA_KUBE_BIN", "run `eval \"$(.ci/kube)\"`, which builds kubectl "
                                          "with the cluster", "kubectl exec")
    binary = Path(where) / "kubectl"
    if not binary.is_file():
        message = f"{binary} is not built: run tests/kube/fixture/build.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return [str(binary), "--kubeconfig", os.environ["ROTA_TEST_KUBECONFIG"], *args]


def test_kubectl_exec_runs_the_command_kwoks_exec_object_allows(cluster, tmp_path):
    ns = cluster.namespace
    node = cluster.add_node("k")
    pod = running_pod(cluster, "p", node)
    node_status = cluster.api.get(f"/api/v1/nodes/{node}")["status"]
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node_status["addresses"]
    assert node_status["daemonEndpoints"]["kubeletEndpoint"]["Port"] > 0

    exec_rule(cluster, pod, str(tmp_path), {"GREETING": "hello"})

    def kubectl_exec() -> subprocess.CompletedProcess[str] | None:
        done = subprocess.run(kubectl_command("-n", ns, "exec", pod, "-c", "main", "--", "sh",
                                              "-c", 'echo "$GREETING"; pwd'),
                              capture_output=True, text=True, timeout=60 * SLOWDOWN)
        return None if "no exec found" in done.stderr else done  # kwok's watch lags behind
    done = poll(kubectl_exec, "kwok to know the Exec", timeout=60, every=0.2)
    assert (done.returncode, done.stdout) == (0, f"hello\n{tmp_path}\n"), done.stderr


def test_kubectl_port_forward_reaches_the_address_kwoks_port_forward_object_names(cluster):
    ns = cluster.namespace
    node = cluster.add_node("k")
    pod = running_pod(cluster, "p", node)
    server = TcpServer()
    forward_rule(cluster, pod, {8080: server.port})
    try:
        answer = poll(lambda: through_port_forward(ns, pod, b"bye"),
                      "an answer through kubectl port-forward", timeout=60, every=0.2)
    finally:
        server.close()
    assert answer == b"BYE"


def through_port_forward(ns: str, pod: str, data: bytes) -> bytes | None:
    """The answer to ``data`` (as long as ``data``) sent through ``kubectl port-forward`` to
    port 8080 of ``pod``; None when there is none (kwok may not know the PortForward yet)."""
    forward = subprocess.Popen(kubectl_command("-n", ns, "port-forward", f"pod/{pod}",
                                               ":8080", "--address", "127.0.0.1"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = forward.stdout.readline()  # "Forwarding from 127.0.0.1:PORT -> 8080"
        found = re.search(r"127\.0\.0\.1:(\d+) -> 8080", line)
        assert found, f"kubectl port-forward said {line!r}"
        with socket.create_connection(("127.0.0.1", int(found.group(1))),
                                      timeout=30 * SLOWDOWN) as conn:
            conn.sendall(data)
            answer = b""
            while len(answer) < len(data) and (chunk := conn.recv(100)):
                answer += chunk
        return answer or None
    finally:
        forward.terminate()
        forward.wait(30)
