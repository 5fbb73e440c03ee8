"""Summaries (traceprobe.summary_file, traceprobe.analysis.job.summaries): every sample trace's report written as a
summary and read back is the same report, field by field; a folder of summaries gives the CLI's figures,
stragglers, causes, gates and diff of its traces; bad summaries are one line each."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import few, swept
from typer.testing import CliRunner

from traceprobe.analysis.job.summaries import from_summary, summary_bytes, write_summary
from traceprobe.cli import app
from traceprobe.collect import analyze_paths
from traceprobe.summary_file import decode, json_schema

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "summary_schema.json"


def _summary_name(name: str) -> str:
    for end in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"):
        if name.endswith(end):
            return name[: -len(end)] + ".summary.json"
    raise AssertionError(name)


READ = ("causes/ddp-compute/", "training/tb-ddp/", "data-parallel.ddp.rank1.")
"""Samples the tests below read by name, swept beside the few (:data:`conftest.FEW`) in the default run."""


@pytest.fixture(scope="module", params=["few", pytest.param("every", marks=[pytest.mark.slow, pytest.mark.xdist_group("summaries_every")])])
def both(request, tmp_path_factory):
    """Sample traces analysed (the per-trace reports, then the whole analysis), and each report written as a
    summary under the same relative path in a second folder, which is analysed in turn: a few samples and those the
    tests read by name, or (slow) every sample (their reports analysed once per test run: conftest's ``every_sample``)."""
    from traceprobe.analysis.summary import summarize
    from traceprobe.collect import _crash_failure, analyze_file, discover
    from traceprobe.collect.execution import map_items

    root = tmp_path_factory.mktemp("summaries")
    files, _ = discover([str(SAMPLES)])
    files = [f for f in files if swept(f)]
    jobs = 2 if request.param == "every" else 1
    if request.param == "few":
        files = [f for f in files if few(f) or str(Path(f).resolve().relative_to(SAMPLES)).startswith(READ)]
        originals = map_items(analyze_file, files, jobs=jobs, on_crash=_crash_failure)
    else:  # (every sample's report, analysed once per test run: conftest's every_sample)
        kept = {str(f) for f in files}
        originals = [r for r in request.getfixturevalue("every_sample")()[0] if r.path in kept]
        assert len(originals) == len(kept)
    for r in originals:
        rel = Path(r.path).resolve().relative_to(SAMPLES)
        (root / rel.parent).mkdir(parents=True, exist_ok=True)
        write_summary(r, root / rel.parent / _summary_name(rel.name), job="samples")
    traces = summarize(originals)
    return traces, analyze_paths([str(root)], jobs=jobs), root, {r.path: r for r in originals}


def _same(a, b, where: str) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "path":
            continue
        if f.name == "graph":  # the rank's part of the dependency graph, every array and name (analysis/job/graph_tables.py)
            assert x is not None and y is not None, where
            for g in dataclasses.fields(x):
                if g.name == "event_rows":  # (the trace's rows: a summary carries no trace, and the graph none)
                    continue
                if g.name == "device_causes":  # (the kernel what-ifs: each cause, its top, its durations)
                    u, v = getattr(x, g.name), getattr(y, g.name)
                    assert [(c, t) for c, t, _ in u] == [(c, t) for c, t, _ in v], f"{where}: graph.device_causes"
                    assert all(np.array_equal(a_, b_) for (_, _, a_), (_, _, b_) in zip(u, v)), f"{where}: graph.device_causes"
                    continue
                u, v = getattr(x, g.name), getattr(y, g.name)
                if isinstance(u, np.ndarray):
                    assert u.dtype == v.dtype and np.array_equal(u, v), f"{where}: graph.{g.name}"
                elif isinstance(u, pd.DataFrame):
                    pd.testing.assert_frame_equal(u.reset_index(drop=True), v, obj=f"{where}: graph.{g.name}")
                else:
                    assert u == v, f"{where}: graph.{g.name}"
            continue
        if f.name == "info":
            assert {k: v for k, v in y.items() if k not in ("job", "summary_of")} == x, where
            continue
        if isinstance(x, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y, obj=f"{where}: {f.name}")
        elif f.name == "extra":  # the computed figures' tables (analysis/registry.py)
            assert list(x) == list(y), where
            for key in x:
                pd.testing.assert_frame_equal(x[key], y[key], obj=f"{where}: {key}")
        elif f.name == "devices":
            pd.testing.assert_frame_equal(x.devices, y.devices, obj=f"{where}: devices")
            assert (x.any_busy_ns, x.concurrent_ns, x.device_count) == (y.any_busy_ns, y.concurrent_ns, y.device_count), where
            assert x.concurrency == y.concurrency or (math.isnan(x.concurrency) and math.isnan(y.concurrency)), where
        else:
            assert repr(x) == repr(y), f"{where}: {f.name}"  # (repr: NaN == NaN)


def test_every_sample_report_round_trips(both, request) -> None:
    traces, summaries, root, _ = both
    least = 40 if request.node.callspec.params["both"] == "every" else 12
    assert not summaries.failures and len(summaries.reports) == len(traces.reports) > least
    by_rel = {str(Path(r.path).relative_to(root)): r for r in summaries.reports}
    for r in traces.reports:
        rel = Path(r.path).resolve().relative_to(SAMPLES)
        s = by_rel[str(rel.parent / _summary_name(rel.name))]
        _same(r, s, str(rel))  # findings included: the summary's reports get the same findings across ranks
        assert s.info["job"] == "samples" and s.info["summary_of"] == rel.name
        assert s.headline.keys() == r.headline.keys()
        assert all(repr(s.headline[k]) == repr(r.headline[k]) for k in r.headline)


def test_sizes(both) -> None:
    _, summaries, _, _ = both
    sizes = [Path(r.path).stat().st_size for r in summaries.reports]
    assert max(sizes) < 1_000_000 and min(sizes) > 1_000  # a few KB to a few hundred KB, the rank's graph included


def test_across_ranks_the_same(both) -> None:
    traces, summaries, root, _ = both

    def rel(run: str) -> str:
        p = Path(run)
        return str(p.resolve().relative_to(SAMPLES)) if str(p).startswith(str(SAMPLES)) else str(p.relative_to(root))

    assert [(rel(c.run), c.window) for c in traces.collectives] == [(rel(c.run), c.window) for c in summaries.collectives]
    for a, b in zip(traces.collectives, summaries.collectives):
        pd.testing.assert_frame_equal(a.matches, b.matches)
        pd.testing.assert_frame_equal(a.per_rank, b.per_rank)
        assert (a.straggler_rank, a.wait_ns, a.implausible) == (b.straggler_rank, b.wait_ns, b.implausible)
    for a, b in zip(traces.causes, summaries.causes):
        assert (a.straggler, a.cause, a.label, a.text, a.kernels) == (b.straggler, b.cause, b.label, b.text, b.kernels)
        pd.testing.assert_frame_equal(a.waits, b.waits)
        pd.testing.assert_frame_equal(a.exposed, b.exposed)
    stragglers = {rel(c.run): c.straggler for c in traces.causes}
    assert stragglers["causes/ddp-compute"] == 1  # the recorded scenario's late rank, from summaries alone
    for a, b in zip(traces.clocks, summaries.clocks):
        pd.testing.assert_frame_equal(a.ranks, b.ranks)
    # the what-ifs and critical paths, replayed from the summaries' graphs as from the traces
    assert [(rel(w.run), w.window) for w in traces.what_ifs] == [(rel(w.run), w.window) for w in summaries.what_ifs]
    for a, b in zip(traces.what_ifs, summaries.what_ifs):
        pd.testing.assert_frame_equal(a.table, b.table)
        pd.testing.assert_frame_equal(a.critical_path, b.critical_path)
        assert a.finding() == b.finding() and a.path_line() == b.path_line()
    rs_a, rs_b = traces.rank_summary.copy(), summaries.rank_summary.copy()
    rs_a["run"], rs_b["run"] = rs_a["run"].map(rel), rs_b["run"].map(rel)
    pd.testing.assert_frame_equal(rs_a, rs_b)


def test_cli_report_gates_and_diff_from_summaries(both, tmp_path) -> None:
    _, _, root, _ = both
    run = CliRunner()
    a = run.invoke(app, ["overlap-report", str(SAMPLES / "causes/ddp-compute"), "--format", "json", "--max-exposed-comm", "1%"])
    b = run.invoke(app, ["overlap-report", str(root / "causes/ddp-compute"), "--format", "json", "--max-exposed-comm", "1%"])
    assert a.exit_code == b.exit_code == 1  # the gate, met or not, the same on both
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    for x, y in zip(da["traces"], db["traces"]):
        for k in x:
            if k not in ("path", "workload", "variant"):
                assert x[k] == y[k], k
    assert da["collectives"] == [{**c, "run": da["collectives"][i]["run"]} for i, c in enumerate(db["collectives"])]
    d = run.invoke(app, ["diff", str(SAMPLES / "causes/ddp-compute"), str(root / "causes/ddp-compute"), "--format", "json"])
    assert d.exit_code == 0, d.output
    figs = pd.DataFrame(json.loads(d.stdout)["figures"])
    assert len(figs) > 20 and (figs["delta"].fillna(0) == 0).all()


def test_folder_of_traces_and_summaries_counts_each_once(both, tmp_path) -> None:
    _, _, root, _ = both
    mixed = tmp_path / "mixed"
    shutil.copytree(SAMPLES / "causes/ddp-compute", mixed)
    for f in (root / "causes/ddp-compute").iterdir():
        shutil.copy(f, mixed / f.name)
    s = analyze_paths([str(mixed)], jobs=1)
    assert len(s.reports) == 2 and all(r.path.endswith(".summary.json") for r in s.reports) and not s.warnings
    assert s.causes[0].straggler == 1
    only_traces = analyze_paths([str(mixed)], jobs=1, then=lambda t, r: None)
    assert all(r.path.endswith(".json.gz") for r in only_traces.reports)


def test_bad_summaries_one_line_each(both, tmp_path) -> None:
    _, _, root, _ = both
    folder = tmp_path / "job"
    shutil.copytree(root / "training/tb-ddp", folder)
    good = sorted(folder.iterdir())
    assert len(good) == 4
    raw = good[0].read_bytes()
    (folder / "truncated.rank5.summary.json").write_bytes(raw[: len(raw) // 2])
    doc = json.loads(raw)
    (folder / "v2.rank6.summary.json").write_text(json.dumps({**doc, "version": 2}))
    (folder / "other.rank7.summary.json").write_text(json.dumps({**doc, "job": "someone-else", "rank": 7}))
    (folder / "gz.rank8.summary.json.gz").write_bytes(gzip.compress(raw)[:-30])
    res = CliRunner().invoke(app, ["overlap-report", str(folder)])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    for name, why in [("truncated.rank5", "truncated"), ("v2.rank6", "format version 2"), ("other.rank7", "another job"), ("gz.rank8", "truncated")]:
        mine = [ln for ln in lines if name in ln]
        assert len(mine) == 1 and why in mine[0], (name, lines)
    assert "tb-ddp" in res.stdout or "job" in res.stdout  # the good ones are still reported
    s = analyze_paths([str(folder)], jobs=1)
    assert len(s.reports) == 4 and len(s.failures) == 4


def test_every_column_written_is_declared(both) -> None:
    """Every table and column a summary is written with (but the packed graph, checked where it is unpacked) is
    declared in :data:`traceprobe.summary_tables.COLUMNS` with its kind, so the decode checks what the readers take
    it to be: a new column of the report is declared there too."""
    from traceprobe.summary_tables import COLUMNS

    _, summaries, _, _ = both
    kinds = {"int": ("int",), "float": ("int", "float"), "str": ("str", "object", "category")}
    seen = set()
    for r in summaries.reports:
        doc = json.loads(Path(r.path).read_bytes())
        for name, t in doc["tables"].items():
            if name == "graph":
                continue
            for col, dtype, values in zip(t["columns"], t["dtypes"], t["data"]):
                if name == "collectives" and col == "pg_ranks":  # (rows of pg_members: an integer column of its own rule)
                    continue
                assert col in COLUMNS.get(name, {}), f"{name}.{col} ({dtype}) is not declared in summary_tables.COLUMNS"
                assert dtype.lower().startswith(kinds[COLUMNS[name][col][0]]) or (dtype == "object" and not values), (name, col, dtype)
                seen.add((name, col))
    assert len(seen) > 100


def test_json_schema_is_generated_and_holds(both) -> None:
    import jsonschema

    generated = json_schema()
    assert json.loads(SCHEMA.read_text()) == generated, "docs/summary_schema.json is stale: scripts/summary_schema.py writes it"
    _, summaries, _, _ = both
    for r in summaries.reports[:10]:
        jsonschema.validate(json.loads(Path(r.path).read_bytes()), generated)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"format": "traceprobe-summary", "version": 1}, generated)


def test_nan_and_missing_values_survive(both) -> None:
    """A CPU-only sample (NaN fractions, empty device tables), and SYNTHETIC columns (made up): NA integers, NaN, None."""
    r = both[3][str(SAMPLES / "small-ops.cpu-threads.pt.trace.json.gz")]
    back = from_summary(decode(summary_bytes(r), "x.summary.json"), r.path)
    _same(r, back, "cpu-threads")
    assert math.isnan(back.throughput) == math.isnan(r.throughput)
    odd = dataclasses.replace(r, streams=pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": [np.nan, 1.5], "c": ["x", None]}))
    again = from_summary(decode(summary_bytes(odd), "x.summary.json"), r.path)
    pd.testing.assert_frame_equal(odd.streams, again.streams)
