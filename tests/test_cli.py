"""The real CLI through typer's CliRunner, on the sample traces and on bad input."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from traceprobe.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
runner = CliRunner()


def test_json_report_on_samples():
    """``overlap-report`` of the sample folder's top as JSON: valid against the schema, the figures in place."""
    res = runner.invoke(app, ["overlap-report", *sorted(map(str, SAMPLES.glob("*.pt.trace.json.gz"))), "--format", "json", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    _valid_document(res.stdout)


@pytest.mark.slow
@pytest.mark.xdist_group("every_sample_summary")  # (one worker summarises every sample for the three)
def test_json_report_on_every_sample(every_sample_summary):
    """The JSON document of every sample (each trace's report summarised as ``analyze_paths`` summarises them,
    conftest's ``every_sample_summary``; the command's own route from the summary: ``to_json``), valid against the schema."""
    from traceprobe.report.json_document import to_json

    _valid_document(to_json(every_sample_summary.summary))


def _valid_document(text: str) -> None:
    doc = json.loads(text)
    assert doc["schema"] == 5 and not doc["failures"]
    schema = json.loads(runner.invoke(app, ["schema"]).stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)  # the report of every sample trace
    bad = json.loads(text)
    bad["traces"][0]["streams"][0]["busy_ns"] = 1.5
    with pytest.raises(jsonschema.ValidationError):  # ns are integers
        jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)
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
    assert res.exit_code == 0 and "compute-copy.overlapped" in res.stdout and "98% yes" in res.stdout
    res = runner.invoke(app, ["overlap-report", f, "--detail"])
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


@pytest.mark.slow  # record end to end
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


def test_analysis_commands_ask_openblas_for_one_thread_and_record_keeps_the_users(monkeypatch):
    from traceprobe.cli import ONE_BLAS_THREAD

    var = ONE_BLAS_THREAD[0]
    monkeypatch.setenv(var, "x")  # (recorded, so that the test's changes are undone)
    monkeypatch.delenv(var)
    assert runner.invoke(app, ["record", "--list"]).exit_code == 0
    assert var not in os.environ  # record runs the user's code: its BLAS as the user set it
    f = str(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    assert runner.invoke(app, ["overlap-report", f, "--format", "json"]).exit_code == 0
    assert os.environ[var] == "1"
    monkeypatch.setenv(var, "3")  # a user's setting is kept
    assert runner.invoke(app, ["overlap-report", f, "--format", "json"]).exit_code == 0
    assert os.environ[var] == "3"


@pytest.mark.slow  # record end to end
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


def test_version_and_short_help():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.startswith("traceprobe ")
    for args in (["-h"], ["overlap-report", "-h"], ["export", "-h"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "Usage:" in res.stdout


def test_help_at_80_columns_shows_whole_option_names():
    res = runner.invoke(app, ["overlap-report", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0
    for name in ("--min-device-concurrency", "--min-copy-overlap", "--trace-processor", "--detail", "--format"):
        assert name in res.stdout
    assert "\u2026" not in res.stdout and max(map(len, res.stdout.splitlines())) <= 80


@pytest.mark.parametrize("value,code", [("0.5", 1), ("50%", 1), ("0", 0), ("0%", 0), ("90", 2), ("-0.1", 2), ("abc", 2), ("101%", 2)])
def test_fraction_options(value, code):
    nb = str(SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz")
    res = runner.invoke(app, ["overlap-report", nb, "--min-copy-overlap", value, "-f", "json"])
    assert res.exit_code == code, res.output
    if code == 2:
        assert "not a fraction" in res.output


def test_csv_ns_columns_are_integers():
    f = str(SAMPLES / "data-parallel.ddp.rank0.pt.trace.json.gz")
    res = runner.invoke(app, ["overlap-report", f, "--format", "csv"])
    assert res.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    ns = [v for r in rows for c, v in r.items() if c.endswith("_ns") and v]
    assert len(ns) > 100 and all(v.lstrip("-").isdigit() for v in ns)
