"""GPU health on this machine: which devices may not run jobs now, and why.

A device is unhealthy when NVML reports uncorrected volatile ECC errors on it, when it is lost
(fell off the bus, stopped answering), or once the driver reported an XID critical error for it
that is not the application's own fault. XIDs caused by a job itself (13 graphics engine
exception, 31 memory page fault, 43 stopped processing, 45 preemptive cleanup, 68 video
processor exception, 109 context switch timeout: ``APPLICATION_XIDS``) leave the device healthy,
as NVIDIA's Kubernetes device plugin does. An XID makes a device unhealthy until the control
plane restarts (the operator resets the GPU, then restarts rota); ECC errors and loss are
polled again at every check, so a device reset back to health is seen.

``GpuHealth`` waits for XID events on a background thread and answers ``problems()``:
device index -> reason, for the unhealthy ones. The local backend reports those devices
unhealthy in its inventory (nothing new is placed on them) and the replicas using them lost,
with the end ``gpu-unhealthy`` (they are requeued without spending their restart budget).
"""

from __future__ import annotations

import logging
import threading

from rota.backends.nvml import Nvml

log = logging.getLogger("rota.backends")
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
WAIT_MS = 1000


class GpuHealth:
    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self._xids: dict[int, str] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def problems(self) -> dict[int, str]:
        """Device index -> why it is unhealthy, for every unhealthy device now."""
        with self._lock:
            found = dict(self._xids)
        for index in self.nvml.indices():
            if index not in found and (problem := self.nvml.problem(index)) is not None:
                found[index] = problem
        return found

    def note_xid(self, index: int, xid: int) -> None:
        if xid in APPLICATION_XIDS:
            log.info("GPU %d: XID %d, an application error: the device stays healthy", index, xid)
            return
        with self._lock:
            if index not in self._xids:
                log.warning("GPU %d: XID %d: marked unhealthy until rota restarts", index, xid)
                self._xids[index] = f"XID {xid} reported by the driver"

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="rota-gpu-health",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_MS / 1000 * 3)
            self._thread = None

    def _watch(self) -> None:
        try:
            events = self.nvml.xid_events()
        except Exception:  # no event support at all: ECC and loss are still polled
            log.exception("cannot watch XID events; GPU health comes from ECC and loss only")
            return
        while not self._halt.is_set():
            try:
                found = self.nvml.wait_xid(events, WAIT_MS)
            except Exception:
                log.exception("waiting for XID events failed; retrying")
                self._halt.wait(WAIT_MS / 1000)
                continue
            if found is not None:
                self.note_xid(*found)
