"""The requests rota makes of a Kubernetes API server, through the official client.

``connect(kubeconfig)`` finds the cluster as ``kubectl`` does: the file given, else the files
in ``KUBECONFIG``, else ``~/.kube/config``, else the in-cluster service account (a Pod's
mounted token). The ``kubernetes`` package is imported here, on first use only.

``KubeApi`` speaks plain JSON (dicts as the API server sends them), never the client's
generated models: reading 10,000 Pods into models costs seconds, and what rota reads of them
is a few fields. Every failure of a request is a ``KubeError`` with the HTTP status and
Kubernetes' own ``reason`` (``AlreadyExists``, ``NotFound``, ``Conflict``, ``Expired``, ...)
and message; a server that cannot be reached is status 0.

Watches stream events (``{"type": ADDED | MODIFIED | DELETED | BOOKMARK | ERROR, "object":
...}``) from a resource version; an ``ERROR`` event or a 410 answer whose code is 410 means
that version is gone (``KubeError.gone``) and the caller must list again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from rota.core import InvalidSpec

AUTH = ["BearerToken"]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
POOL_SIZE = 32  # connections kept to the API server: binds run concurrently


class KubeError(Exception):
    """A request the API server refused or could not answer."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"


def connect(kubeconfig: str | None = None) -> Any:
    """An ``ApiClient`` for the cluster (see the module docstring); ``InvalidSpec`` naming
    ``kubeconfig`` when there is none or it cannot be read."""
    try:
        import kubernetes
    except ImportError:
        raise InvalidSpec("backend", "the kubernetes backend needs the kubernetes package: "
                                     "pip install 'rota[kube]'") from None
    cfg = kubernetes.client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or _home_config()
    try:
        if path:
            kubernetes.config.load_kube_config(config_file=path, client_configuration=cfg,
                                               persist_config=False)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            kubernetes.config.load_incluster_config(client_configuration=cfg)
        else:
            raise InvalidSpec("kubeconfig", "no cluster to talk to: give --kubeconfig, set "
                                            "KUBECONFIG, write ~/.kube/config, or run in a Pod")
    except (kubernetes.config.ConfigException, OSError, ValueError) as exc:
        raise InvalidSpec("kubeconfig", f"cannot use {path or 'the in-cluster config'}: "
                                        f"{exc}") from None
    cfg.connection_pool_maxsize = POOL_SIZE
    return kubernetes.client.ApiClient(cfg)


def _home_config() -> str | None:
    path = Path.home() / ".kube" / "config"
    return str(path) if path.is_file() else None


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    resource_version: str
    next: str | None  # the continue token; None: this was the last page


class KubeApi:
    """Plain-JSON requests over an ``ApiClient``; thread-safe (the client pools connections)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    # -- transport -------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None,
                query: Mapping[str, Any] | None = None, content_type: str = JSON,
                timeout: float | None = 30.0) -> Any:
        """The decoded JSON answer (None for an empty one); ``KubeError`` on failure."""
        response = self._send(method, path, body, query, content_type, timeout)
        try:
            data = response.data
        finally:
            response.release_conn()
        return json.loads(data) if data else None

    def stream(self, path: str, query: Mapping[str, Any], timeout: float | None) -> Any:
        """A GET whose answer (a urllib3 response) is read as it comes (a watch, a log);
        close it when done."""
        return self._send("GET", path, None, query, JSON, timeout)

    def _send(self, method: str, path: str, body: Any, query: Mapping[str, Any] | None,
              content_type: str, timeout: float | None) -> Any:
        """The urllib3 response of a successful request, its body not read yet."""
        from urllib3.exceptions import HTTPError
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            method, url, headers, body, _ = self.client.param_serialize(
                method, path, query_params=list((query or {}).items()), header_params=headers,
                body=body, auth_settings=AUTH)
            response = self.client.call_api(method, url, header_params=headers, body=body,
                                            _request_timeout=timeout).response
        except (HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", str(exc)) from None
        except Exception as exc:  # the client's own ApiException (status 0: TLS and the like)
            raise KubeError(int(getattr(exc, "status", 0) or 0), "Unreachable", str(exc)) from None
        if not 200 <= response.status < 300:
            try:
                raise _error(response.status, response.reason or "", response.data)
            finally:
                response.release_conn()
        return response

    # -- objects -----------------------------------------------------------------------------

    def list(self, path: str, limit: int = 500, cont: str | None = None,
             selector: str | None = None) -> Page:
        query: dict[str, Any] = {"limit": limit}
        if cont:
            query["continue"] = cont
        if selector:
            query["labelSelector"] = selector
        data = self.request("GET", path, query=query, timeout=120.0)
        meta = data.get("metadata") or {}
        return Page(data.get("items") or [], meta.get("resourceVersion", ""),
                    meta.get("continue") or None)

    def watch(self, path: str, resource_version: str, timeout_s: int = 300,
              on_open: Callable[[Any], None] = lambda response: None,
              selector: str | None = None) -> Iterator[dict[str, Any]]:
        """Events from ``resource_version`` on, until the server ends the watch;
        ``on_open`` gets the open response (to close it from another thread)."""
        from kubernetes.watch.watch import iter_resp_lines
        query: dict[str, Any] = {"watch": "true", "resourceVersion": resource_version,
                                 "allowWatchBookmarks": "true", "timeoutSeconds": timeout_s}
        if selector:
            query["labelSelector"] = selector
        response = self.stream(path, query, timeout=timeout_s + 30)
        on_open(response)
        try:
            for line in iter_resp_lines(response):
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise KubeError(int(status.get("code") or 0), status.get("reason", ""),
                                    status.get("message", ""))
                yield event
        finally:
            response.close()
            response.release_conn()

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, body=dict(body))

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", path, body=dict(patch), content_type=MERGE_PATCH)

    def delete(self, path: str, grace_s: int | None = None,
               uid: str | None = None, propagation: str | None = None) -> bool:
        """Delete; False when it was already gone (or ``uid`` names an older object).
        ``propagation``: what becomes of its dependents (``Orphan``: they stay, unowned)."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_s is not None:
            body["gracePeriodSeconds"] = grace_s
        if propagation is not None:
            body["propagationPolicy"] = propagation
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", path, body=body)
        except KubeError as exc:
            if exc.not_found or exc.conflict:  # gone, or a newer object of the same name
                return False
            raise
        return True

    def bind(self, namespace: str, pod: str, uid: str, node: str) -> None:
        """``POST pods/<pod>/binding`` (the Binding subresource), for that Pod's ``uid``."""
        self.create(f"{pods_path(namespace)}/{pod}/binding", {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def log(self, namespace: str, pod: str, container: str, timeout: float = 30.0) -> Any:
        """The container's log as a stream of bytes (``read(n)``); close it when done."""
        return self.stream(f"{pods_path(namespace)}/{pod}/log", {"container": container},
                           timeout=timeout)


def pods_path(namespace: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


def services_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services"


NODES = "/api/v1/nodes"


def _error(status: int, reason: str, body: Any) -> KubeError:
    """The Status object the server answered, read for its reason and message."""
    try:
        data = json.loads(body) if body else {}
    except (TypeError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    return KubeError(status, str(data.get("reason") or reason),
                     str(data.get("message") or body or reason))
