"""Quantities parse as Kubernetes parses them: the cases are those of apimachinery's own
quantity tests (pkg/api/resource/quantity_test.go, TestQuantityParse and friends), with the
expected value written as the exact number the Go test's decQuantity(mantissa, exponent) means.
"""

from fractions import Fraction as F

import pytest

from rota.backends.kube.quantity import milli_value, parse_quantity, value
from rota.core import InvalidSpec


def dec(mantissa: int, exponent: int) -> F:
    """decQuantity(mantissa, exponent): mantissa x 10^exponent."""
    return F(mantissa) * F(10) ** exponent


@pytest.mark.parametrize("text, expected", [
    ("0", dec(0, 0)), ("0n", dec(0, 0)), ("0u", dec(0, 0)), ("0m", dec(0, 0)),
    ("0Ki", dec(0, 0)),
    ("0.00050k", dec(5, -1)), ("0.00500", dec(5, -3)), ("0.05000", dec(5, -2)),
    ("0.50000", dec(5, -1)), ("0.5e0", dec(5, -1)), ("0.5e-1", dec(5, -2)),
    ("0.5e-2", dec(5, -3)), ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)), ("1.3E+6", dec(13, 5)), ("1.40e9", dec(14, 8)),
    ("1.53E12", dec(153, 10)), ("1.6e15", dec(16, 14)), ("1.7E18", dec(17, 17)),
    ("9.01", dec(901, -2)), ("8.1k", dec(81, 2)), ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)), ("5.444T", dec(5444, 9)), ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)), ("2.5P", dec(25, 14)), ("1.01E", dec(101, 16)),
    # things that saturate or round (up, to the next nano-unit)
    ("3.001n", dec(4, -9)), ("1.1E-9", dec(2, -9)), ("0.0000000001", dec(1, -9)),
    ("0.0000000005", dec(1, -9)), ("0.00000000050", dec(1, -9)), ("0.5e-9", dec(1, -9)),
    ("0.9n", dec(1, -9)), ("0.00000012345", dec(124, -9)), ("0.00000012354", dec(124, -9)),
    ("9Ei", F(2**63 - 1)), ("9223372036854775807Ki", F(2**63 - 1)), ("12E", dec(12, 18)),
    # fractional binary amounts
    ("100.035Ki", dec(10243584, -2)), ("0.5Mi", F(512 * 1024)), ("0.05Gi", dec(536870912, -1)),
    ("0.025Ti", dec(274877906944, -1)),
    # "things written by trolls"
    ("0.000000000001Ki", dec(2, -9)), (".001", dec(1, -3)), (".0001k", dec(100, -3)),
    ("1.", dec(1, 0)), ("1.G", dec(1, 9)),
    # what parseQuantityString makes of a lone point, with or without a sign
    (".", F(0)), ("-.", F(0)), ("1E-3", dec(1, -3)),
])
def test_parses_like_apimachinery(text, expected):
    assert parse_quantity(text, "cpu") == expected
    if text[0] not in "+-":  # as the Go tests do: every case again with either sign
        assert parse_quantity("+" + text, "cpu") == expected
        assert parse_quantity("-" + text, "cpu") == -expected


@pytest.mark.parametrize("text, message", [
    ("1.1.M", "must match"), ("1+1.0M", "must match"), ("0.1mi", "suffix"),
    ("0.1am", "must match"), ("aoeu", "must match"), (".5i", "suffix"), ("1i", "suffix"),
    ("-3.01i", "suffix"), ("-3.01e-", "suffix"), (" 1", "must match"), ("1 ", "must match"),
    ("", "must match"),
])
def test_refuses_what_apimachinery_refuses(text, message):
    with pytest.raises(InvalidSpec, match=message) as err:
        parse_quantity(text, "status.allocatable.cpu")
    assert err.value.field == "status.allocatable.cpu"


@pytest.mark.parametrize("bad", [None, 4, 1.5, True, ["1"]])
def test_only_strings_are_quantities(bad):
    with pytest.raises(InvalidSpec, match="expected a quantity string"):
        parse_quantity(bad, "memory")


@pytest.mark.parametrize("text, milli, whole", [
    ("500m", 500, 1),          # half a core: 500 milli, Value() rounds up to 1
    ("2", 2000, 2),
    ("0.1m", 1, 1),            # 0.0001 cores: MilliValue rounds up to 1
    ("1e3", 1_000_000, 1000),
    ("64Gi", 64 * 2**30 * 1000, 64 * 2**30),
    ("1500m", 1500, 2),
])
def test_milli_value_and_value_round_up(text, milli, whole):
    amount = parse_quantity(text, "cpu")
    assert (milli_value(amount), value(amount)) == (milli, whole)


def test_an_exponent_wraps_as_go_keeps_it_in_32_bits():
    # "1e4294967296": ParseInt gives 2^32, int32(2^32) is 0, so Kubernetes reads 1
    assert parse_quantity("1e4294967296", "cpu") == 1


def test_exponents_beyond_a_thousand_are_refused_by_name():
    with pytest.raises(InvalidSpec, match="beyond what rota reads"):
        parse_quantity("1e2000", "memory")
