"""Exact conversion of Kineto's decimal microsecond text to int64 nanoseconds.

Kineto writes ``ts`` and ``dur`` in microseconds as decimal text, usually with
three decimals (``1712195495505582.988``). A float64 holds only 15-17 significant
digits, so epoch-based microsecond times lose up to ~650 ns through it. Here the
number's text itself is read, digit by digit, with integer arithmetic:
``ns = round_half_even(decimal_value * 1000)``, exact for every number whose
result fits in int64 (digits past the nanosecond are rounded half to even).

Kineto's own shapes, ``-?digits.ddd`` (three decimals, every value of a piece;
torch 2.1 on) or ``-?digits`` (integer µs, before), are the ns value once the
point is removed and the value scaled: the texts are checked with numpy and
read as integers by numpy's C parser. The general shape (``-?digits[.digits]``,
at most 16 integer and 9 fractional digits) is parsed for all values at once with
numpy: the texts become a fixed-width byte matrix, each row is aligned on its
decimal point (rows are grouped by where the point is), and the digits are
weighted by one matrix product. Anything else (exponents, numeric strings such as ``"12"``, ``null``,
objects, texts longer than the matrix) is rare and read one by one with
:class:`decimal.Decimal`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import msgspec
import numpy as np

OK, MISSING, INVALID = 0, 1, 2
"""Status of each value: a number, no text (the field was absent), not a usable number."""

_INT_DIGITS = 16  # µs: up to 9.99e15, i.e. ns up to 10**19 - 1 (checked against int64 below)
_FRAC_DIGITS = 9  # 3 kept (ns), 1 rounding digit, 5 more that only break ties
_POINT = 1 + _INT_DIGITS  # column of the decimal point once aligned (column 0: the sign)
_WIDTH = _POINT + 1 + _FRAC_DIGITS + 1  # and one column that stays empty unless a text is too long
_COLUMN = np.arange(_WIDTH, dtype=np.uint8)[:, None]
_COLUMN64 = _COLUMN.astype(np.int64)
_ALIGNED = np.arange(_INT_DIGITS + 1 + _FRAC_DIGITS, dtype=np.int64)[:, None]  # rows of the point-aligned matrix
_SEP_LEN = _WIDTH
_SEP = bytes(_SEP_LEN)
"""Zero bytes before, between and after the texts: reads a little before or past a text stay in its own padding."""
_I64_MAX = 2**63 - 1
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_NS = Decimal(1000)
_CHUNK = 1 << 15  # values parsed at once (bounds the temporaries to a few tens of MB)


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
    n = len(raws)
    ns = np.zeros(n, dtype=np.int64)
    status = np.full(n, INVALID, dtype=np.int8)
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        part = raws[lo:hi]
        fixed = _fixed_decimals(part, lens[lo:hi])
        if fixed is not None:
            ns[lo:hi], status[lo:hi] = fixed, OK
            continue
        text = np.frombuffer(_SEP + _SEP.join(part) + _SEP + _SEP, dtype=np.uint8)
        v, ok = _parse_plain(text, lens[lo:hi])
        ns[lo:hi] = v
        status[lo:hi] = np.where(ok, OK, np.where(lens[lo:hi] == 0, MISSING, INVALID))
        for i in np.flatnonzero(~ok & (lens[lo:hi] > 0)).tolist():  # exponents, strings, null, long texts: one by one
            value = _one(bytes(part[i]))
            if value is not None:
                ns[lo + i], status[lo + i] = value, OK
    return ns, status


_DIGITS_DOT_MINUS_SPACE = np.zeros(256, dtype=bool)
_DIGITS_DOT_MINUS_SPACE[[*b"0123456789", ord("."), ord("-"), ord(" ")]] = True


def _fixed_decimals(part: Sequence[Any], lens: np.ndarray) -> np.ndarray | None:
    """int64 ns of texts that all read ``-?digits`` or all ``-?digits.d{k}`` with the same ``k`` (1 to 3), or
    None when one does not. Kineto writes µs with three decimals (torch 2.1 on) or as integers (before): such
    a text without its point, times ``10**(3 - k)``, is the ns value, read by numpy's C parser
    (``numpy.fromstring``); at most 18 digits once scaled, or 19 led by a digit up to 8, so that no value can
    leave int64. Only digits, a leading ``-`` and the point pass the checks, whatever the bytes, so the parser
    sees exactly ``n`` integers.
    """
    n = len(part)
    if n == 0 or lens.min() == 0:
        return None
    joined = b" ".join(part)
    buf = np.frombuffer(joined, dtype=np.uint8)
    if not _DIGITS_DOT_MINUS_SPACE[buf].all():
        return None
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    np.cumsum(lens[:-1] + 1, out=starts[1:])
    ends = starts + lens
    dots = np.count_nonzero(buf == ord("."))
    k = 0 if dots == 0 else int(lens[0]) - 1 - joined.find(b".")
    if (dots and (dots != n or not 1 <= k <= 3 or not (buf[ends - k - 1] == ord(".")).all())) or not (k or dots == 0):
        return None
    neg = buf[starts] == ord("-")
    if np.count_nonzero(buf == ord(" ")) != n - 1 or np.count_nonzero(buf == ord("-")) != np.count_nonzero(neg):
        return None  # a space or a minus inside a text (not JSON): only the separators and leading signs pass
    width = lens - neg - (1 if k else 0) + (3 - k)  # digits of the ns value
    if (lens - neg - (k + 1 if k else 0)).min() < 1:
        return None  # no digit before the point
    if width.max() > 18 and (width.max() > 19 or not (buf[starts + neg][width > 18] <= ord("8")).all()):
        return None
    out = np.fromstring(joined.replace(b".", b"") if k else joined, dtype=np.int64, sep=" ")
    if out.size != n:
        return None
    return out * 10 ** (3 - k) if k < 3 else out


def _parse_plain(text: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values of the texts (``lens`` bytes each) shaped ``-?digits[.digits]``, from ``text``:
    the texts joined with :data:`_SEP` (zero bytes) before, between and after them.

    Returns ``(ns, ok)``; ``ok`` is False for other shapes, for texts longer than
    the matrix and for values beyond int64. The shape is checked on a zero-padded
    byte matrix with one row per character position (every step runs along
    contiguous memory); the digits are then read from a second matrix gathered
    with every value aligned on its decimal point, so each row has one weight.
    """
    n = lens.size
    starts = np.empty(n, dtype=np.int64)
    starts[0:1] = _SEP_LEN
    np.cumsum(lens[:-1] + _SEP_LEN, out=starts[1:])
    starts[1:] += _SEP_LEN
    t = text[starts + _COLUMN64]
    t *= _COLUMN < lens
    allowed = ((t - np.uint8(ord("0"))) < 10) | (t == ord(".")) | (t == 0)
    neg = t[0] == ord("-")
    allowed[0] |= neg
    # decimal points: found in the flat text (the separators hold none), the first one per value kept
    dot_at = np.flatnonzero(text == ord("."))
    owner = np.searchsorted(starts, dot_at, side="right") - 1
    dots = np.bincount(owner, minlength=n)
    point = lens.copy()
    point[owner[::-1]] = (dot_at - starts[owner])[::-1]
    ok = allowed.all(axis=0) & (lens > 0) & (lens < _WIDTH) & (dots <= 1) & (lens - neg > dots)
    ok &= (point - neg <= _INT_DIGITS) & (lens - point - 1 <= _FRAC_DIGITS)
    # Aligned on the point: row c holds the character at (point - _INT_DIGITS + c), so the
    # integer digits sit in rows 0-15, the point in 16, the ns digits in 17-19, the rounding
    # digit in 20 and the rest in 21-25. Rows before or after a text read its zero separators;
    # non-digits (sign, point, zeros) count 0.
    d = text[(starts + point - _INT_DIGITS) + _ALIGNED] - np.uint8(ord("0"))
    d *= d < 10
    d32 = d.astype(np.uint32)
    hi = np.zeros(n, dtype=np.uint32)
    lo = np.zeros(n, dtype=np.uint32)
    for c in range(8):  # eight digits at a time in uint32, then into uint64
        hi = hi * np.uint32(10) + d32[c]
        lo = lo * np.uint32(10) + d32[c + 8]
    ns = d32[_INT_DIGITS + 1] * np.uint32(100) + d32[_INT_DIGITS + 2] * np.uint32(10) + d32[_INT_DIGITS + 3]
    value = hi.astype(np.uint64) * np.uint64(10**11) + lo.astype(np.uint64) * np.uint64(1000) + ns
    r = d[_INT_DIGITS + 4]  # digits past the ns: round half to even
    sticky = d[_INT_DIGITS + 5 :].any(axis=0)
    value += ((r > 5) | ((r == 5) & (sticky | (value % np.uint64(2) == 1)))).astype(np.uint64)
    ok &= value <= np.uint64(_I64_MAX)
    out = np.where(ok, value, np.uint64(0)).astype(np.int64)
    return np.where(neg, -out, out), ok
