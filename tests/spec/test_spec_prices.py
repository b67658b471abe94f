"""``prices:`` in a queues file: one currency, a price per GPU-hour of each GPU model; bad
figures are refused naming the key; a file without the key leaves the prices as they are."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.spec import build_queues

QUEUES = {"queues": [{"name": "q"}]}


def test_prices_are_read_with_their_currency():
    applied = build_queues({**QUEUES, "prices": {"currency": "EUR", "gpu_hour": {
        "H100-80GB": 2.5, "A100-40GB": 1}}}, {"default"})
    assert applied.prices == ("EUR", {"H100-80GB": 2.5, "A100-40GB": 1.0})
    assert applied.prices_given


def test_without_the_key_the_prices_stay_and_null_clears_them():
    assert not build_queues(QUEUES, {"default"}).prices_given
    cleared = build_queues({**QUEUES, "prices": None}, {"default"})
    assert cleared.prices_given and cleared.prices is None


@pytest.mark.parametrize("prices, field, words", [
    ({"currency": "eur", "gpu_hour": {"H100": 1}}, "prices.currency", "three-letter"),
    ({"currency": "EURO", "gpu_hour": {"H100": 1}}, "prices.currency", "three-letter"),
    ({"currency": "EUR", "gpu_hour": {"H100": -1}}, "prices.gpu_hour.H100", "0 or more"),
    ({"currency": "EUR", "gpu_hour": {"H100": float("nan")}}, "prices.gpu_hour.H100",
     "0 or more"),
    ({"currency": "EUR", "gpu_hour": {"H100": "cheap"}}, "prices.gpu_hour.H100", "number"),
    ({"currency": "EUR", "gpu_hour": {}}, "prices.gpu_hour", "at least one GPU model"),
    ({"currency": "EUR"}, "prices.gpu_hour", "required"),
    ({"currency": "EUR", "gpu_hour": {"H100": 1}, "per_gpu": 1}, "prices.per_gpu",
     "unknown key"),
], ids=["lower-case", "four-letters", "negative", "nan", "text", "empty", "missing",
        "unknown-key"])
def test_bad_prices_are_refused_naming_the_key(prices, field, words):
    with pytest.raises(InvalidSpec) as err:
        build_queues({**QUEUES, "prices": prices}, {"default"})
    assert err.value.field == field and words in err.value.reason
