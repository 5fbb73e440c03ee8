"""Edges a user meets in the first hour: before/after on one GPU, files that are not torch.profiler traces, a mistyped
command, usage lines, internal names on screen (real sample traces where a trace is read)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from traceprobe.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def test_diff_of_two_single_trace_folders_with_different_names():
    """``tensorboard_trace_handler`` names each file by worker and time: two folders of one trace each are a pair; the
    findings are named in words, and no heading ends in a comma."""
    res = CliRunner().invoke(app, ["diff", str(SAMPLES / "causes" / "prefetch-off"), str(SAMPLES / "causes" / "prefetch-on"),
                                   "-j", "1"], env={"COLUMNS": "140"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "  A " in out and "prefetch-off/trace.1795637961261000413" in out and "prefetch-on/trace.1795637976555108816" in out
    assert "copy overlap" in out and "+80.4 pt" in out  # (the prefetch's copies now run under compute)
    assert "finding            │ exposed copy cuda:0 HtoD" in out and "finding            │ syncs" in out
    assert "idle_" not in out and "exposed_copy" not in out
    assert not any(line.rstrip().endswith(",") for line in out.splitlines())


def test_diff_subjects_in_words():
    from traceprobe.report.diff_output import subject_words

    assert subject_words("headroom_ns", "idle_cpu_op cuda:0") == "CPU ops that launch nothing cuda:0"
    assert subject_words("headroom_ns", "idle_launch cuda:0") == "launch-bound dispatch cuda:0"
    assert subject_words("headroom_ns", "exposed_copy cuda:0 HtoD") == "exposed copy cuda:0 HtoD"
    assert subject_words("copy_ns", "cuda:0 HtoD") == "cuda:0 HtoD"


def test_a_profile_of_another_tool_says_what_it_is_and_what_to_do(tmp_path):
    """An Nsight Systems report and a Perfetto protobuf given as traces: one line each, naming the file's kind and what
    to run, never ``not valid JSON``. SYNTHETIC: the files' first bytes only."""
    nsys = tmp_path / "run.nsys-rep"
    nsys.write_bytes(b"\x00\x01NSYS\x02" * 8)
    pf = tmp_path / "run.pftrace"
    pf.write_bytes(b"\x0a\x05\x08\x01\x10\x02\x00" * 8)
    res = CliRunner().invoke(app, ["overlap-report", str(nsys), str(pf), "-j", "1"])
    assert res.exit_code == 2
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 2 and "not valid JSON" not in res.stderr
    assert "an Nsight Systems report" in lines[0] and "nsys export --type sqlite" in lines[0] and "record --script" in lines[0]
    assert "a Perfetto trace (protobuf)" in lines[1] and "traceprobe view PATH" in lines[1]


def test_a_mistyped_command_suggests_the_command_holding_it_and_usage_names_paths():
    res = CliRunner().invoke(app, ["report", "x"])
    assert res.exit_code == 2 and "Did you mean 'overlap-report'?" in res.output
    for command in ("overlap-report", "job", "plot", "export"):
        res = CliRunner().invoke(app, [command])
        assert res.exit_code == 2 and f"{command} [OPTIONS] PATHS..." in res.output and "{" not in res.output, res.output
    assert "diff [OPTIONS] A B" in CliRunner().invoke(app, ["diff"]).output


def test_a_gate_line_says_what_is_above_which_limit():
    res = CliRunner().invoke(app, ["overlap-report", str(SAMPLES / "small-ops.one-stream.pt.trace.json.gz"), "--max-idle", "5%",
                                   "-j", "1"])
    assert res.exit_code == 1
    assert "gate not met: " in res.stderr and "cuda:0 idle time: 90.2% of the window is above the 5.0% limit" in res.stderr


def test_export_of_a_ddp_rank_reports_its_comm_overlap(tmp_path):
    """A data-parallel rank's export line gives the communication under compute it shows (its copies are DDP's bucket
    copies, not meant to overlap), not a copy overlap of 0.000 ms."""
    res = CliRunner().invoke(app, ["export", str(SAMPLES / "data-parallel.ddp.rank0.pt.trace.json.gz"), "--perfetto",
                                   "-o", str(tmp_path), "-j", "1"])
    assert res.exit_code == 0, res.output
    assert "comm under compute cuda:0 5.7 ms of 6.9 ms" in res.output and "0.000 ms" not in res.output


def test_detail_names_the_figures_across_ranks_in_words():
    res = CliRunner().invoke(app, ["overlap-report", str(SAMPLES / "causes" / "ddp-compute"), "--detail", "-j", "1"],
                             env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    part = res.stdout[res.stdout.index("across 2 ranks"):]
    assert "two or more streams busy" in part and "CPU work beside the GPU" in part and "step time" in part
    for key in ("mean_step", "gpu_busy", "stream_concurrency", "cpu_gpu_overlap"):
        assert key not in part, key


def test_capture_without_torch_says_so_in_one_line(tmp_path, monkeypatch):
    """Starting a capture where torch cannot be imported: one ImportError saying what to install, no chained traceback.
    SYNTHETIC: torch hidden from the import system."""
    import sys

    import pytest

    import traceprobe

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError) as e:
        with traceprobe.capture(tmp_path / "out"):
            pass
    assert str(e.value).startswith("traceprobe.capture() records with torch.profiler") and "pip install torch" in str(e.value)
    assert "\n" not in str(e.value) and e.value.__cause__ is None and e.value.__suppress_context__


def test_a_bubble_reads_in_the_unit_rule():
    """A pipeline bubble as a first-screen finding (the real 2-stage pipeline's rank 0): signed, per step first, the
    window's total labelled, as every other finding; not a bare share (``bubble 17.2%``)."""
    from traceprobe import load_trace, overlap_report
    from traceprobe.report.actions import finding_top

    r = overlap_report(load_trace(next((SAMPLES / "causes" / "pipeline").glob("rank0.*.pt.trace.json.gz"))))
    assert str(r.findings.iloc[0]["kind"]) == "bubble"
    top = finding_top(r)
    assert top is not None and top.label == "pipeline bubble -7.9 ms/step (-23.6 ms in 3 steps)", top
    assert top.do == "use more microbatches or an interleaved schedule"


def test_diff_of_two_jobs_keeps_each_pair_apart_from_its_kernels():
    """Two 2-rank folders paired by rank: each pair's heading starts with it (no trailing comma), and the kernel table
    gives the pair in a column of its own, never shortened into the kernel's name."""
    res = CliRunner().invoke(app, ["diff", str(SAMPLES / "causes" / "ddp-balanced"), str(SAMPLES / "causes" / "ddp-compute"),
                                   "-j", "1"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "rank 0, steps 2-4: figures: A, B and the change" in out and "rank 1, steps 2-4: figures:" in out
    kernels = out[out.index("kernels whose total time changed most"):]
    rows = [x for x in kernels.splitlines() if "│ cuda:" in x]
    assert rows and all(x.lstrip().startswith(("rank 0, steps 2-4 │", "rank 1, steps 2-4 │")) for x in rows)
    assert not any(line.rstrip().endswith(",") for line in out.splitlines())
