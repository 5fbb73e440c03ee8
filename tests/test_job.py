"""The whole-job report (traceprobe.analysis.job): distributions, outliers, stragglers, causes and clocks, from full
reports and from summary files alone; SYNTHETIC jobs of 8 and 1,024 ranks (scripts/synth_job.py --summaries:
made up, not recorded) and the recorded ddp-compute pair."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from traceprobe.analysis.job import job_report, job_report_from_summaries, job_text
from traceprobe.analysis.summaries import write_summary
from traceprobe.cli import app
from traceprobe.collect import analyze_paths

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402
import synth_trace as st  # noqa: E402


@pytest.fixture(scope="module")
def job8(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("job8")
    synth_job.write_summaries(st.Config(events=4000, seed=3), 8, folder, skewed=2, skew_ns=2_000_000)
    return folder


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.figures, b.figures)
    pd.testing.assert_frame_equal(a.outliers, b.outliers)
    pd.testing.assert_frame_equal(a.stragglers, b.stragglers)
    assert [(c.straggler, c.cause, c.label, c.exposed_transfer_ns) for c in a.causes] == [(c.straggler, c.cause, c.label, c.exposed_transfer_ns) for c in b.causes]
    for x, y in zip(a.causes, b.causes):  # every table of the causes, to the ns
        for name in ("waits", "exposed", "blame"):
            pd.testing.assert_frame_equal(getattr(x, name), getattr(y, name))
    for x, y in zip(a.clocks, b.clocks):
        pd.testing.assert_frame_equal(x.ranks, y.ranks)


def test_both_ways_in_agree(job8: Path) -> None:
    full = job_report(analyze_paths([str(job8)], jobs=1))
    fast, failures = job_report_from_summaries(sorted(job8.iterdir()))
    assert not failures
    _same(full, fast)
    figs = full.figures.set_index("figure")
    assert (figs["ranks"] == 8).all() and (figs["min"] <= figs["median"]).all() and (figs["p95"] <= figs["max"]).all()


def test_stragglers_are_the_late_ranks(job8: Path) -> None:
    summary = analyze_paths([str(job8)], jobs=1)
    job = job_report(summary)
    s = job.stragglers[job.stragglers["pg"] == "0"]
    assert set(s["rank"]) <= {6, 7} and s["last"].sum() > 0  # only the skewed ranks ever arrive last
    wc = summary.collectives[0]
    last = wc.matches[(wc.matches["pg"] == "0") & (wc.matches["skew_ns"] > 0)]
    waits = wc.per_rank.groupby(["pg", "seq"])["wait_ns"].sum()
    for rank, caused in zip(s["rank"], s["caused_wait_ns"]):
        mine = last[last["last_rank"] == rank]
        assert caused == int(waits.loc[list(zip(mine["pg"], mine["seq"]))].sum())
    assert len(job.causes) == 1 and job.causes[0].straggler in (None, 6, 7)  # (synthetic ranks: their exposed time is their template's)
    text = job_text(job)
    assert "arrived last, process group 0 (default_pg): rank" in text and "clocks agree" in text


def test_outlier_rank_named(job8: Path, tmp_path: Path) -> None:
    for p in job8.iterdir():
        doc = json.loads(p.read_bytes())
        if doc["rank"] == 3:
            doc["headline"]["mean_step_ns"] *= 1.5
        (tmp_path / p.name).write_text(json.dumps(doc))
    job, _ = job_report_from_summaries(sorted(tmp_path.iterdir()))
    o = job.outliers[job.outliers["figure"] == "mean_step_ns"]
    assert list(o["rank"]) == [3] and "(+50%)" in o["why"].iloc[0]


def test_recorded_pair_from_summaries(tmp_path: Path) -> None:
    traces = analyze_paths([str(ROOT / "sample_traces/causes/ddp-compute")], jobs=1)
    for r in traces.reports:
        write_summary(r, tmp_path / (Path(r.path).name.split(".")[0] + f".{r.rank}.summary.json"), job="j")
    fast, failures = job_report_from_summaries(sorted(tmp_path.iterdir()))
    assert not failures
    s = fast.stragglers
    assert list(s["rank"]) == [1] and int(s["last"].iloc[0]) == int(s["collectives"].iloc[0]) == 24
    assert fast.causes[0].straggler == 1 and fast.causes[0].cause == "compute"


def test_bad_summaries_named(job8: Path, tmp_path: Path) -> None:
    for p in job8.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    raw = (job8 / "rank0.summary.json").read_bytes()
    (tmp_path / "rank0.summary.json").write_bytes(raw[:1000])
    doc = json.loads(raw)
    (tmp_path / "rank1.summary.json").write_text(json.dumps({**doc, "rank": 1, "job": "other"}))
    res = CliRunner().invoke(app, ["job", str(tmp_path)])
    assert res.exit_code == 2
    err = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert any("rank0.summary.json" in ln and "truncated" in ln for ln in err)
    assert any("rank1.summary.json" in ln and "another job" in ln for ln in err)
    assert "6 ranks" in res.stdout


def test_thousand_ranks_from_summaries(tmp_path: Path) -> None:
    """1,024 SYNTHETIC ranks, two of them late: the whole-job report in seconds, the late ranks named."""
    synth_job.write_summaries(st.Config(events=3000, seed=5), 1024, tmp_path, skewed=2, skew_ns=3_000_000)
    t = time.perf_counter()
    job, failures = job_report_from_summaries(sorted(tmp_path.iterdir()))
    took = time.perf_counter() - t
    assert took < 60 and not failures  # (about 5 s on 2 busy CPUs)
    assert (job.figures["ranks"] == 1024).all() and len(job.causes) == 1  # the causes across all 1,024 ranks
    s = job.stragglers[job.stragglers["pg"] == "0"]
    assert set(s["rank"]) <= {1022, 1023} and len(s)
    assert job.clocks[0].supported and not job.clocks[0].differ
    assert np.isfinite(job.figures["p95"]).any()
