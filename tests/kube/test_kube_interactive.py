"""``rota exec`` and ``rota forward`` through a ``rota up --backend kubernetes`` against the
real API server: the CLI's WebSocket to rota's API, rota's ``pods/exec`` and
``pods/portforward`` streams to the API server, and on to the node's kubelet API, which the
test cluster's kwok serves faithfully (it runs no containers: the ``Exec`` object of the Pod
says which local command an exec runs, its ``PortForward`` where a port-forward connects)."""

from __future__ import annotations

import functools
import socket
import subprocess

from commands import rota_command
from streamkit import TcpServer, exec_rule, forward_rule
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)


def running_job(server: KubeServer) -> str:
    job = server.json("run", "--gpus", "1", "--", "sleep", "600")["id"]
    wait(lambda: server.json("show", job)["state"] == "running", "the job to run")
    return job


def test_exec_reaches_the_jobs_pod_through_the_api_server(cluster, up, tmp_path) -> None:
    cluster.add_node("a", gpus=2)
    server = up()
    job = running_job(server)
    exec_rule(cluster, f"rota-{job}-0-0", str(tmp_path), {"MARK": "inside the pod"})

    def ran():  # kwok answers "no exec found" until its watch brings the Exec
        done = server.rota("exec", "--no-tty", job, "--", "sh", "-c", 'echo "$MARK"; pwd')
        return done if "no exec found" not in done.stderr else None
    done = wait(ran, "kwok to know the Pod's Exec")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["inside the pod", str(tmp_path), ""]
    server.ok("cancel", job)


def test_forward_reaches_the_jobs_pod_port_through_the_api_server(cluster, up, tmp_path) -> None:
    cluster.add_node("b", gpus=2)
    target = TcpServer()
    server = up()
    job = running_job(server)
    forward_rule(cluster, f"rota-{job}-0-0", {8888: target.port})
    forward = subprocess.Popen([*rota_command(), "forward", job, "8888:0"], env=server.env,
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = forward.stdout.readline()
        assert line.startswith("Forwarding http://127.0.0.1:"), line + forward.stderr.read()
        local = int(line.split()[1].rsplit(":", 1)[1].rstrip("/"))

        def echoed() -> bytes | None:
            try:
                with socket.create_connection(("127.0.0.1", local), timeout=10) as conn:
                    conn.sendall(b"hello bye")
                    got = b""  # kwok keeps the far side open after the server's answer
                    while len(got) < len(b"HELLO BYE") and (chunk := conn.recv(65536)):
                        got += chunk
                    return got or None  # closed at once: kwok had no forward yet
            except OSError:
                return None
        assert wait(echoed, "the Pod's port through the tunnel") == b"HELLO BYE"
        assert target.connections >= 1
    finally:
        forward.terminate()
        forward.wait(timeout=30)
        target.close()
    server.ok("cancel", job)
