"""JSON document helpers (traceprobe.report.json_document): DataFrames as JSON-ready rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from traceprobe.report.json_document import rows


def test_rows_cleans_every_dtype_as_json_needs():
    df = pd.DataFrame({
        "i": np.array([1, 2, 3], np.int64),
        "f": [1.5, math.nan, math.inf],
        "b": [True, False, True],
        "o": ["a", None, np.float64("nan")],
        "n": pd.array([1, None, 3], dtype="Int64"),
        "u": np.array([7, 8, 9], np.uint8),
    })
    got = rows(df)
    assert got == [
        {"i": 1, "f": 1.5, "b": True, "o": "a", "n": 1, "u": 7},
        {"i": 2, "f": None, "b": False, "o": None, "n": None, "u": 8},
        {"i": 3, "f": None, "b": True, "o": None, "n": 3, "u": 9},
    ]
    assert all(type(v) in (int, float, bool, str, type(None)) for r in got for v in r.values())
    assert rows(df.iloc[:0]) == []
