"""rota's streams into Pods (``rota.backends.kube.streams``) through the real API server's
``pods/exec`` and ``pods/portforward``, to kwok's kubelet API (the fixture's): an exec's output
(stdout and stderr merged) and its end, a terminal's input, output and size, a TCP connection
to a port and a port nothing listens on, and what the API server refuses (no such Pod, a Pod
not running, a user without the right) as errors that say what to do.

kwok runs no containers: an exec runs on this machine, where kwok's ``Exec`` object for the
Pod says (a directory, variables); a port-forward reaches the local address its
``PortForward`` names. kwok reports a command's non-zero exit as an error
(``InternalError``, the status in its message), not as the kubelet's ``NonZeroExitCode``;
how an exit status is read from the kubelet's own answer is checked on those answers, as the
kubelet writes them."""

from __future__ import annotations

import json
import re

import pytest

from rota.backends.base import BackendError
from rota.backends.kube.streams import exec_outcome, open_exec, open_port
from streamkit import (
    CONTAINER, Reader, TcpServer, closed_port, exec_rule, forward_rule, once_kwok_knows,
    running_pod,
)


# -- the end of an exec, as a kubelet writes it on the status channel ---------------------------

KUBELET_EXIT_3 = {  # cri-streaming's ServeExec for a command that exited with status 3
    "metadata": {}, "status": "Failure",
    "message": "command terminated with non-zero exit code: exit status 3",
    "reason": "NonZeroExitCode",
    "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
KWOK_EXIT_3 = {  # kwok's answer for the same command: the error of its local process
    "metadata": {}, "status": "Failure",
    "message": "Internal error occurred: error executing command in container: cmd wait: "
               "sh -c exit 3: exit status 3",
    "reason": "InternalError", "details": {"causes": [{"message": "..."}]}, "code": 500}


@pytest.mark.parametrize("status, outcome", [
    pytest.param({"metadata": {}, "status": "Success"}, (0, None), id="success-is-0"),
    pytest.param(KUBELET_EXIT_3, (3, None), id="non-zero-exit-code-cause"),
    pytest.param(KWOK_EXIT_3, (None, KWOK_EXIT_3["message"]), id="any-other-failure"),
    pytest.param({"status": "Failure", "reason": "NonZeroExitCode",
                  "message": "no cause given"}, (None, "no cause given"),
                 id="exit-code-missing"),
])
def test_the_end_of_an_exec_is_read_from_the_kubelets_status(status, outcome):
    assert exec_outcome(json.dumps(status).encode()) == outcome


@pytest.mark.parametrize("argv", [[], "ls", ["ls", 3], None])
def test_an_exec_without_a_command_is_refused_naming_argv(argv):
    with pytest.raises(BackendError, match="^argv: ") as refused:
        open_exec(None, "ns", "pod", CONTAINER, argv, tty=False)
    assert refused.value.code == "invalid_command"


@pytest.mark.parametrize("port", [0, 65536, "80", True])
def test_a_port_that_is_no_tcp_port_is_refused_naming_port(port):
    with pytest.raises(BackendError, match="^port: ") as refused:
        open_port(None, "ns", "pod", port)
    assert refused.value.code == "invalid_port"


# -- through the API server, to kwok ---------------------------------------------------------------

@pytest.fixture
def pod(cluster, tmp_path) -> str:
    """A Running Pod on a kwok node, whose container ``main`` runs execs in ``tmp_path`` with
    ``JOB=7``."""
    node = cluster.add_node("s")
    name = running_pod(cluster, "replica-0", node)
    exec_rule(cluster, name, str(tmp_path), {"JOB": "7"})
    return name


def run(cluster, pod: str, *argv: str) -> tuple[bytes, int | None]:
    """Output and exit status of ``argv`` run in ``pod`` without a terminal."""
    channel = open_exec(cluster.api, cluster.namespace, pod, CONTAINER, list(argv), tty=False)
    try:
        return Reader(channel).read_all(), channel.exit_code()
    finally:
        channel.close()


def test_an_exec_returns_its_output_with_stderr_merged_and_exit_status_0(cluster, pod,
                                                                         tmp_path):
    out, status = once_kwok_knows(lambda: run(cluster, pod, "echo", "hello"), "an exec")
    assert (out, status) == (b"hello\n", 0)
    out, status = run(cluster, pod, "sh", "-c", 'echo out; echo err >&2; pwd; echo "job=$JOB"')
    lines = out.decode().splitlines()  # stderr in among stdout's lines, which keep their order
    assert "err" in lines and [x for x in lines if x != "err"] == ["out", str(tmp_path), "job=7"]
    assert status == 0


def test_a_command_that_fails_ends_the_stream_with_an_error_after_its_output(cluster, pod):
    once_kwok_knows(lambda: run(cluster, pod, "true"), "an exec")
    channel = open_exec(cluster.api, cluster.namespace, pod, CONTAINER,
                        ["sh", "-c", "echo partial; exit 3"], tty=False)
    reader = Reader(channel)
    assert reader.until(lambda seen: b"partial\n" in seen) == b"partial\n"
    with pytest.raises(BackendError) as failed:  # kwok: an InternalError naming the status
        reader.read_all()
    assert failed.value.code == "exec_failed" and "exit status 3" in str(failed.value)
    assert f"Pod {cluster.namespace}/{pod}" in str(failed.value)
    assert channel.exit_code() is None
    channel.close()
    channel.close()  # idempotent
    with pytest.raises(BackendError, match="closed") as closed:
        channel.write(b"more")
    assert closed.value.code == "stream_closed"


def test_a_terminal_carries_input_and_output_and_takes_a_new_size(cluster, pod, core):
    once_kwok_knows(lambda: run(cluster, pod, "true"), "an exec")
    script = ('[ -t 0 ] && echo on-a-tty; stty -echo; '
              'while read line; do [ "$line" = q ] && exit 0; echo "got:$line"; stty size; done')
    channel = open_exec(core, cluster.namespace, pod, CONTAINER, ["sh", "-c", script], tty=True)
    reader = Reader(channel)
    reader.until(lambda seen: b"on-a-tty" in seen)
    channel.write(b"hello\n")
    reader.until(lambda seen: b"got:hello" in seen)
    channel.resize(33, 101)
    for asked in range(1, 21):  # the size travels apart from the input: ask until it came
        channel.write(b"size\n")
        sizes = re.findall(rb"got:size\r?\n(\d+ \d+)\r?\n", reader.until(
            lambda seen: len(re.findall(rb"got:size\r?\n\d+ \d+\r?\n", seen)) >= asked))
        if sizes[-1] == b"33 101":
            break
    assert sizes[-1] == b"33 101"  # rows, columns
    channel.write(b"q\n")
    reader.read_all()
    assert channel.exit_code() == 0
    channel.close()


def test_a_port_forward_is_a_tcp_connection_to_where_the_pod_listens(cluster, pod):
    server = TcpServer()
    try:
        forward_rule(cluster, pod, {8080: server.port, 8081: closed_port()})

        def talk() -> bytes:
            channel = open_port(cluster.api, cluster.namespace, pod, 8080)
            try:
                channel.write(b"ping")
                return Reader(channel).until(lambda seen: seen == b"PING")
            finally:
                channel.close()
        assert once_kwok_knows(talk, "a port-forward") == b"PING"

        channel = open_port(cluster.api, cluster.namespace, pod, 8080)
        reader = Reader(channel)
        channel.write(b"one ")
        reader.until(lambda seen: seen == b"ONE ")
        channel.resize(10, 10)  # nothing for a port
        channel.write(b"bye")
        reader.until(lambda seen: seen == b"ONE BYE")
        assert channel.exit_code() is None
        channel.close()  # wakes the read waiting in the reader's thread: the end of the stream
        assert reader.read_all() == b"ONE BYE"

        refused = open_port(cluster.api, cluster.namespace, pod, 8081)
        with pytest.raises(BackendError) as failed:
            Reader(refused).read_all()
        assert failed.value.code == "port_refused"
        assert f"port 8081 of Pod {cluster.namespace}/{pod}" in str(failed.value)
        assert "listening" in str(failed.value)
        refused.close()
    finally:
        server.close()


def test_what_the_api_server_refuses_is_an_error_saying_what_to_do(cluster, pod, kube_api):
    from kubernetes import client as kube_client
    from rota.backends.kube.api import KubeApi, pods_path
    ns = cluster.namespace
    with pytest.raises(BackendError) as missing:
        open_exec(cluster.api, ns, "no-such-pod", CONTAINER, ["true"], tty=False)
    assert missing.value.code == "no_pod" and f"Pod {ns}/no-such-pod" in str(missing.value)
    with pytest.raises(BackendError) as missing_port:
        open_port(cluster.api, ns, "no-such-pod", 80)
    assert missing_port.value.code == "no_pod"

    cluster.api.create(pods_path(ns), {  # never bound to a node: nothing runs it
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending"},
        "spec": {"schedulerName": "rota", "containers": [{"name": CONTAINER,
                                                          "image": "busybox"}]}})
    with pytest.raises(BackendError) as pending:
        open_exec(cluster.api, ns, "pending", CONTAINER, ["true"], tty=False)
    assert pending.value.code == "not_running" and "rota show" in str(pending.value)

    stranger = kube_client.ApiClient(kube_api.configuration)
    stranger.set_default_header("Impersonate-User", "someone-without-rights")
    for opening, subresource in (
            (lambda: open_exec(KubeApi(stranger), ns, pod, CONTAINER, ["true"], False), "exec"),
            (lambda: open_port(KubeApi(stranger), ns, pod, 80), "portforward")):
        with pytest.raises(BackendError) as forbidden:
            opening()
        assert forbidden.value.code == "forbidden"
        assert f"get and create on pods/{subresource}" in str(forbidden.value)
        assert "someone-without-rights" in str(forbidden.value)
    stranger.close()


def test_the_backend_opens_streams_into_a_running_replica_only(cluster, tmp_path):
    from rota.backends.base import LaunchSpec, ReplicaState
    from rota.core import (
        DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest,
    )
    from waiting import poll
    node = cluster.add_node("b")
    backend = cluster.backend()
    job = Job(id=JobId("21"), project="vision", queue="research", replicas=1,
              request=ReplicaRequest(cpu_milli=1000, memory_mib=1024, gpu=GpuRequest(1)))
    handle = backend.launch(job, Placement((ReplicaPlacement(node, (DeviceShare(0, 1000,
                                                                                 81920),)),)),
                            LaunchSpec(("sleep", "infinity"), ""), attempt=0)
    poll(lambda: (p := backend.pod(cluster.namespace, "rota-21-0-0")) and p.phase == "Running",
         "the backend to see its Pod Running", timeout=60, every=0.1)
    exec_rule(cluster, "rota-21-0-0", str(tmp_path), {})

    def echo() -> bytes:
        channel = backend.open_exec(handle, 0, ["echo", "in-replica-0"], tty=False)
        try:
            return Reader(channel).read_all()
        finally:
            channel.close()
    assert once_kwok_knows(echo, "an exec into replica 0") == b"in-replica-0\n"

    for opening in (lambda: backend.open_exec(handle, 1, ["true"], False),
                    lambda: backend.open_port(handle, 1, 80)):
        with pytest.raises(BackendError, match="no replica 1") as no_replica:
            opening()
        assert no_replica.value.code == "no_replica"

    backend.cancel(handle, 0)
    poll(lambda: backend.poll([handle])[0].state is not ReplicaState.RUNNING, "the job ended",
         timeout=60, every=0.1)
    with pytest.raises(BackendError) as ended:
        backend.open_exec(handle, 0, ["true"], tty=False)
    assert ended.value.code == "not_running" and "rota show" in str(ended.value)
