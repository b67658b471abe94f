"""What the routers share: the store, the control loop's hooks and the request-independent
parts of the API (``Api``), kept on ``app.state.api`` by ``create_app``.

Routers reach it through the dependency ``api_of``, which only reads ``request.app.state``: it
is ``async`` so that FastAPI calls it on the event loop, not on a worker thread, and costs a
route an attribute lookup.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from fastapi import Request

from rota.api.budgetcheck import HardBudgets
from rota.api.fairuse import SubmitRate
from rota.api.logs import LogReader
from rota.api.offload import Offload
from rota.api.reads import Reads
from rota.api.storage import StorageQuota
from rota.api.uploads import Uploads
from rota.control.screen import Screen
from rota.control.serving import Serving
from rota.control.sessions import Sessions
from rota.store import Principal, Store

log = logging.getLogger(__name__)

ExitHook = Callable[[str, int, int, "tuple[int, ...] | None"], "Future[None] | None"]


@dataclass(slots=True)
class Api:
    """Everything a route needs besides its request; what each is: ``create_app``'s docstring."""

    store: Store
    clock: Callable[[], float]
    reads: Reads  # what GET routes and the dashboard answer
    uploads: Uploads
    offload: Offload
    quota: StorageQuota
    rate: SubmitRate
    screen: Screen  # refuses at submit what can never run
    read_log: LogReader
    log_poll_s: float
    on_change: Callable[[], None] | None
    workdir_refusal: Callable[[str, str], str | None] | None
    on_exit: ExitHook | None
    exit_wait_s: float
    metrics: Callable[[], bytes] | None
    serving: Serving | None
    budgets: HardBudgets  # a new job's project past its hard budget (the submit says so)
    role: Callable[[], dict[str, object]]  # which role this control plane has, who leads
    sessions: Sessions | None = None  # commands and ports inside running jobs

    def changed(self) -> None:
        """Wake the control loop after a change its next cycle must see."""
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # the change is durable; a failed wake-up only delays it
                log.exception("on_change failed")

    def upload_usable(self, who: Principal) -> Callable[[str], bool]:
        """Whether ``who`` may name an upload in a job: its own, or any for an operator."""
        def usable(upload_id: str) -> bool:
            found = self.uploads.get(upload_id)
            return found is not None and (who.operator or found.user == who.user)
        return usable


async def api_of(request: Request) -> Api:
    """The dependency every router takes for the API's state."""
    return request.app.state.api
