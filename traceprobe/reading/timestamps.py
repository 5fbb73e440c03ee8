"""Exact conversion of Kineto's decimal microsecond text to int64 nanoseconds.

Kineto writes ``ts`` and ``dur`` in microseconds as decimal text, usually with
three decimals (``1712195495505582.988``). A float64 holds only 15-17 significant
digits, so epoch-based microsecond times lose up to ~650 ns through it. Here the
number's text itself is read with integer arithmetic:
``ns = round_half_even(decimal_value * 1000)``, exact for every number whose
result fits in int64 (digits past the nanosecond are rounded half to even).

Plain decimals (``-?digits[.digits]``, at most 16 integer and 18 fractional
digits: every ``ts``/``dur`` Kineto writes) are read for all values at once: the
point becomes a separator, so numpy's C parser reads the integer and the
fraction of each value as two integers, combined with the fraction's length.
Anything else (exponents, numeric strings such as ``"12"``, ``null``, objects,
longer texts) is rare and read one by one with :class:`decimal.Decimal`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from itertools import compress
from typing import Any

import msgspec
import numpy as np

OK, MISSING, INVALID = 0, 1, 2
"""Status of each value: a number, no text (the field was absent), not a usable number."""

_INT_DIGITS, _FRAC_DIGITS = 16, 18  # the most read at once: each part fits int64, and 10**16 µs is beyond int64 ns
_I64_MAX = 2**63 - 1
_POW10 = 10 ** np.arange(_FRAC_DIGITS + 1, dtype=np.int64)
_PLAIN = np.zeros(256, dtype=bool)
_PLAIN[[*b"0123456789", ord("."), ord("-")]] = True
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_NS = Decimal(1000)


def _one(text: bytes) -> int | None:
    """Exact ns of one value's JSON text, or None when it is not a usable number."""
    if text[:1] == b'"':
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return None
    else:
        value = text.decode("ascii", "replace")
    if not isinstance(value, str) or not _NUMBER.fullmatch(value):
        return None
    try:
        d = Decimal(value.strip())
    except InvalidOperation:
        return None
    if not d.is_finite() or (d.adjusted() > 18 and d != 0):
        return None
    ns = int((d * _NS).to_integral_value(ROUND_HALF_EVEN))
    return ns if -(2**63) <= ns < 2**63 else None


def parse_us(raws: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond JSON numbers -> exact int64 nanoseconds.

    Args:
        raws: each value's JSON text (``msgspec.Raw`` or bytes; empty when the
            field was absent).

    Returns:
        ``(ns, status)``: int64 ns (0 where not OK) and int8 status per value:
        :data:`OK`, :data:`MISSING` (empty text) or :data:`INVALID` (not a
        number, a numeric string excepted, or beyond int64 ns).
    """
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    ns, ok = _plain(raws, lens)
    status = np.where(ok, OK, np.where(lens == 0, MISSING, INVALID)).astype(np.int8)
    for i in np.flatnonzero(~ok & (lens > 0)).tolist():  # exponents, strings, null, long texts: one by one
        value = _one(bytes(raws[i]))
        if value is not None:
            ns[i], status[i] = value, OK
    return ns, status


def _plain(raws: Sequence[Any], lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ns, ok)`` of texts (``lens`` bytes each) shaped ``-?digits[.digits]``, at most :data:`_INT_DIGITS`
    and :data:`_FRAC_DIGITS` digits; ``ok`` is False for other texts and for values beyond int64.

    The shape is checked on the texts joined by spaces, so that whatever the bytes, a text that passes
    is one integer to numpy's parser, or two once its point is made a space. The texts that do not pass
    are left out, and the others read again on their own.
    """
    n = len(raws)
    ns = np.zeros(n, dtype=np.int64)
    if n == 0:
        return ns, np.zeros(0, dtype=bool)
    joined = b" ".join(raws) + b" "
    buf = np.frombuffer(joined, dtype=np.uint8)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1] + 1, out=starts[1:])
    bad = ~_PLAIN[buf]
    bad[starts + lens] = False  # (the separators)
    minus = np.flatnonzero(buf == ord("-"))
    bad[minus[starts[np.searchsorted(starts, minus, side="right") - 1] != minus]] = True  # a minus inside a text
    ok = lens > 0
    ok[np.searchsorted(starts, np.flatnonzero(bad), side="right") - 1] = False
    dots = np.flatnonzero(buf == ord("."))
    owner = np.searchsorted(starts, dots, side="right") - 1
    point = lens.copy()
    point[owner] = dots - starts[owner]
    neg = buf[starts] == ord("-")
    digits, decimals = point - neg, lens - point - 1  # (decimals: -1 without a point)
    ok &= (np.bincount(owner, minlength=n) <= 1) & (digits >= 1) & (digits <= _INT_DIGITS)
    ok &= (decimals == -1) | ((decimals >= 1) & (decimals <= _FRAC_DIGITS))
    if not ok.all():
        rows = np.flatnonzero(ok)
        if rows.size:
            ns[rows], ok[rows] = _plain(list(compress(raws, ok.tolist())), lens[rows])
        return ns, ok
    numbers = np.fromstring(joined.replace(b".", b" "), dtype=np.int64, sep=" ")
    has_dot = decimals > 0
    first = np.arange(n) + np.cumsum(has_dot) - has_dot  # where each value's integer part is among the numbers
    if numbers.size != n + np.count_nonzero(has_dot):
        return ns, ~ok
    frac = np.zeros(n, dtype=np.int64)
    frac[has_dot] = numbers[first[has_dot] + 1]
    k = np.maximum(decimals, 0)
    frac *= _POW10[np.maximum(3 - k, 0)]  # ns from 0 to 3 decimals
    if (k > 3).any():  # digits past the ns: round half to even
        long = np.flatnonzero(k > 3)
        q, r = np.divmod(frac[long], _POW10[k[long] - 3])
        half = 5 * _POW10[k[long] - 4]
        frac[long] = q + ((r > half) | ((r == half) & (q % 2 == 1)))
    value = np.abs(numbers[first]).astype(np.uint64) * np.uint64(1000) + frac.astype(np.uint64)
    ok = value <= np.uint64(_I64_MAX)
    out = np.where(ok, value, np.uint64(0)).astype(np.int64)
    ns[:] = np.where(neg, -out, out)
    return ns, ok
