"""Kubernetes resource quantities (``500m``, ``64Gi``, ``1e3``) parsed as the API server does.

This follows ``ParseQuantity`` of k8s.io/apimachinery (``pkg/api/resource``) step by step:

- grammar: an optional sign, digits with an optional ``.`` (``1.``, ``.5`` and even ``.`` are
  numbers; a lone sign is zero), then a suffix: ``n u m "" k M G T P E`` (powers of ten),
  ``Ki Mi Gi Ti Pi Ei`` (powers of two) or ``e``/``E`` with a signed integer exponent. No
  whitespace anywhere. (rota refuses only exponents beyond +-1000, which Kubernetes accepts.)
- value: exact (a ``Fraction`` here, an arbitrary-precision decimal there), except that a
  non-zero amount finer than a nano-unit is rounded away from zero to the next nano-unit, and
  a binary-suffixed amount is capped at 2^63 - 1.
- ``milli_value`` and ``value`` are Kubernetes' ``MilliValue()`` and ``Value()``: rounded up.

Errors are ``InvalidSpec`` naming the field, with the message Kubernetes gives.
"""

from __future__ import annotations

import math
from fractions import Fraction

from rota.core import InvalidSpec

_FORMAT_WRONG = ("quantities must match the regular expression "
                 "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
_SUFFIX_WRONG = "unable to parse quantity's suffix"
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_NANO = Fraction(1, 10**9)
_MAX_BINARY = Fraction(2**63 - 1)
_MAX_EXPONENT = 1000  # far beyond any resource; keeps the exact arithmetic small


def parse_quantity(text: object, field: str) -> Fraction:
    """A quantity string -> its exact value (``"500m"`` -> 1/2, ``"1Ki"`` -> 1024)."""
    if not isinstance(text, str) or isinstance(text, bool):
        raise InvalidSpec(field, f"expected a quantity string such as 500m or 64Gi, got {text!r}")
    if not text:
        raise InvalidSpec(field, _FORMAT_WRONG)
    negative, number, suffix = _split(text, field)
    base, exponent = _interpret(suffix, field)
    amount = number * Fraction(base) ** exponent
    if amount and amount.denominator != 1:
        amount = math.ceil(amount / _NANO) * _NANO  # magnitude here: rounds away from zero
    if base == 2 and amount > _MAX_BINARY:
        amount = _MAX_BINARY
    return -amount if negative else amount


def milli_value(amount: Fraction) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (``"0.1m"`` -> 1)."""
    return math.ceil(amount * 1000)


def value(amount: Fraction) -> int:
    """``Quantity.Value()``: whole units, rounded up (``"1500m"`` -> 2)."""
    return math.ceil(amount)


def _split(text: str, field: str) -> tuple[bool, Fraction, str]:
    """``parseQuantityString``: the sign, the unsigned number and the raw suffix."""
    pos, end = 0, len(text)
    negative = text[0] == "-"
    if text[0] in "+-":
        pos = 1
    whole_start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[whole_start:pos]
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        fraction_start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[fraction_start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise InvalidSpec(field, _FORMAT_WRONG)
    digits = (whole or "0") + fraction
    return negative, Fraction(int(digits), 10 ** len(fraction)), text[suffix_start:]


def _interpret(suffix: str, field: str) -> tuple[int, int]:
    """``suffixer.interpret``: the suffix -> (base, exponent)."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return 2, _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        text = suffix[1:]
        body = text[1:] if text[0] in "+-" else text
        if body and set(body) <= _DIGITS and abs(int(text)) < 2**63:
            exponent = (int(text) + 2**31) % 2**32 - 2**31  # Go keeps it as an int32
            if abs(exponent) > _MAX_EXPONENT:
                raise InvalidSpec(field, f"exponent {exponent} is beyond what rota reads "
                                         f"(|exponent| <= {_MAX_EXPONENT})")
            return 10, exponent
    raise InvalidSpec(field, _SUFFIX_WRONG)
