"""Node features (``rota.core.nodes``) in placement and screening: a GPU share goes only to a
node that can share a GPU; a share no node can take is rejected, naming why; whole GPUs and
CPU-only jobs go anywhere."""

from __future__ import annotations

from builders import bound, cluster, decide, devices_of, job, node, rejected
from rota.core.decisions import ReasonCode
from rota.core.nodes import CONTAINERS, GPU_SHARING, SIGNALS
from rota.core.wording import hint, sentence


def test_a_gpu_share_goes_only_to_the_node_that_can_share_a_gpu():
    # n1 comes first in name order and is emptier: without features the share would go there
    snap = cluster().nodes(
        node("n1").gpus(4).features(CONTAINERS),
        node("n2").gpus(1).features(CONTAINERS, GPU_SHARING),
    ).jobs(job("f").gpus(0.5), job("w").gpus(1)).build()
    decisions = decide(snap)
    (where,) = devices_of(bound(decisions)["f"])
    assert where[0] == "n2"
    assert "w" in bound(decisions)


def test_a_share_waits_while_the_only_node_that_can_share_is_full():
    snap = cluster().nodes(
        node("n1").gpus(2).features(CONTAINERS),
        node("n2").gpus(1).features(GPU_SHARING).cordoned(),
    ).jobs(job("f").gpus(0.5)).build()
    decisions = decide(snap)
    assert "f" not in bound(decisions) and "f" not in rejected(decisions)


def test_a_share_no_node_can_take_is_rejected_naming_the_feature():
    snap = cluster().nodes(node("n1").gpus(4).features(CONTAINERS, SIGNALS)).jobs(
        job("f").gpus(0.25), job("w").gpus(2)).build()
    decisions = decide(snap)
    (reason,) = rejected(decisions)["f"].reasons
    assert reason.code is ReasonCode.NEVER_FITS and reason.resource == "gpu"
    assert "0.25 GPU shares need a node that can share a GPU" in sentence(reason)
    assert "HAMi" in (hint(reason) or "")
    assert "w" in bound(decisions)
