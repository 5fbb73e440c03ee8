"""Numbers for people: durations in the largest unit that keeps them short, always with the unit named.

Only the human formats (the table, ``--detail``, Markdown) use these; JSON and CSV keep
integer nanoseconds and 0..1 fractions.
"""

from __future__ import annotations

import math


def missing(v: object) -> bool:
    """None, NaN or pandas' NA: a figure with nothing to show."""
    if v is None:
        return True
    try:
        return bool(isinstance(v, float) and math.isnan(v)) or str(v) == "<NA>"
    except (TypeError, ValueError):
        return False


def duration(ns: float | int | None) -> str:
    """``ns`` nanoseconds as ``812 ns``, ``41.3 µs``, ``58.0 ms`` or ``1.92 s`` (``-`` when missing).

    Three significant figures at most below a second, two decimals above; thousands separated.
    """
    if missing(ns):
        return "-"
    v = float(ns)  # pyright: ignore[reportArgumentType]
    a = abs(v)
    if a < 1e3:
        return f"{v:,.0f} ns"
    if a < 1e6:
        return f"{v / 1e3:,.1f} µs"
    if a < 1e9:
        return f"{v / 1e6:,.1f} ms"
    return f"{v / 1e9:,.2f} s"


def ms(ns: float | int | None, places: int = 3) -> str:
    """``ns`` as milliseconds without the unit (for a column headed ``... ms``); ``-`` when missing."""
    return "-" if missing(ns) else f"{float(ns) / 1e6:,.{places}f}"  # pyright: ignore[reportArgumentType]


def percent(f: float | None, places: int = 0) -> str:
    """A 0..1 fraction as ``83%`` (``places`` decimals); ``-`` when missing."""
    return "-" if missing(f) else f"{float(f):.{places}%}"  # pyright: ignore[reportArgumentType]
