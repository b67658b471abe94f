"""The Kubernetes backend's factory: jobs run as Pods rota binds on a cluster
(``rota.backends.kube``), with the options of ``KubeConfig``; the rota user of offered Pods
defaults to the operator a first start makes. This machine only runs the control plane: its
GPUs are never probed."""

from __future__ import annotations

from typing import Any, Mapping

from rota.backends.base import Backend
from rota.control import setup
from rota.core import InvalidSpec
from rota.server.factory import nodes_line

NAMESPACE = "rota"
NODE_LOST_AFTER_S = 300.0  # Kubernetes' own default before it evicts Pods
LOCK_WAIT_S = 60.0  # a bind's wait for HAMi's device plugin to release its node lock


class KubernetesFactory:
    name = "kubernetes"
    runs_here = False
    flags: Mapping[str, Any] = {
        "--kubeconfig": None, "--kube-namespace": NAMESPACE, "--kube-default-image": None,
        "--kube-pod-user": None, "--kube-tolerate": None, "--kube-node-selector": None,
        "--kube-node-lost-after": NODE_LOST_AFTER_S, "--kube-uid": None,
        "--kube-lock-wait": LOCK_WAIT_S}
    fields: Mapping[str, str] = {
        "kubeconfig": "--kubeconfig", "namespace": "--kube-namespace",
        "image": "--kube-default-image", "node_selector": "--kube-node-selector"}

    def options(self, values: Mapping[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {
            "namespace": values.get("--kube-namespace") or NAMESPACE,
            "node_lost_after_s": values.get("--kube-node-lost-after", NODE_LOST_AFTER_S),
            "lock_wait_s": values.get("--kube-lock-wait", LOCK_WAIT_S)}
        if values.get("--kubeconfig") is not None:
            options["kubeconfig"] = str(values["--kubeconfig"])
        if values.get("--kube-default-image") is not None:
            from rota.spec.types import check_image
            try:
                options["default_image"] = check_image(values["--kube-default-image"])
            except InvalidSpec as exc:
                raise InvalidSpec("--kube-default-image", exc.reason) from None
        if values.get("--kube-uid") is not None:
            options["uid"] = _uid(values["--kube-uid"])
        if values.get("--kube-pod-user") is not None:
            options["pod_user"] = values["--kube-pod-user"]
        if values.get("--kube-tolerate"):
            options["tolerate"] = tuple(values["--kube-tolerate"])
        if values.get("--kube-node-selector"):
            options["node_selector"] = values["--kube-node-selector"]
        return options

    def inventory(self, values: Mapping[str, Any]) -> setup.Inventory:
        return setup.elsewhere("not used: jobs run as Pods on the Kubernetes cluster")

    def build(self, config) -> Backend:
        from rota.backends.kube.backend import KubeBackend, KubeConfig
        options = {"pod_user": setup.operator_name(), **config.backend_options}
        return KubeBackend(KubeConfig(**options))

    def standby_refusal(self, config) -> str | None:
        return None  # Pods are found again by name, whoever created them

    def describe(self, plane) -> list[str]:
        return [nodes_line(plane)]


MAX_UID = 2**31 - 1  # Kubernetes' bound on runAsUser


def _uid(value: Any) -> int:
    """``--kube-uid``: a uid other than root's, which Pod Security's restricted profile
    refuses."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_UID:
        raise InvalidSpec("--kube-uid", f"must be a uid from 1 to {MAX_UID} (not root's: "
                                        f"restricted Pod Security refuses uid 0), got {value!r}")
    return value
