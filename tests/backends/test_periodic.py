"""``rota.backends.periodic.Periodic``, the background checks of the disk and GPU-memory
watchers, in a real thread: a call that raises is told to ``failed`` and the calls go on;
``start`` twice runs one thread, ``stop`` ends it and may be called again."""

from __future__ import annotations

import threading

from rota.backends.periodic import Periodic


def threads_named(name: str) -> int:
    return sum(t.name == name for t in threading.enumerate())


def test_a_failing_call_is_told_and_the_calls_go_on() -> None:
    calls: list[int] = []
    failures: list[Exception] = []
    third = threading.Event()

    def work() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("the first call fails")
        if len(calls) == 3:
            third.set()

    checks = Periodic("rota-test-periodic", 0.01, work, failures.append)
    checks.start()
    checks.start()
    assert threads_named("rota-test-periodic") == 1
    assert third.wait(60)
    checks.stop()
    assert threads_named("rota-test-periodic") == 0
    after_stop = len(calls)
    checks.stop()
    assert [str(e) for e in failures] == ["the first call fails"]
    assert len(calls) == after_stop >= 3


def test_it_starts_again_after_a_stop() -> None:
    called = threading.Event()
    checks = Periodic("rota-test-again", 0.01, called.set, lambda exc: None)
    checks.start()
    assert called.wait(60)
    checks.stop()
    called.clear()
    checks.start()
    assert called.wait(60)
    checks.stop()
    assert threads_named("rota-test-again") == 0
