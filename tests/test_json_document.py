"""JSON document helpers (traceprobe.report.json_document): DataFrames as JSON-ready rows, one route to the document."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from traceprobe.collect import analyze_paths
from traceprobe.report.json_document import rows, to_json


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


REPO = Path(__file__).resolve().parent.parent


def test_the_document_has_one_route():
    """The JSON document is made from the finished summary only: the renderer takes no reports made elsewhere,
    and naming the pictures' hook (made in workers) imports no pandas."""
    import inspect

    assert list(inspect.signature(to_json).parameters) == ["summary"]
    summary = analyze_paths([REPO / "sample_traces" / "script-ddp"], jobs=1)
    doc = msgspec.json.decode(to_json(summary))
    assert [t["path"] for t in doc["traces"]] == [r.path for r in summary.reports]
    code = "import sys; from traceprobe.collect import timeline_lanes; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_every_key_of_a_trace_is_declared_once():
    """The trace objects of the document and the schema come from one list of figures (report/figures.py): the
    keys of every sample's object are the declared ones, in order, and the schema describes exactly those."""
    from traceprobe.report.figures import TRACE, schema

    summary = analyze_paths([REPO / "sample_traces" / "script-ddp"], jobs=1)
    doc = msgspec.json.decode(to_json(summary))
    keys = [f.key for f in TRACE]
    assert len(set(keys)) == len(keys)
    assert all(list(t) == keys for t in doc["traces"])
    assert list(schema()["$defs"]["trace"]["properties"]) == keys
