"""JSON values from what the analysis holds: numpy scalars as Python numbers, NaN, infinities and NA as ``null``,
DataFrames as lists of plain dicts, a whole column at a time: what the JSON document (:mod:`.json_document`) and
the figures it is made of (:mod:`.figures`) hold, written once for both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


class Rows(list):
    """Rows :func:`rows` made: JSON-ready already, so :func:`clean` passes them through as they are."""


def clean(v: Any) -> Any:
    """``v`` with every value JSON can hold as JSON holds it: numpy integers, floats and booleans as Python's,
    NaN, infinities, ``pd.NA`` and ``NaT`` as None, dicts, lists and tuples cleaned within (as dicts and lists)."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if v is pd.NA or v is pd.NaT:
        return None
    if type(v) is Rows:
        return v
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return v


def _values(a: Any) -> list[Any]:
    """One column's array as Python values, cleaned as :func:`clean` does, a whole column at a time where
    its numpy dtype allows (integers and booleans as they are, NaN and infinities as None)."""
    if isinstance(a, np.ndarray) and a.dtype.kind in "iubf":
        out = a.tolist()
        if a.dtype.kind == "f":
            for i in np.flatnonzero(~np.isfinite(a)).tolist():
                out[i] = None
        return out
    return [clean(x) for x in (a.tolist() if isinstance(a, np.ndarray) else list(a))]


def _arrays(df: pd.DataFrame) -> list[Any]:
    """The columns' arrays, without building a Series per column (which cost more than the rest of the
    JSON together: 2.3 -> 1.0 s for the 64 sample traces). ``_get_column_array`` is pandas' own accessor
    for this; where a pandas lacks it, each column's ``.array``."""
    get = getattr(df, "_get_column_array", None)
    if get is not None:
        try:
            return [get(i) for i in range(df.shape[1])]
        except (TypeError, IndexError, AttributeError):
            pass
    return [df.iloc[:, i].array for i in range(df.shape[1])]


def rows(df: pd.DataFrame) -> Rows:
    """DataFrame -> list of plain dicts (NaN/NA as None, numpy scalars as Python)."""
    names = [str(c) for c in df.columns]
    columns = [_values(a) for a in _arrays(df)]
    return Rows(dict(zip(names, values)) for values in zip(*columns))
