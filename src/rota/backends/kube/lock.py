"""HAMi's node lock, taken and released as HAMi's scheduler does (``pkg/util/nodelock``).

HAMi's device plugin learns which Pod a kubelet's request for devices is for from the node
lock: the scheduler locks the node (annotation ``hami.io/mutex.lock: <RFC 3339 time>,<namespace>,
<pod>``) before it binds a Pod that asks for GPUs there, and the plugin releases the lock once
it has allocated the devices. So rota, in HAMi's scheduler's place, does the same steps:

1. ``lock``: read the Node. No lock: set it. A lock: parse it; older than ``LOCK_EXPIRY_S``
   (HAMi's 5 minutes), or held for a Pod that no longer exists, is released and set anew; a
   lock held for this very Pod is kept (rota's own, from a launch that was cut short; HAMi
   would refuse it and wait for the expiry); any other lock means "wait" (``Locked``).
   Setting is a merge patch that carries the Node's resource version, so that of two
   schedulers only one wins; the loser reads the Node again and finds it locked. It is
   retried on failure as HAMi retries (5 tries, from 100 ms, doubling).
2. the caller patches the Pod's bind annotations and binds it;
3. ``release`` after a bind that failed (only a lock of that Pod, unless forced).

A device plugin that does not release a lock within ``lock_wait_s`` (rota's wait for it at a
bind) is not serving the node: it is down, or HAMi's registration outlived it. ``stuck`` says
so of a lock still held by a Pod that exists, until the lock expires and may be taken over;
meanwhile the backend offers none of the node's GPUs (every bind of a GPU there would wait
for the lock in vain), so that the scheduler places GPU work on other nodes.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Callable

from rota.backends.kube import hami
from rota.backends.kube.api import NODES, KubeApi, KubeError, pods_path
from rota.core import InvalidSpec

LOCK_EXPIRY_S = 300.0
TRIES = 5
FIRST_PAUSE_S = 0.1


class Locked(Exception):
    """The node is locked for another Pod's allocation; try again once it is released."""


def lock(api: KubeApi, node: str, namespace: str, pod: str,
         now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
    current = _lock_of(api.get(f"{NODES}/{node}"))
    if current is not None:
        try:
            when, holder_ns, holder = hami.parse_node_lock(current)
        except InvalidSpec:
            when, holder_ns, holder = datetime.fromtimestamp(0, timezone.utc), "", ""
        if (holder_ns, holder) == (namespace, pod):
            return
        expired = (now() - when).total_seconds() > LOCK_EXPIRY_S
        if not expired and not (holder_ns and holder and _gone(api, holder_ns, holder)):
            raise Locked(f"node {node} is locked by HAMi for pod {holder_ns}/{holder} since "
                         f"{when.isoformat()}")
        release(api, node, namespace, pod, force=True)
    _retry(lambda: _set(api, node, hami.node_lock_value(now(), namespace, pod)))


def release(api: KubeApi, node: str, namespace: str, pod: str, force: bool = False) -> None:
    """Remove the lock if it is this Pod's (any lock with ``force``)."""
    def attempt() -> None:
        obj = api.get(f"{NODES}/{node}")
        current = _lock_of(obj)
        if current is None or not (force or current.endswith(f",{namespace},{pod}")):
            return
        api.merge_patch(f"{NODES}/{node}", {"metadata": {
            "annotations": {hami.NODE_LOCK: None},
            "resourceVersion": obj["metadata"]["resourceVersion"]}})
    _retry(attempt)


def _set(api: KubeApi, node: str, value: str) -> None:
    obj = api.get(f"{NODES}/{node}")
    if _lock_of(obj) is not None:  # taken since it was read: not ours to overwrite
        raise Locked(f"node {node} was locked by another scheduler in the meantime")
    api.merge_patch(f"{NODES}/{node}", {"metadata": {
        "annotations": {hami.NODE_LOCK: value},
        "resourceVersion": obj["metadata"]["resourceVersion"]}})


def _retry(step: Callable[[], None]) -> None:
    pause = FIRST_PAUSE_S
    for n in range(TRIES):
        try:
            step()
            return
        except KubeError as exc:
            if exc.not_found or n == TRIES - 1:
                raise
        time.sleep(pause)
        pause *= 2


def _lock_of(node: dict) -> str | None:
    return ((node.get("metadata") or {}).get("annotations") or {}).get(hami.NODE_LOCK)


def stuck(value: str, now_s: float, after_s: float) -> tuple[str, str, float] | None:
    """The lock ``value`` when it has been held longer than ``after_s`` and has not expired
    yet (``LOCK_EXPIRY_S``): its namespace, Pod and the time it was taken (seconds since the
    epoch); None otherwise, and for a malformed lock (which ``lock`` takes over)."""
    if not value:
        return None
    try:
        when, namespace, pod = hami.parse_node_lock(value)
    except InvalidSpec:
        return None
    held = now_s - when.timestamp()
    return (namespace, pod, when.timestamp()) if after_s < held <= LOCK_EXPIRY_S else None


def stuck_reason(value: str, now_s: float, after_s: float,
                 exists: Callable[[str], bool]) -> str:
    """Why no GPU of a node may be offered while HAMi's device plugin keeps its node lock
    ``value`` (``stuck``) for a Pod that still exists (``exists("namespace/name")``); "" when
    it does not."""
    held = stuck(value, now_s, after_s)
    if held is None or not exists(f"{held[0]}/{held[1]}"):
        return ""
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(held[2]))
    return (f"HAMi's device plugin has not released the node lock it was given for Pod "
            f"{held[0]}/{held[1]} at {since}: it does not serve this node (no GPU is "
            f"offered here until it does, or the lock expires)")


def _gone(api: KubeApi, namespace: str, pod: str) -> bool:
    try:
        api.get(f"{pods_path(namespace)}/{pod}")
    except KubeError as exc:
        if exc.not_found:
            return True
        raise
    return False
