"""manifest.json as typed data: round trip, old layouts, hostile files (synthetic manifests built here)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceprobe import manifest as mf


def _write(folder, doc) -> None:
    (folder / mf.MANIFEST).write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_round_trip_and_traces_always_a_list(tmp_path):
    m = mf.Manifest(traceprobe="0.1.0", created="t", command=["x"], environment={"host": "h", "torch": "2"})
    m.variants = [
        mf.Entry("w", "a", "ok", [mf.trace_name("w", "a")], wall_s=0.5, params={"n": 1}, extra={"resumed": True}),
        mf.Entry("w", "ddp", "ok", [mf.trace_name("w", "ddp", r) for r in (0, 1)]),
    ]
    mf.save(tmp_path, m)
    back = mf.load(tmp_path)
    assert [e.to_json() for e in back.variants] == [e.to_json() for e in m.variants]
    assert back.variants[0].extra == {"resumed": True} and not back.problems
    assert json.loads((tmp_path / mf.MANIFEST).read_text())["schema"] == mf.SCHEMA


def test_old_layout_trace_str_or_list(tmp_path):
    _write(tmp_path, {"variants": [{"workload": "w", "variant": "a", "status": "ok", "trace": "w.a.pt.trace.json.gz", "wall_s": 1},
                                   {"workload": "w", "variant": "d", "status": "ok", "trace": ["w.d.rank0.pt.trace.json.gz"]}]})
    m = mf.load(tmp_path)
    assert [e.traces for e in m.variants] == [["w.a.pt.trace.json.gz"], ["w.d.rank0.pt.trace.json.gz"]]
    info = mf.info_for(tmp_path / "w.a.pt.trace.json.gz")
    assert info["workload"] == "w" and info["wall_s"] == 1.0 and info["order"] == 0
    assert mf.info_for(tmp_path / "other.json") == {}


@pytest.mark.parametrize(
    "entry, problem",
    [
        ({"workload": ["a"], "variant": "v"}, "workload must be a plain name"),
        ({"workload": "w", "variant": "../v"}, "variant must be a plain name"),
        ({"workload": "w", "variant": "v", "trace": "../../etc/passwd"}, "plain file names"),
        ({"workload": "w", "variant": "v", "traces": [1]}, "plain file names"),
        ({"workload": "w", "variant": "v", "status": "great"}, "unknown status"),
        ("not an object", "not an object"),
    ],
)
def test_hostile_entries_are_dropped_with_one_line(tmp_path, entry, problem):
    good = {"workload": "g", "variant": "v", "trace": "g.v.pt.trace.json.gz"}
    _write(tmp_path, {"variants": [entry, good]})
    m = mf.load(tmp_path)
    assert [e.workload for e in m.variants] == ["g"]
    (line,) = m.problems
    assert problem in line and "\n" not in line and str(tmp_path / mf.MANIFEST) in line


def test_bad_field_is_ignored_entry_kept(tmp_path):
    _write(tmp_path, {"variants": [{"workload": "w", "variant": "v", "trace": "w.v.pt.trace.json.gz", "wall_s": "fast", "rank": -1}]})
    m = mf.load(tmp_path)
    (e,) = m.variants
    assert e.wall_s is None and e.rank is None
    assert len(m.problems) == 2 and "wall_s must be a number" in m.problems[0]
    assert "wall_s" not in mf.info_for(tmp_path / "w.v.pt.trace.json.gz")


@pytest.mark.parametrize("text", ["{", "[1, 2]", "\"x\"", "\xff\xfe", "[" * 100_000])
def test_unusable_file_is_one_line_error(tmp_path, text):
    (tmp_path / mf.MANIFEST).write_bytes(text.encode("utf-8", "surrogateescape") if text != "\xff\xfe" else b"\xff\xfe")
    with pytest.raises(mf.ManifestError) as ei:
        mf.load(tmp_path)
    assert str(ei.value).startswith(str(tmp_path / mf.MANIFEST)) and "\n" not in str(ei.value)
    assert mf.info_for(tmp_path / "x.pt.trace.json.gz") == {}
    # a recording into the folder replaces it rather than fail
    mf.update(tmp_path, lambda m: m.variants.append(mf.Entry("w", "v", traces=["w.v.pt.trace.json.gz"])))
    assert [e.key for e in mf.load(tmp_path).variants] == [("w", "v")]


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)
_keys = st.sampled_from(["workload", "variant", "status", "trace", "traces", "wall_s", "params", "devices", "rank", "steps", "x"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(_keys, _json, max_size=8), max_size=4))
def test_any_json_entries_never_raise(entries):
    """Whatever the entries hold, reading gives typed entries or problem lines, never an exception."""
    m = mf.Manifest.from_json({"variants": entries}, "m.json")
    for e in m.variants:
        assert isinstance(e.workload, str) and all(mf.plain_name(t) for t in e.traces)
        assert e.wall_s is None or isinstance(e.wall_s, float)
    assert len(m.variants) + sum("entry ignored" in p or "not an object" in p for p in m.problems) == len(entries)
