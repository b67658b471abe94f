"""The attempt's Secret: it holds the attempt's API token, so that the token is never a value in
a Pod, and it is the controller of the attempt's Pods.

A Pod's spec is readable by anyone who may list Pods in its namespace (and shows in `kubectl
get pod -o yaml`, in audit logs, in the dumps of every controller watching Pods), while a
Secret is readable only by those granted ``secrets``. So the token (``ROTA_TOKEN``) of an
attempt lives in a Secret named as its headless Service, ``rota-<job>-<attempt>`` (found again
by that name after a control-plane restart), key ``token``, and each Pod reads it with
``valueFrom.secretKeyRef``; the kubelet resolves it when the container starts.

The same Secret (without the key when the attempt has no token) is each Pod's controller
(``ownerReferences``, ``controller: true``): ``kubectl drain`` without ``--force`` refuses to
evict a Pod that declares no controller, and the attempt is what rota's Pods belong to. It is
the one object rota makes for every attempt before its Pods, so it needs no permission more.

Lifetime, each step safe to repeat after a crash:

1. ``put`` before any Pod of the attempt is created (a Pod that refers to a missing Secret is
   accepted by the API server, but its container would not start; and the Pods name its uid
   as their controller's); a Secret left by an earlier try of the same attempt gets the new
   token.
2. ``remove`` when the attempt has ended (its Pods finished, which Kubernetes keeps for their
   logs, or deleted: a cancel, a preemption, an eviction), when a Pod of the gang could not
   be created (a quota refused it), or when an attempt found after a crash had no Pod yet.
   Once the attempt has ended it deletes the Secret orphaning its dependents, so that the
   garbage collector takes the ``ownerReferences`` off the Pods that stay instead of deleting
   them (a launch that fails deletes its Pods itself, and the Secret at once).
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Mapping

from rota.backends.kube.api import KubeApi, KubeError
from rota.backends.kube.names import pod_name

log = logging.getLogger(__name__)

TOKEN_ENV = "ROTA_TOKEN"
TOKEN_KEY = "token"


def secrets_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets"


def secret_name(job_id: str, attempt: int) -> str:
    """``rota-<job>-<attempt>``: the attempt's Secret (the same name as its Service)."""
    return pod_name(job_id, attempt, 0).rsplit("-", 1)[0]


def token_secret(job_id: str, attempt: int, namespace: str, token: str | None,
                 labels: Mapping[str, str]) -> dict[str, Any]:
    """The Secret's manifest, labelled as the attempt's Pods (``labels``); without ``token``
    it holds nothing (it is then only its Pods' controller)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret_name(job_id, attempt), "namespace": namespace,
                     "labels": dict(labels)},
        "data": {} if token is None else {TOKEN_KEY: _encoded(token)},
    }


def token_variable(name: str) -> dict[str, Any]:
    """The container's ``ROTA_TOKEN``, read from Secret ``name``."""
    return {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": name, "key": TOKEN_KEY}}}


def controller(secret: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ownerReferences`` entry that makes the Secret ``secret`` (as the API server
    returned it) a Pod's controller."""
    meta = secret["metadata"]
    return {"apiVersion": "v1", "kind": "Secret", "name": meta["name"], "uid": meta["uid"],
            "controller": True}


def put(api: KubeApi, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create the Secret ``body`` (``token_secret``), or give the one an earlier try of the
    attempt left the new token; the Secret as stored."""
    namespace = body["metadata"]["namespace"]
    try:
        return api.create(secrets_path(namespace), body)
    except KubeError as exc:
        if not exc.exists:
            raise
    return api.merge_patch(f"{secrets_path(namespace)}/{body['metadata']['name']}",
                           {"data": body["data"]})


def remove(api: KubeApi, namespace: str, job_id: str, attempt: int,
           orphan: bool = False) -> None:
    """Delete the attempt's Secret, if there is one; with ``orphan``, leaving the Pods it
    controls (they stay for their logs). A failure is only logged: the token dies with the
    attempt all the same."""
    try:
        api.delete(f"{secrets_path(namespace)}/{secret_name(job_id, attempt)}",
                   propagation="Orphan" if orphan else None)
    except KubeError as exc:
        log.warning("job %s: cannot delete its Secret: %s", job_id, exc)


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
