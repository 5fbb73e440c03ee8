"""Which windows of a job's summaries are replayed (:mod:`traceprobe.analysis.job.window_replay`): the memory budget,
its default from the memory available, ``job --replay-memory``. The summaries are a SYNTHETIC job
(scripts/synth_job.py: made up, not recorded)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe.analysis.job import window_replay as wr
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
    assert wr.max_replay_events(wr.REPLAY_BYTES) == (2 * 10**9 - 200_000_000) // 87 == 20_689_655
    assert 1024 * 20_000 <= wr.max_replay_events(wr.REPLAY_BYTES) < 2048 * 20_000
    assert wr.max_replay_events(wr.BASE_BYTES) == 0 == wr.max_replay_events(0)


def test_the_default_budget_is_half_the_memory_available_and_at_least_2_gb(monkeypatch):
    import traceprobe.reading.files as files

    assert wr.replay_budget(123) == 123  # (given: as it is)
    monkeypatch.setattr(files, "available_memory", lambda: 64 * 10**9)
    assert wr.replay_budget() == 32 * 10**9
    monkeypatch.setattr(files, "available_memory", lambda: 10**9)
    assert wr.replay_budget() == wr.REPLAY_BYTES


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
    assert "not replayed" in res.stdout and "--replay-memory sets it" in res.stdout
    res = CliRunner().invoke(app, ["job", str(summaries)])
    assert res.exit_code == 0 and "not replayed" not in res.stdout
