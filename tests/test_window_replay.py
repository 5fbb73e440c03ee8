"""Which windows are replayed (:mod:`traceprobe.analysis.causal.replay_memory`): the memory budget, its default from the
memory available, ``job --replay-memory`` on summaries, and a window of traces over it in ``overlap-report``. The summaries are a SYNTHETIC job
(scripts/synth_job.py: made up, not recorded)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe.analysis.causal import replay_memory as wr
from traceprobe.analysis.job.job import job_report_from_summaries
from traceprobe.cli import app

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402  # pyright: ignore[reportMissingImports]
import synth_trace as st  # noqa: E402  # pyright: ignore[reportMissingImports]


@pytest.fixture(scope="module")
def summaries(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("job")
    synth_job.write_summaries(st.Config(events=2000, seed=5), 2, folder)
    return folder


def test_the_events_a_budget_replays():
    """What the budget holds beyond the report's own memory, at the measured bytes an event: 2 GB replays the
    1,024 ranks of 20,000 events of the benchmark's job, not 2,048; a budget below the report's own memory none."""
    assert wr.max_replay_events(wr.REPLAY_BYTES) == (2 * 10**9 - 200_000_000) // 62 == 29_032_258
    assert 1024 * 20_000 <= wr.max_replay_events(wr.REPLAY_BYTES) < 2048 * 20_000
    assert wr.max_replay_events(wr.BASE_BYTES) == 0 == wr.max_replay_events(0)


def test_the_default_budget_is_half_the_memory_available_and_at_least_2_gb(monkeypatch):
    import traceprobe.reading.files as files

    assert wr.replay_budget(123) == 123  # (given: as it is)
    monkeypatch.setattr(files, "available_memory", lambda: 64 * 10**9)
    assert wr.replay_budget() == 32 * 10**9
    monkeypatch.setattr(files, "available_memory", lambda: 10**9)
    assert wr.replay_budget() == wr.REPLAY_BYTES


@pytest.fixture(autouse=True)
def _no_replay_memory_given(monkeypatch):
    """``--replay-memory`` sets an environment variable for the analysis: each test starts without it, and what a
    command of it set is gone after it."""
    monkeypatch.setenv(wr.REPLAY_MEMORY_ENV, "")  # (recorded, so that it is gone again after: delenv alone records nothing
    monkeypatch.delenv(wr.REPLAY_MEMORY_ENV)  # where the variable is unset)


def test_a_window_over_the_budget_is_said_and_one_within_it_replayed(summaries: Path):
    """The same two ranks: replayed within the default budget (a what-if, no note); with a budget too small for
    them, no what-if and one line that says why, how much would do and what sets it."""
    files = sorted(summaries.glob("*.summary.json"))
    job, failures = job_report_from_summaries(files)
    assert not failures and len(job.what_ifs) == 1 and not job.notes
    small, failures = job_report_from_summaries(files, wr.BASE_BYTES)
    assert not failures and not small.what_ifs and len(small.notes) == 1
    (note,) = small.notes.values()
    assert note.startswith("not replayed: its 2 ranks' traces hold ") and "within 0.2 GB of memory" in note
    assert "--replay-memory sets it" in note and "\n" not in note
    assert small.figures.equals(job.figures)  # (the figures of every rank, replayed or not)
    res = CliRunner().invoke(app, ["job", str(summaries), "--replay-memory", "2e8"])
    assert res.exit_code == 0, res.output
    assert "not replayed" in res.stdout and "--replay-memory sets it" in " ".join(res.stdout.split())  # (wrapped)
    os.environ.pop(wr.REPLAY_MEMORY_ENV)  # (set by the command above)
    res = CliRunner().invoke(app, ["job", str(summaries)])
    assert res.exit_code == 0 and "not replayed" not in res.stdout


def test_a_window_of_traces_over_the_budget_is_one_warning_and_the_rest_is_reported(monkeypatch):
    """A recorded 2-rank DDP window (sample_traces/causes/ddp-compute) with a budget below the report's own memory: no
    what-if for it and one warning naming it (``overlap-report``, streamed part by part or not, and ``job`` from the
    traces), every trace still reported; within the default budget it is replayed."""
    import traceprobe.reading.files as files
    from traceprobe.collect import analyze_paths

    folder = ROOT / "sample_traces" / "causes" / "ddp-compute"
    whole = analyze_paths([folder], jobs=1)
    assert len([w for w in whole.what_ifs if not w.path]) == 1 and not any("not replayed" in w for w in whole.warnings)
    monkeypatch.setattr(wr, "REPLAY_BYTES", wr.BASE_BYTES)
    monkeypatch.setattr(files, "available_memory", lambda: 2 * wr.BASE_BYTES)  # (the traces are still read: 200 MB)
    parts = []
    for summary in (analyze_paths([folder], jobs=1), analyze_paths([folder], jobs=1, on_part=parts.append)):
        said = [w for w in summary.warnings if ": not replayed: " in w]
        assert len(said) == 1 and said[0].startswith(f"{whole.runs[0].name} ") and "--replay-memory sets it" in said[0]
        assert not [w for w in summary.what_ifs if not w.path] and len(summary.reports) == len(whole.reports)
    assert parts
    res = CliRunner().invoke(app, ["job", str(folder), "-j", "1"])
    assert res.exit_code == 0 and "not replayed" in res.stderr


def test_replay_memory_given_to_overlap_report_and_through_the_environment(monkeypatch):
    """``overlap-report --replay-memory`` below what a recorded 2-rank window needs: its line among the warnings
    (``--detail``), no what-if; ``TRACEPROBE_REPLAY_MEMORY`` set by hand does the same, and one that is not a number of
    bytes is a clear error."""
    import json

    folder = ROOT / "sample_traces" / "causes" / "ddp-compute"
    res = CliRunner().invoke(app, ["overlap-report", str(folder), "-j", "1", "--detail", "--replay-memory", "2e8"])
    assert res.exit_code == 0, res.output
    assert "not replayed" in res.stdout and os.environ[wr.REPLAY_MEMORY_ENV] == "200000000"
    doc = json.loads(CliRunner().invoke(app, ["overlap-report", str(folder), "-j", "1", "--format", "json"]).stdout)
    assert doc["what_if"] == [] or all(w.get("path") for w in doc["what_if"])
    assert wr.replay_budget() == 200_000_000 and wr.replay_budget(5) == 5
    monkeypatch.setenv(wr.REPLAY_MEMORY_ENV, "16GB")
    with pytest.raises(ValueError, match="TRACEPROBE_REPLAY_MEMORY='16GB' is not a number of bytes"):
        wr.replay_budget()


def test_job_reads_the_graphs_in_worker_processes_as_in_this_one(summaries: Path):
    """``job --jobs 2`` on summaries reads each replayed window's graphs in worker processes: the same report, byte for
    byte, as one process; a worker's death on a file is that file's error (the window not replayed, the file named)."""
    from traceprobe.analysis.job.window_replay import window_graphs
    from traceprobe.cli.job import _summary_reader
    from traceprobe.errors import TraceFormatError

    one = CliRunner().invoke(app, ["job", str(summaries), "-f", "json", "-j", "1"])
    two = CliRunner().invoke(app, ["job", str(summaries), "-f", "json", "-j", "2"])
    import json

    assert one.exit_code == 0 == two.exit_code and json.loads(one.stdout)["what_if"]  # (the window replayed)
    assert one.stdout == two.stdout
    files = sorted(map(str, summaries.glob("*.summary.json")))
    reader = _summary_reader(files, 2)
    died = reader.keywords["on_crash"](files[1], "worker process died twice (killed by SIGKILL: out of memory?)")
    assert isinstance(died, TraceFormatError) and died.path == files[1] and "SIGKILL" in died.reason
    graphs, note, errors = window_graphs(files, 4000, wr.REPLAY_BYTES, lambda fn, paths: [fn(paths[0]), died])
    assert graphs == [] and note == "" and errors == [died]
    graphs, _, errors = window_graphs(files, 4000, wr.REPLAY_BYTES, reader)
    assert not errors and len(graphs) == 2


def test_a_bad_graph_read_in_a_worker_is_one_line_as_in_one_process(tmp_path: Path):
    """One of eight SYNTHETIC summaries with its graph broken, ``job -j 2`` in a fresh process: the same output and exit
    as ``-j 1``, the file named in one line, no worker's traceback (the worker hands the error back; raised, it stopped
    the other worker mid-file, which printed its own)."""
    import json
    import subprocess

    synth_job.write_summaries(st.Config(events=2000, seed=5), 8, tmp_path)
    f = tmp_path / "rank1.summary.json"  # (read early: the other worker is still on its files)
    doc = json.loads(f.read_text())
    blob = doc["tables"]["graph"]["data"][0][0]
    doc["tables"]["graph"]["data"][0][0] = blob[: len(blob) // 2] + "AAAA" + blob[len(blob) // 2 + 4 :]
    f.write_text(json.dumps(doc))
    runs = [subprocess.run([sys.executable, "-m", "traceprobe", "job", str(tmp_path), "-j", j], capture_output=True, text=True)
            for j in ("1", "2")]
    assert [r.returncode for r in runs] == [2, 2] and runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr
    (line,) = runs[1].stderr.splitlines()
    assert line.startswith(f"{f}: not replayed: ") and "Traceback" not in runs[1].stderr
    from traceprobe.analysis.job.window_replay import graph_or_error
    from traceprobe.errors import TraceFormatError

    got = graph_or_error(str(f))  # (what a worker runs: the error handed back, never raised)
    assert isinstance(got, TraceFormatError) and got.path == str(f)


def test_job_reads_the_summaries_in_worker_processes_as_in_this_one(tmp_path: Path):
    """The summaries themselves (:func:`traceprobe.analysis.job.job.rank_item`) are read in the worker processes too:
    eight SYNTHETIC summaries and one cut short, ``job -j 2`` in a fresh process gives the output, the one line naming
    the bad file and the exit of ``-j 1``; a worker's death on a summary is that summary's failure, the rest reported."""
    import subprocess

    from traceprobe.cli.job import _summary_reader

    synth_job.write_summaries(st.Config(events=2000, seed=5), 8, tmp_path)
    bad = tmp_path / "rank3.summary.json"
    bad.write_bytes(bad.read_bytes()[:5000])
    runs = [subprocess.run([sys.executable, "-m", "traceprobe", "job", str(tmp_path), "-f", "json", "-j", j], capture_output=True, text=True)
            for j in ("1", "2")]
    assert [r.returncode for r in runs] == [2, 2] and runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr
    (line,) = runs[1].stderr.splitlines()
    assert line.startswith(f"{bad}: traceprobe summary truncated")
    import json

    assert json.loads(runs[1].stdout)["what_if"] and 3 not in {r["rank"] for r in json.loads(runs[1].stdout)["outliers"]}
    files = sorted(map(str, tmp_path.glob("*.summary.json")))
    files.remove(str(bad))
    died = _summary_reader(files, 2).keywords["on_crash"](files[1], "worker process died twice (killed by SIGKILL: out of memory?)")
    report, failures = job_report_from_summaries(files, mapper=lambda fn, paths, **_: [died if p == files[1] else fn(p) for p in paths])
    assert [(f.path, f.error) for f in failures] == [(files[1], died.reason)]
    assert report.figures["ranks"].max() == 6  # (the other six ranks)


def test_a_summary_read_in_a_worker_shares_its_strings_with_the_other_ranks(summaries: Path):
    """Each rank's collectives name the same process groups and members: read in a worker and unpickled here, every
    rank held its own copy of each (330 MB of member lists at 8,192 ranks) until ``interned`` made them one string."""
    import pickle

    from traceprobe.analysis.job.rank_summary import interned, rank_item

    files = sorted(map(str, summaries.glob("*.summary.json")))
    got = [pickle.loads(pickle.dumps(rank_item(f))) for f in files]  # (as a worker's value arrives)
    a, b = (g[3][4]["pg_ranks"] for g in got)
    assert a[0] == b[0] and a[0] is not b[0]
    for i, g in enumerate(got):
        interned(i, g)
    a, b = (g[3][4]["pg_ranks"] for g in got)
    assert a[0] is b[0] and all(x is a[0] for x in a if x == a[0])
