"""What the CLI writes and prints: never over an input, atomically, one literal line per message.

Traces here are SYNTHETIC (tests/synthetic.py) unless named from sample_traces/.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import TraceBuilder
from typer.testing import CliRunner

from traceprobe import cli
from traceprobe.cli import app
from traceprobe.report import markdown

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
HOSTILE = "[/red]x[link=https://example.com]y"
HOSTILE_NAME = "[bold red]x[link=https:example.com]y[link]z"  # a file name holds no "/"
runner = CliRunner()


def _trace(path: Path, kernel: str = "gemm") -> Path:
    """SYNTHETIC: one kernel under a copy on one device."""
    b = TraceBuilder("outputs")
    b.kernel(0, 7, 0, 10_000, name=kernel)
    b.memcpy(0, 20, 2_000, 4_000, direction="DtoH")
    return b.write(path)


def test_markup_in_names_prints_literally(tmp_path):
    folder = tmp_path / HOSTILE_NAME
    folder.mkdir()
    _trace(folder / "t.json", kernel=HOSTILE)
    (folder / f"bad{HOSTILE_NAME}.json").write_text("{not json")
    (tmp_path / "plain").mkdir()
    _trace(tmp_path / "plain" / "u.json")
    res = runner.invoke(app, ["overlap-report", str(folder), str(tmp_path / "plain"), "--jobs", "1"], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output  # a bad file: 2, never 1 (a gate)
    assert HOSTILE_NAME[:30] in res.stdout  # the summary's run column, literally (cut at its width)
    detail = runner.invoke(app, ["overlap-report", str(folder / "t.json"), "--detail"], env={"COLUMNS": "300"})
    assert str(folder / "t.json") in detail.stdout and "\x1b]8;" not in detail.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(str(folder / f"bad{HOSTILE_NAME}.json") + ": ")
    assert "\x1b]8;" not in res.output  # no terminal hyperlink


def test_control_characters_and_newlines_in_names_stay_on_one_line(tmp_path):
    bad = tmp_path / "two\nlines\x1b[31m.json"
    bad.write_text("{not json")
    res = runner.invoke(app, ["overlap-report", str(bad)])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "two\\nlines\\x1b[31m.json" in res.stderr


def test_messages_never_wrap(tmp_path):
    deep = tmp_path / ("a-long-folder-name-" * 8)
    deep.mkdir()
    bad = deep / "bad.json"
    bad.write_text('{"traceEvents": [')
    res = runner.invoke(app, ["overlap-report", str(bad)], env={"COLUMNS": "80"})
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(str(bad) + ": ") and len(line) > 160


def test_output_naming_an_input_is_refused(tmp_path):
    t = _trace(tmp_path / "t.json")
    before = t.read_bytes()
    for args in (["--output", str(t)], ["--output", str(tmp_path / "." / "t.json"), "--format", "json"], ["--plot", str(t)]):
        res = runner.invoke(app, ["overlap-report", str(tmp_path), *args])
        assert res.exit_code == 2 and "refusing to overwrite" in res.stderr and len(res.stderr.splitlines()) == 1
    res = runner.invoke(app, ["plot", str(t), "--output", str(t)])
    assert res.exit_code == 2 and "refusing to overwrite" in res.stderr
    assert t.read_bytes() == before


@pytest.mark.parametrize("option", ["--output", "--plot"])
def test_missing_folder_is_one_line(tmp_path, option):
    t = _trace(tmp_path / "t.json")
    res = runner.invoke(app, ["overlap-report", str(t), option, str(tmp_path / "missing" / "r.out")])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1 and "Traceback" not in res.output
    assert f"no folder {tmp_path / 'missing'}" in res.stderr


def test_full_disk_keeps_the_old_report(tmp_path, monkeypatch):
    t = _trace(tmp_path / "t.json")
    out = tmp_path / "report.json"
    out.write_text('{"old": "report"}')

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    for fmt in ("json", "table"):
        res = runner.invoke(app, ["overlap-report", str(t), "--format", fmt, "--output", str(out)])
        assert res.exit_code == 2, res.output
        assert res.stderr == f"cannot write {out}: No space left on device\n"
        assert json.loads(out.read_text()) == {"old": "report"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "t.json"]  # no temporary file left


def test_reports_are_written_whole(tmp_path):
    t = _trace(tmp_path / "t.json")
    for fmt in ("json", "csv", "markdown", "table"):
        out = tmp_path / f"r.{fmt}"
        res = runner.invoke(app, ["overlap-report", str(t), "--format", fmt, "--output", str(out)])
        assert res.exit_code == 0 and res.stdout == "" and out.stat().st_size > 100
    assert json.loads((tmp_path / "r.json").read_text())["traces"][0]["path"] == str(t)


def test_unexpected_error_is_one_line_exit_2(monkeypatch, capsys):
    def broken(*a, **k):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(cli, "app", broken)
    with pytest.raises(SystemExit) as e:
        cli.main()
    assert e.value.code == 2
    assert capsys.readouterr().err == "error: RuntimeError: something\\nbroke\n"


def test_files_traceprobe_wrote_are_skipped_in_folder_scans(tmp_path):
    _trace(tmp_path / "t.json")
    res = runner.invoke(app, ["overlap-report", str(tmp_path), "--format", "json", "--output", str(tmp_path / "report.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["export", str(tmp_path), "--json", "--perfetto", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert {p.name for p in tmp_path.iterdir()} == {"t.json", "report.json", "t.perfetto.json.gz", "t.pftrace"}
    res = runner.invoke(app, ["overlap-report", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0, res.output  # the report and the exports are not read as traces
    assert [Path(t["path"]).name for t in json.loads(res.stdout)["traces"]] == ["t.json"]


def test_read_only_output_is_not_replaced(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("keep me")
    out.chmod(0o444)
    res = CliRunner().invoke(app, ["overlap-report", str(Path(__file__).resolve().parent.parent / "sample_traces" / "cpu-gpu.concurrent.pt.trace.json.gz"), "--format", "json", "-o", str(out)])
    assert res.exit_code == 2 and "read-only" in res.stderr
    assert out.read_text() == "keep me"
    long = tmp_path / ("r" * 245 + ".json")  # a valid name, whose temporary name is longer than 255
    res = CliRunner().invoke(app, ["overlap-report", str(Path(__file__).resolve().parent.parent / "sample_traces" / "cpu-gpu.concurrent.pt.trace.json.gz"), "--format", "json", "-o", str(long)])
    assert res.exit_code == 0, res.output
    assert long.read_text().startswith("{")


def test_closed_stdout_exits_141_not_a_gate_code(monkeypatch):
    """``overlap-report | head -1``: the reader went away; the command ends with 128 + SIGPIPE, quietly."""
    import typer

    from traceprobe.console import PIPE_CLOSED, emit

    r, w = os.pipe()
    os.close(r)
    out = os.fdopen(w, "w")
    monkeypatch.setattr("sys.stdout", out)
    with pytest.raises(typer.Exit) as e:
        emit("x" * 1_000_000, None)
    assert e.value.exit_code == PIPE_CLOSED == 141
    out.close()


@pytest.mark.parametrize("df", [
    pd.DataFrame({"busy_ns": [999.6, np.nan, 2.5e9], "share": [0.5, np.nan, 1.0], "name": ["a\nb", None, "c"], "n": [1, 2, 3]}),
    pd.DataFrame({"n": [1, 2], "v": [1.5, 1048576.0], "big": [1048576, 3]}),  # numbers only: every number a float, as a frame has it
    pd.DataFrame({"n": [1, 2], "flag": [True, False], "o": [True, 3]}),
    pd.DataFrame({"flag": [True, False]}),
])
def test_markdown_table_is_the_frames_table(df):
    cols = markdown.human(df)
    assert markdown.table(cols) == pd.DataFrame(cols).to_markdown(index=False)


def test_markdown_rounds_float_ns_to_the_ns_before_the_unit():
    cols = markdown.human(pd.DataFrame({"busy_ns": [999.6, np.nan], "start_ns": [100.5, 99.4]}), origin_ns=100)
    assert cols == {"busy": ["1.0 µs", "-"], "start": ["+0 ns", "-1 ns"]}  # (999.6 unrounded reads "1,000 ns")
