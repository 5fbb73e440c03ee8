"""The real CLI through typer's CliRunner, on the sample traces and on bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from typer.testing import CliRunner

from traceprobe.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
runner = CliRunner()


def test_json_report_on_samples():
    res = runner.invoke(app, ["overlap-report", str(SAMPLES), "--format", "json", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == 2 and not doc["failures"]
    by = {(t["workload"], t["variant"]): t for t in doc["traces"]}
    ov = by[("compute-copy", "overlapped")]
    dtoh = [r for r in ov["copy_overlap"] if r["direction"] == "DtoH"][0]
    assert dtoh["fraction"] >= 0.9 and dtoh["overlapped_ns"] <= dtoh["copy_ns"]
    for key in ("path", "window_ns", "streams", "copy_overlap", "devices", "cpu_gpu", "verdicts"):
        assert key in ov
    assert set(ov["streams"][0]) >= {"device", "stream", "busy_ns", "utilization", "events"}
    assert by[("multi-gpu", "concurrent")]["device_concurrency"]["concurrency"] >= 0.9


def test_table_markdown_csv():
    f = str(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    res = runner.invoke(app, ["overlap-report", f])
    assert res.exit_code == 0 and "parallelism confirmed" in res.stdout
    res = runner.invoke(app, ["overlap-report", f, "--format", "markdown"])
    assert res.exit_code == 0 and res.stdout.startswith("## compute-copy.overlapped")
    res = runner.invoke(app, ["overlap-report", f, "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.splitlines()[0].startswith("path,workload,variant,rank,section")


def test_gates_exit_1():
    nb = str(SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz")
    assert runner.invoke(app, ["overlap-report", nb, "--min-copy-overlap", "0.5"]).exit_code == 1
    ov = str(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    assert runner.invoke(app, ["overlap-report", ov, "--min-copy-overlap", "0.5"]).exit_code == 0
    seq = str(SAMPLES / "multi-gpu.sequential.pt.trace.json.gz")
    assert runner.invoke(app, ["overlap-report", seq, "--min-device-concurrency", "0.5"]).exit_code == 1


def test_bad_file_one_line_exit_2_others_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    empty = tmp_path / "empty.json.gz"
    empty.write_bytes(gzip.compress(b""))
    good = str(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    res = runner.invoke(app, ["overlap-report", str(bad), str(empty), good, "--format", "json", "--jobs", "1"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert len(doc["traces"]) == 1
    errors = {Path(f["path"]).name: f["error"] for f in doc["failures"]}
    assert "truncated" in errors["bad.json"] and errors["empty.json.gz"] == "empty file"
    assert "Traceback" not in res.output


def test_record_cpu_then_report(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["record", "compute-copy", "--out", str(out), "--device", "cpu", "--size", "32", "--repeat", "2"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["overlap-report", str(out), "--format", "json"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert {t["variant"] for t in doc["traces"]} == {"sequential", "nonblocking", "overlapped"}


def test_record_list():
    res = runner.invoke(app, ["record", "--list"])
    assert res.exit_code == 0 and "compute-copy" in res.stdout


def test_record_perfetto_writes_pftrace(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["record", "compute-copy", "--out", str(out), "--device", "cpu", "--size", "32", "--repeat", "2", "--perfetto"])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in out.iterdir())
    assert [n for n in names if n.endswith(".pftrace")] == [
        "compute-copy.nonblocking.pftrace", "compute-copy.overlapped.pftrace", "compute-copy.sequential.pftrace"]
    # pftrace files are not taken for Chrome traces by overlap-report
    res = runner.invoke(app, ["overlap-report", str(out), "--format", "json"])
    assert res.exit_code == 0 and len(json.loads(res.stdout)["traces"]) == 3
