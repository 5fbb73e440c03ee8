"""What a person reads first: the Python API's text, ``job``'s labels and units, the one action under each finding
(real sample traces, two or three at a time)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import traceprobe
from traceprobe.cli import app
from traceprobe.report.actions import DO_CAUSE, DO_KIND, fit, per_step

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def test_print_report_prints_the_commands_text():
    """``print(report)`` prints what ``overlap-report`` prints for the trace, not the dataclass; ``summary()`` returns it."""
    r = traceprobe.overlap_report(traceprobe.load_trace(SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz"))
    text = str(r)
    assert text == r.summary() and text.startswith("compute-copy.nonblocking: busy 100%, copy/compute 0% no\n")
    assert "\n  exposed DtoH copy -58.0 ms in the trace\n" in text and "\n  do: issue the copies on a side stream" in text
    assert "OverlapReport(" not in text and "nan" not in text and len(text) < 2000
    assert max(len(x) for x in r.summary(width=80).splitlines()) <= 80


def test_job_speaks_in_names_and_units():
    """``job`` on the recorded DDP pair: figures by name with their unit (per step first, window totals labelled), no
    raw key, the straggler in one sentence and its action."""
    res = CliRunner().invoke(app, ["job", str(SAMPLES / "causes" / "ddp-compute"), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "_ns" not in out and "nan" not in out and "Fix rank" not in out
    assert re.search(r"\n  step time +56\.6 ms/step", out)
    assert re.search(r"\n  time in collectives in the window\s+[\d.]+ ms", out)  # (its values under it at 80 columns)
    lines = out.splitlines()
    first_total = next(i for i, x in enumerate(lines) if "in the window" in x or x.startswith("  trace window"))
    assert all("ms/step" not in x for x in lines[first_total:]) or "straggler" in out  # per step first, totals after
    assert ("straggler: rank 1 arrived last at its collectives; the others waited up to 15.0 ms/step; removing its extra device "
            "work gives back 19.8 ms/step (the job replayed)") in " ".join(out.split())  # (wrapped under its label)
    assert "\n  do: balance the work across ranks (data, experts or stages) (rank 1)\n" in out


def test_actions_are_short_and_cut_after_a_word():
    """Every action fits an 80-column ``do`` line whole; a narrower one is cut after a whole word, with an ellipsis."""
    for do in [*DO_CAUSE.values(), *DO_KIND.values()]:
        assert do and len(do) <= 80 - len("    do: "), do
    assert fit("drop syncs from the loop (.item(), .cpu(), print)", 20) == "drop syncs from the…"
    assert fit("short", 20) == "short" and fit("short", None) == "short"
    assert per_step(20.9e6, 41.7e6, 2) == "20.9 ms/step (41.7 ms in 2 steps)"
    assert per_step(0, 58.0e6, 0) == "58.0 ms in the trace"


def test_top_level_help_gives_each_commands_first_sentence_whole():
    """``traceprobe -h`` at 80 columns: each command's first sentence, wrapped under its name, never cut with ``...``."""
    from traceprobe.cli.help import first_sentence

    res = CliRunner().invoke(app, ["-h"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    commands = res.stdout[res.stdout.index("Commands:"):]
    assert "..." not in commands and "…" not in commands
    assert max(len(x) for x in commands.splitlines()) <= 80
    flat = " ".join(commands.split()).replace("- ", "-")  # (click may break a hyphenated word at its hyphen)
    group = typer.main.get_command(app)
    assert len(group.commands) >= 8  # pyright: ignore[reportAttributeAccessIssue]
    for name, cmd in group.commands.items():  # pyright: ignore[reportAttributeAccessIssue]
        sentence = first_sentence(cmd.help or "")
        assert len(sentence) > 20 and f"{name} {sentence}" in flat, name


def test_detail_help_says_which_tables_it_prints():
    res = CliRunner().invoke(app, ["overlap-report", "-h"], env={"COLUMNS": "100"})
    text = " ".join(res.stdout.split())
    assert "Kernels, queue time, time breakdown, per-step tables, host threads and idle gaps: --format markdown" in text


def test_recording_text_speaks_of_the_experiments_and_the_device_they_ran_on():
    """Workload descriptions name no course material; on the CPU a variant's description names the CPU, not GPU 0;
    the missing-torch message gives the install command for a CPU-only machine and for CUDA."""
    from traceprobe.cli.record import TORCH_MISSING
    from traceprobe.recording.workloads import WORKLOADS
    from traceprobe.recording.workloads.base import Context

    for w in WORKLOADS.values():
        assert not re.search(r"seed|lecture|course|exercise", w.description, re.I), w.description
    cpu, gpu = Context(device="cpu"), Context(device="cuda", gpus=2)
    text = "10 products of 4000x4000 on GPU 0, synchronize, then on GPU 1: expect no cross-device concurrency"
    assert gpu.describe(text) == text
    assert cpu.describe(text) == ("10 products of 4000x4000 on the CPU, synchronize, then on the CPU "
                                  "(ran on the CPU: no device overlap to expect)")
    assert "GPU" not in cpu.describe(text) and cpu.describe(text).endswith("(ran on the CPU: no device overlap to expect)")
    assert "--index-url https://download.pytorch.org/whl/cpu" in TORCH_MISSING and "'traceprobe[record]'" in TORCH_MISSING


def test_plot_draws_a_ranks_waits_and_the_top_finding():
    """``plot --compare`` of the recorded DDP pair where rank 1 ran extra compute: rank 0 gets a band of its waits for
    the last rank at collectives (each from its kernel's start for its wait), rank 1 an empty one; both the window's
    top finding and action under their title."""
    from traceprobe.analysis.device.picture import shared_clock_groups
    from traceprobe.collect import analyze_paths, timeline_lanes
    from traceprobe.report import plot as pl

    drawn: dict = {}
    summary = analyze_paths([SAMPLES / "causes" / "ddp-compute"], jobs=1, then=timeline_lanes,
                            on_then=lambda r, lanes: drawn.__setitem__(r.path, lanes))
    (group,) = shared_clock_groups(summary, drawn)
    items = pl.with_findings([pl.item_of(r, lanes) for r, lanes in group], summary)
    by_rank = {it.report.rank: it for it in items}
    (c,) = summary.collectives
    waited = c.per_rank.groupby("rank")["wait_ns"].sum()
    w0, w1 = by_rank[0].waits, by_rank[1].waits
    assert w0 is not None and w1 is not None and len(w0) > 10 and len(w1) == 0
    assert int((w0["end_ns"] - w0["start_ns"]).sum()) == int(waited[0]) > 100e6
    assert re.match(r"top finding: rank 1 extra device work -[\d.]+ ms/step \(-[\d.]+ ms in 3 steps\)", by_rank[0].finding)
    assert "do: balance the work across ranks" in by_rank[0].finding and "waited 115.0 ms" in by_rank[0].finding
    fig = pl.compare_figure([items])
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert labels.count("waiting") == 2
    # the window's critical path: a band on each rank it runs through, its segments those of the path on that rank
    (what,) = [w for w in summary.what_ifs if not w.path]
    path = what.critical_path
    assert set(path["rank"]) == {1}  # (from the window's last measured work, rank 1's: its extra compute holds the path)
    for rank, it in by_rank.items():
        mine = path[path["rank"] == rank]
        assert (it.critical is None and mine.empty) or (it.critical is not None and len(it.critical) == len(mine))
        if it.critical is not None:
            assert (it.critical["start_ns"].to_numpy() == mine["start_ns"].to_numpy()).all()
    assert labels.count("critical path") == path["rank"].nunique()


def test_capture_report_prints_the_summary(tmp_path):
    """``print(cap.report(path))``: the Capture hands back a report whose text is the command's (no profiling needed
    to read a trace already written)."""
    from traceprobe.report.text import TextReport

    cap = traceprobe.Capture(tmp_path / "runs")
    r = cap.report(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")
    assert isinstance(r, TextReport) and isinstance(r, traceprobe.OverlapReport)
    assert str(r) == r.summary() and "compute-copy.overlapped" in str(r) and "98% yes" in str(r)
    assert r.copy_overlap is not None and r.headline["duration_ns"] > 0  # the report itself, fields and figures


@pytest.mark.slow
def test_job_straggler_of_a_launch_bound_rank_reads_as_a_sentence():
    """The recorded GPT pair, whose rank 1 is late from launch-bound dispatch: one sentence, its action on a do line
    (it read "Fix rank 1's launch-bound")."""
    res = CliRunner().invoke(app, ["job", str(SAMPLES / "training" / "tb-ddp"), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert "Fix rank" not in res.stdout and "_ns" not in res.stdout
    assert re.search(r"straggler: rank 1 arrived last at its collectives; the others waited up to [\d.]+ ms/step; removing its "
                     r"launch-bound dispatch gives back [\d.]+ ms/step \(the job replayed\)", " ".join(res.stdout.split()))
    assert "\n  do: fewer, larger kernels: torch.compile or CUDA graphs (rank 1)\n" in res.stdout
