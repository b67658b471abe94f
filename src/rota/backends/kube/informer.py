"""A cache of one kind of Kubernetes object, kept current by list and watch.

As client-go's informers do: list every object (in pages), remember the list's resource
version, then watch from that version; each event updates the cache and is handed to
``on_change(key, old, new)`` (``new`` None: deleted; ``old`` None: new). A watch that the
server ends (its timeout) is started again from the last version seen; one whose version has
been compacted away (410 Gone, as an answer or as an ``ERROR`` event) makes the informer list
again, and the differences between the old cache and the new list are handed on as events.
Any other failure (the server unreachable) is retried from the last version after a pause.

Objects are kept as ``parse(obj)`` returns them (a small value instead of the whole object),
keyed by ``key(obj)``; ``parse`` may return None to leave an object out of the cache. A label
``selector`` keeps only the objects it selects.
``synced`` is set once the first list is in. One thread per informer, a daemon; ``stop`` ends
the watch in flight at once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from rota.backends.kube.api import KubeApi, KubeError

log = logging.getLogger("rota.kube")
T = TypeVar("T")
WATCH_TIMEOUT_S = 240
RETRY_S = 1.0


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class Informer(Generic[T]):
    def __init__(self, api: KubeApi, path: str, parse: Callable[[Mapping[str, Any]], T | None],
                 on_change: Callable[[str, T | None, T | None], None],
                 key: Callable[[Mapping[str, Any]], str] = object_key, name: str = "",
                 selector: str | None = None) -> None:
        self.api, self.path, self.parse, self.on_change, self.key = api, path, parse, on_change, key
        self.selector = selector
        self.name = name or path
        self.synced = threading.Event()
        self.lists = 0  # how many times the whole collection was listed (1 + re-lists)
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"rota-kube-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        response = self._response
        if response is not None:
            try:
                getattr(response, "shutdown", response.close)()
            except OSError:  # the watch ended and closed its connection meanwhile: stopped
                pass

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._items.get(key)

    def items(self) -> list[T]:
        with self._lock:
            return list(self._items.values())

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        while not self._halt.is_set():
            try:
                if version is None:
                    version = self._relist()
                    self.synced.set()
                version = self._watch(version)
            except KubeError as exc:
                if exc.gone:
                    log.info("%s: resource version %s is gone; listing again", self.name,
                             version)
                    version = None
                    continue
                self._pause(exc)
            except Exception as exc:  # a torn stream, a bad line: resume after a pause
                self._pause(exc)

    def _pause(self, exc: Exception) -> None:
        if not self._halt.is_set():
            log.warning("%s: watch failed (%s); retrying in %.0f s", self.name, exc, RETRY_S)
            self._halt.wait(RETRY_S)

    def _relist(self) -> str:
        fresh: dict[str, T] = {}
        cont: str | None = None
        while True:
            page = self.api.list(self.path, cont=cont, selector=self.selector)
            for obj in page.items:
                parsed = self.parse(obj)
                if parsed is not None:
                    fresh[self.key(obj)] = parsed
            if page.next is None:
                break
            cont = page.next
        with self._lock:
            old, self._items = self._items, fresh
            self.lists += 1
        for key in old.keys() - fresh.keys():
            self.on_change(key, old[key], None)
        for key, item in fresh.items():
            if old.get(key) != item:
                self.on_change(key, old.get(key), item)
        return page.resource_version

    def _watch(self, version: str) -> str:
        for event in self._events(version):
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            kind = event.get("type")
            if kind == "BOOKMARK":
                continue
            key = self.key(obj)
            parsed = None if kind == "DELETED" else self.parse(obj)
            with self._lock:
                old = self._items.pop(key, None) if parsed is None else self._items.get(key)
                if parsed is not None:
                    self._items[key] = parsed
            if old != parsed:
                self.on_change(key, old, parsed)
        return version

    def _events(self, version: str) -> Iterator[dict[str, Any]]:
        return self.api.watch(self.path, version, WATCH_TIMEOUT_S,
                              on_open=lambda response: setattr(self, "_response", response),
                              selector=self.selector)
