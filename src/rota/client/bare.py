"""The client of the fast commands (``rota.cli.fast``, ``rota.cli.fastjobs``): the routes
``rota ps``, ``rota logs``, ``rota run``, ``rota submit``, ``rota queues`` and ``rota nodes``
need, as ``rota.client.Client``
has them, without importing what ``Client`` does (``rota.core``'s domain model, at its import).

Both send through ``rota.client.transport``, so they send, retry and fail alike; this module
loads only the standard library's ``socket``, ``json`` and ``urllib.parse`` (and ``ssl`` for an
https URL), and ``rota.client.errors`` only when a request fails.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import quote

from rota.client.credentials import Credentials, discover
from rota.client.transport import JSON, Transport, retried

FULL_PAGE, BRIEF_PAGE = 1000, 10_000  # the most jobs of each view GET /v1/jobs gives at once

class BareClient:
    """``jobs_page``, ``job``, ``logs``, ``whoami``, ``queues``, ``nodes``, ``submit`` and
    ``cancel`` as
    ``rota.client.Client`` has them, and ``briefs``: the brief views ``rota ps`` shows."""

    def __init__(self, credentials: Credentials | None = None, timeout_s: float = 30.0,
                 connect_s: float = 5.0, on_retry: Callable[[str], None] = lambda message: None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.on_retry, self._sleep = on_retry, sleep
        self.credentials = credentials or discover()
        self.url = self.credentials.url
        self._wire = Transport(self.credentials, timeout_s, connect_s)

    def close(self) -> None:
        self._wire.close()

    def __enter__(self) -> BareClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # routes
    def jobs_page(self, projects: list[str] | None = None, states: list[str] | None = None,
                  limit: int = 1000, queue: str | None = None, user: str | None = None,
                  after: str | None = None) -> tuple[list[dict], str | None]:
        """Up to ``limit`` jobs, newest first, from after job ``after``; and the cursor of the
        jobs that come next (None: there are none), as ``Client.jobs_page``."""
        return job_pages(lambda after, n: self.get("/v1/jobs", self._listing(
            projects, states, queue, user, after, n)), limit, after)

    def briefs(self, projects: list[str] | None = None, states: list[str] | None = None,
               limit: int = 1000, queue: str | None = None, user: str | None = None,
               after: str | None = None, values: list[str] | None = None
               ) -> tuple[list[str], list[list], str | None]:
        """The same jobs as brief views (``view=brief``: the values ``rota ps`` shows, in
        pages ten times larger; ``values`` of them only, where the server takes ``columns``):
        the names of their values (the page's ``columns``), a list of values per job in that
        order, and the cursor."""
        return brief_pages(lambda after, n: self.get("/v1/jobs", {**self._listing(
            projects, states, queue, user, after, n), "view": "brief",
            "columns": ",".join(values) if values else None}), limit, after)

    @staticmethod
    def _listing(projects: list[str] | None, states: list[str] | None, queue: str | None,
                 user: str | None, after: str | None, limit: int) -> dict[str, object]:
        return {"project": projects or None, "state": states or None, "queue": queue,
                "user": user, "after": after, "limit": limit}

    def job(self, job_id: str) -> dict:
        return self.get(f"/v1/jobs/{quote(str(job_id), safe='')}")

    def whoami(self) -> dict:
        return self.get("/v1/whoami")

    def queues(self) -> list[dict]:
        return self.get("/v1/queues")

    def nodes(self) -> list[dict]:
        return self.get("/v1/nodes")

    def cancel(self, job_id: str) -> dict:
        return self.post(f"/v1/jobs/{quote(str(job_id), safe='')}/cancel")

    def submit(self, body: Mapping[str, object] | bytes, key: str | None = None,
               params: Mapping[str, object] | None = None) -> dict:
        """Submit a job (an array) once, however often it must be sent (``retried``):
        ``body`` as JSON, or the bytes of a job file as they are on disk, with ``params``
        (``rota.api.jobfile``) as the query."""
        headers = {"Idempotency-Key": key or os.urandom(16).hex(),
                   "Content-Type": "application/yaml" if isinstance(body, bytes)
                   else "application/json"}
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        target = self._wire.target("/v1/jobs", params)
        return retried(lambda: self._wire.request("POST", target, data, headers),
                       self.on_retry, self._sleep).json()

    def logs(self, job_id: str, replica: int = 0, stream: str = "stdout",
             follow: bool = False) -> Iterator[bytes]:
        """The log's bytes as they come, on a connection of its own."""
        params = {"replica": replica, "stream": stream, "follow": str(follow).lower()}
        return self._wire.stream(self._wire.target(
            f"/v1/jobs/{quote(str(job_id), safe='')}/logs", params))

    # plumbing
    def get(self, path: str, params: Mapping[str, object] | None = None) -> object:
        """The JSON answer to a GET; an error answer raised as ``ApiError``."""
        return self._wire.request("GET", self._wire.target(path, params)).check().json()

    def post(self, path: str, body: Mapping[str, object] | None = None) -> object:
        """The JSON answer to a POST of ``body`` as JSON; an error raised as ``ApiError``."""
        data = b"" if body is None else json.dumps(body).encode()
        return self._wire.request("POST", self._wire.target(path), data, JSON).check().json()


def job_pages(page_of: Callable[[str | None, int], object], limit: int, after: str | None
              ) -> tuple[list[dict], str | None]:
    """Up to ``limit`` jobs, page after page (``page_of(after, n)``: the answer of
    ``GET /v1/jobs`` for ``n`` jobs after ``after``), and the cursor of what is left (None:
    nothing)."""
    out: list[dict] = []
    while len(out) < limit:
        page = page_of(after, min(FULL_PAGE, limit - len(out)))
        out.extend(page["items"])
        after = page["next_after"]
        if after is None:
            break
    return out, after


def brief_pages(page_of: Callable[[str | None, int], object], limit: int, after: str | None
                ) -> tuple[list[str], list[list], str | None]:
    """Up to ``limit`` brief views, page after page (``page_of(after, n)``: the answer of
    ``GET /v1/jobs?view=brief`` for ``n`` jobs after ``after``): the names of their values,
    a list of values per job in that order, and the cursor of what is left (None: nothing).
    A page of other columns (a server upgraded between two pages) is read into the first
    page's."""
    columns: list[str] = []
    out: list[list] = []
    while len(out) < limit:
        page = page_of(after, min(BRIEF_PAGE, limit - len(out)))
        items = page["items"]
        if not out:
            columns = page["columns"]
        elif page["columns"] != columns:
            where = {name: k for k, name in enumerate(page["columns"])}
            items = [[i[where[c]] if c in where else None for c in columns] for i in items]
        out += items
        after = page["next_after"]
        if after is None:
            break
    return columns, out, after
