"""The forecast's ``estimate`` reason in words (``rota.core.wording.estimate_sentence``): the
jobs holding what a pending job needs and when each ends, relative to now, or why there is
no start estimate; and the same through a job's stored view (``jobwords.why_lines``)."""

from __future__ import annotations

import pytest

from rota.core import jobwords
from rota.core.decisions import Holder, Reason, ReasonCode
from rota.core.wording import estimate_sentence, normalised
from rota.core.shortforms import reason_column

NOW = 1000.0
R812 = Holder("812", ("node2",), NOW + 3900, True)
R815 = Holder("815", ("node2",), None, False)


@pytest.mark.parametrize("reason,words", [
    (Reason(ReasonCode.ESTIMATE, holders=(R812,)),
     "Estimated from walltimes: what it needs is held by 812 on node2 (ends within 1h5m)."),
    (Reason(ReasonCode.ESTIMATE, detail="no-walltime", holders=(R815,)),
     "No start estimate: it waits behind jobs without a walltime, which may run for ever: "
     "815 on node2 (no walltime, forecast to start first)."),
    (Reason(ReasonCode.ESTIMATE, detail="never-quota"),
     "No start estimate: it does not start even once every job holding resources has ended: "
     "its queue's quota can never allow it."),
    (Reason(ReasonCode.ESTIMATE, detail="window", capacity=7 * 86400),
     "No start estimate: it would start beyond the forecast's window of 7d."),
    (Reason(ReasonCode.ESTIMATE, detail="depth", capacity=500),
     "No start estimate: it is not among the first 500 pending jobs in order, which the "
     "forecast follows."),
], ids=["holders", "no-walltime", "never-quota", "window", "depth"])
def test_an_estimate_reason_in_words(reason, words):
    assert estimate_sentence(reason, NOW) == words


def test_a_stored_estimate_reads_back_with_its_holders_and_is_no_reason_column():
    reason = Reason(ReasonCode.ESTIMATE, holders=(R812, R815))
    view = {"wait_reasons": [normalised(reason)]}
    assert jobwords.why_lines(view, now=NOW) == [
        "Estimated from walltimes: what it needs is held by 812 on node2 (ends within 1h5m), "
        "815 on node2 (no walltime, forecast to start first)."]
    assert jobwords.why_lines(view) == [
        "Estimated from walltimes: what it needs is held by 812 on node2 (ends by its "
        "walltime), 815 on node2 (no walltime, forecast to start first)."]
    assert reason_column(None, ["resources", "estimate"]) == "resources"
