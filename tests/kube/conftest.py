"""Fixtures for the Kubernetes tests: a client of the real API server of the test fixture.

The API server comes from ``ROTA_TEST_KUBECONFIG`` (``eval "$(.ci/kube)"`` builds and starts
one: kube-apiserver on etcd, with kwok playing the kubelets). Without the variable the tests
that need it skip, unless ``CI`` is set: then they fail, because CI must test against it. The
pure translation tests here need neither the server nor the ``kubernetes`` package.

Each test gets a namespace of its own; the kwok nodes a test makes are named after it and
deleted after it, with the Pods it left.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator

import pytest

from requires import required_env
from upkit import KubeServer
from waiting import poll

KUBE_ENV = "ROTA_TEST_KUBECONFIG"


@pytest.fixture(scope="session")
def kube_api() -> Any:
    """An ``ApiClient`` of the fixture's API server, as its admin."""
    path = required_env(KUBE_ENV, "run `eval \"$(.ci/kube)\"` to build and start a real API "
                        "server (kube-apiserver, etcd, kwok) for the Kubernetes tests",
                        "Kubernetes")
    kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is not "
                                                          "installed: pip install -e '.[kube]'")
    return kubernetes.config.new_client_from_config(config_file=path)


@pytest.fixture
def core(kube_api) -> Any:
    from kubernetes import client
    return client.CoreV1Api(kube_api)


@pytest.fixture
def namespace(core) -> Iterator[str]:
    """A fresh namespace, ready for Pods (its ``default`` ServiceAccount, which the controller
    manager creates, exists); deleted at the end with what is left in it."""
    from kubernetes import client
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    poll(lambda: core.list_namespaced_service_account(
        name, field_selector="metadata.name=default").items,
        f"the default ServiceAccount of namespace {name}", timeout=60, every=0.1)
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    core.delete_namespace(name)


@pytest.fixture
def kwok_nodes(core) -> Iterator[list[str]]:
    """Names of the kwok nodes a test creates (append them); they are deleted afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        core.delete_node(name)


class TestCluster:
    """The kwok nodes of one test, labelled with the test's namespace, and backends that see
    only those nodes (``rota.dev/test-group=<namespace>``), each closed after the test."""

    def __init__(self, kube_api, namespace: str, kwok_nodes: list[str]) -> None:
        from rota.backends.kube.api import KubeApi
        self.api = KubeApi(kube_api)
        self.namespace = namespace
        self.selector = f"rota.dev/test-group={namespace}"
        self._names = kwok_nodes
        self._backends: list = []

    def add_node(self, suffix: str, **kwargs) -> str:
        from kubekit import kwok_node
        from rota.backends.kube.api import NODES
        name = f"{self.namespace}-{suffix}"
        self.api.create(NODES, kwok_node(name, group=self.namespace, **kwargs))
        self._names.append(name)
        poll(lambda: self.ready(name), f"kwok to make {name} Ready", timeout=60, every=0.1)
        return name

    def ready(self, name: str) -> bool:
        from rota.backends.kube.api import NODES
        conditions = (self.api.get(f"{NODES}/{name}").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def backend(self, **config):
        from rota.backends.kube.backend import KubeBackend, KubeConfig
        options = {"namespace": self.namespace, "default_image": "busybox", "pod_user": "alice",
                   "node_selector": self.selector, "lock_wait_s": 30.0, **config}
        backend = KubeBackend(KubeConfig(**options), api=self.api)
        self._backends.append(backend)
        return backend

    def close(self) -> None:
        for backend in self._backends:
            backend.close()


@pytest.fixture
def cluster(kube_api, namespace, kwok_nodes) -> Iterator[TestCluster]:
    test_cluster = TestCluster(kube_api, namespace, kwok_nodes)
    yield test_cluster
    test_cluster.close()


@pytest.fixture
def up(cluster, tmp_path) -> Iterator[Callable[..., KubeServer]]:
    """Start ``rota up --backend kubernetes`` against the test cluster (with extra options);
    every server started is closed after the test."""
    servers: list[KubeServer] = []

    def start(*extra: str) -> KubeServer:
        server = KubeServer(tmp_path, cluster, *extra)
        servers.append(server)
        server.start()
        return server
    yield start
    for server in servers:
        server.close()
