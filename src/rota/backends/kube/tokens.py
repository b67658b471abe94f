"""The attempt's API token as a Secret of its own, so that the token is never a value in a Pod.

A Pod's spec is readable by anyone who may list Pods in its namespace (and shows in `kubectl
get pod -o yaml`, in audit logs, in the dumps of every controller watching Pods), while a
Secret is readable only by those granted ``secrets``. So the token (``ROTA_TOKEN``) of an
attempt lives in a Secret named as its headless Service, ``rota-<job>-<attempt>`` (found again
by that name after a control-plane restart), key ``token``, and each Pod reads it with
``valueFrom.secretKeyRef``; the kubelet resolves it when the container starts.

Lifetime, each step safe to repeat after a crash:

1. ``put`` before any Pod of the attempt is created (a Pod that refers to a missing Secret is
   accepted by the API server, but its container would not start); a Secret left by an
   earlier try of the same attempt gets the new token.
2. ``own`` once rank 0's Pod exists: the Secret becomes that Pod's dependent, so Kubernetes'
   garbage collector deletes it with the Pod (a cancel, a preemption, someone's ``kubectl
   delete``).
3. ``remove`` when the attempt has ended (its Pods finished, which Kubernetes keeps for their
   logs), when a Pod of the gang could not be created (a quota refused it), or when an
   attempt found after a crash had no Pod yet.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Mapping

from rota.backends.kube.api import KubeApi, KubeError
from rota.backends.kube.names import pod_name
from rota.backends.kube.podinfo import PodInfo

log = logging.getLogger(__name__)

TOKEN_ENV = "ROTA_TOKEN"
TOKEN_KEY = "token"


def secrets_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets"


def secret_name(job_id: str, attempt: int) -> str:
    """``rota-<job>-<attempt>``: the attempt's Secret (the same name as its Service)."""
    return pod_name(job_id, attempt, 0).rsplit("-", 1)[0]


def token_secret(job_id: str, attempt: int, namespace: str, token: str,
                 labels: Mapping[str, str]) -> dict[str, Any]:
    """The Secret's manifest, labelled as the attempt's Pods (``labels``)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret_name(job_id, attempt), "namespace": namespace,
                     "labels": dict(labels)},
        "data": {TOKEN_KEY: _encoded(token)},
    }


def token_variable(name: str) -> dict[str, Any]:
    """The container's ``ROTA_TOKEN``, read from Secret ``name``."""
    return {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": name, "key": TOKEN_KEY}}}


def put(api: KubeApi, body: Mapping[str, Any]) -> None:
    """Create the Secret ``body`` (``token_secret``), or give the one an earlier try of the
    attempt left the new token."""
    namespace = body["metadata"]["namespace"]
    try:
        api.create(secrets_path(namespace), body)
    except KubeError as exc:
        if not exc.exists:
            raise
        api.merge_patch(f"{secrets_path(namespace)}/{body['metadata']['name']}",
                        {"data": body["data"]})


def own(api: KubeApi, job_id: str, attempt: int, first: PodInfo) -> bool:
    """Make rank 0's Pod the Secret's owner; False when there is no Secret (a job started
    without a token)."""
    path = f"{secrets_path(first.namespace)}/{secret_name(job_id, attempt)}"
    try:
        api.merge_patch(path, {"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": first.name, "uid": first.uid}]}})
    except KubeError as exc:
        if exc.not_found:
            return False
        raise
    return True


def remove(api: KubeApi, namespace: str, job_id: str, attempt: int) -> None:
    """Delete the attempt's Secret, if there is one. A failure is only logged: the Pod that
    owns the Secret takes it when it is deleted, and the token dies with the attempt."""
    try:
        api.delete(f"{secrets_path(namespace)}/{secret_name(job_id, attempt)}")
    except KubeError as exc:
        log.warning("job %s: cannot delete its token's Secret: %s", job_id, exc)


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
