"""JSON document helpers (traceprobe.report.json_document): DataFrames as JSON-ready rows, reports rendered in workers."""

from __future__ import annotations

import math
import subprocess
import sys
from functools import partial
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from traceprobe.collect import analyze_paths, each_then
from traceprobe.report import report_json
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


def test_reports_rendered_where_they_were_analysed_give_the_same_document():
    """Real sample traces, two worker processes: each report encoded in its worker and spliced in
    gives the text that rendering every report here gives."""
    rendered: dict[str, msgspec.Raw] = {}
    summary = analyze_paths([REPO / "sample_traces"], jobs=2, then=partial(each_then, {"json": report_json}),
                            on_then=lambda r, made: rendered.__setitem__(r.path, made["json"]))
    assert len(rendered) == len(summary.reports) > 1
    assert all(isinstance(v, msgspec.Raw) for v in rendered.values())
    one = to_json(summary, rendered)
    assert one == to_json(summary)
    partly = dict(list(rendered.items())[1:])  # a report not rendered yet is rendered here
    assert to_json(summary, partly) == one


def test_naming_the_renderer_imports_no_pandas():
    """The command names ``report_json`` before a single trace's decode starts, which needs pandas not imported yet."""
    code = "import sys; from traceprobe.report import report_json; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"
