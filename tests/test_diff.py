"""traceprobe diff (analysis/diff.py, report/diff_output.py, the CLI) on real sample traces and SYNTHETIC folders."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import HELDOUT
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from traceprobe.analysis.diff import _finding_subject, diff
from traceprobe.cli import app
from traceprobe.collect import analyze_paths

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
NB = SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz"
OV = SAMPLES / "compute-copy.overlapped.pt.trace.json.gz"


def _diff(*args) -> SimpleNamespace:
    """``traceprobe diff ARGS`` in this process (typer's CliRunner; the JSON test above runs the real entry point):
    ``returncode``, ``stdout`` and ``stderr`` as ``subprocess.run`` gives them."""
    res = CliRunner().invoke(app, ["diff", *map(str, args)])
    return SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)


def fig(d, figure: str, subject: str) -> dict:
    rows = d[(d["figure"] == figure) & (d["subject"] == subject)]
    assert len(rows) == 1, (figure, subject)
    return rows.iloc[0].to_dict()


def test_nonblocking_to_overlapped_cli_json():
    out = subprocess.run([sys.executable, "-m", "traceprobe", "diff", str(NB), str(OV), "--format", "json", "-j", "1"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    figs = {(f["figure"], f["subject"]): f for f in doc["figures"]}
    dtoh = figs[("copy_overlap", "cuda:0 DtoH")]
    assert dtoh["a"] == 0.0 and dtoh["b"] == pytest.approx(0.98, abs=0.005)
    exposed = figs[("exposed_copy_ns", "cuda:0")]
    assert exposed["delta"] == pytest.approx(-57e6, rel=0.01) and exposed["delta"] == exposed["b"] - exposed["a"]
    assert doc["kernels"][0]["name"].startswith("Memcpy DtoH") or doc["kernels"][0]["device"] == 0
    # gates apply to B: the overlapped copies pass 0.9, the exit code is 1 when B fails
    gated = subprocess.run([sys.executable, "-m", "traceprobe", "diff", str(OV), str(NB), "--min-copy-overlap", "0.9", "-j", "1",
                            "--format", "csv"], capture_output=True, text=True)
    assert gated.returncode == 1 and gated.stdout.startswith("figure,subject,a,b,delta")


def test_folders_pair_by_name_then_by_rank(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for r in (0, 1):
        shutil.copy(SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz", a / f"rank{r}.pt.trace.json.gz")
        shutil.copy(SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz", b / f"r{r}.x.pt.trace.json.gz")  # other names
    d = diff(analyze_paths([a], jobs=1), analyze_paths([b], jobs=1), str(a), str(b))
    assert [p[0] for p in d.pairs] == ["rank 0, steps 2-4", "rank 1, steps 2-4"]
    assert not d.only_a and not d.only_b
    assert (d.figures["delta"].fillna(0) == 0).all()  # the same traces on both sides
    wait = fig(d.figures, "collective_wait_ns", "steps 2-4 rank 1")
    assert wait["a"] == wait["b"] > 0


def test_human_table_names_rows_without_units_and_cells_with_them(tmp_path):
    """The table and Markdown name rows for people ('trace window', not 'duration_ns') and show every value with its
    unit; each pair's files are named once, not in every cell; JSON keeps the raw names and ns."""
    from typer.testing import CliRunner

    from traceprobe.cli import app

    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        for r in (0, 1):
            shutil.copy(SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz", d / f"rank{r}.pt.trace.json.gz")
    res = CliRunner().invoke(app, ["diff", str(a), str(b), "-j", "1"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "duration_ns" not in res.stdout and "trace window" in res.stdout and " ms " in res.stdout
    assert res.stdout.count(str(a / "rank0.pt.trace.json.gz")) == 1  # the pair named once
    md = CliRunner().invoke(app, ["diff", str(NB), str(OV), "--format", "markdown", "-j", "1"])
    assert "| trace window" in md.stdout and "ms" in md.stdout and "_ns" not in md.stdout
    assert "+98.0 pt" in md.stdout  # DtoH copy overlap 0% -> 98%, a change in percentage points


def test_folders_that_pair_nothing_exit_2(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(NB, a)
    shutil.copy(SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz", a)
    shutil.copy(SAMPLES / "data-parallel.ddp.rank0.pt.trace.json.gz", b)
    shutil.copy(SAMPLES / "data-parallel.ddp.rank1.pt.trace.json.gz", b)
    out = _diff(a, b, "-j", "1")
    assert out.returncode == 2 and "nothing to compare" in out.stderr


def test_folders_with_no_name_in_common_exit_2_naming_both(tmp_path):
    """Two folders of unranked traces with no file name in common: no pair is made up (the last trace of each, before),
    nothing is printed as a diff, and the one error line names both folders' traces."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(NB, a)
    shutil.copy(SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz", a)
    shutil.copy(OV, b)
    shutil.copy(SAMPLES / "streams.one-stream.pt.trace.json.gz", b)
    out = _diff(a, b, "-j", "1")
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("nothing to compare: no trace name of") and NB.name in line and OV.name in line
    assert "multi-gpu.concurrent" in line and "streams.one-stream" in line


@pytest.mark.parametrize("width", [80, 120])
def test_kernel_names_whole_or_shortened_with_an_ellipsis(width):
    """The kernels table: each name on one line, whole where it fits, else its start and end around ``…`` (it was
    folded mid-identifier over three lines and cut at 100 characters without a mark); no line wider than the width."""
    from traceprobe.report.diff_output import DiffRenderer

    d = diff(analyze_paths([NB], jobs=1), analyze_paths([OV], jobs=1))
    lines = DiffRenderer(width=width).render(d).splitlines()
    assert max(len(x) for x in lines) <= width
    start = next(i for i, x in enumerate(lines) if x.startswith("kernels whose total time changed most"))
    rows = [x for x in lines[start + 3:] if x.strip()]
    assert len(rows) == len(d.kernels) == 2  # one line per kernel
    gemm = next(n for n in d.kernels["name"] if n.startswith("sm80_xmma"))
    (row,) = [x for x in rows if "sm80_xmma" in x]
    shown = row.split("│")[1].strip()
    assert shown == gemm or (("…" in shown) and gemm.startswith(shown.split("…")[0]) and gemm.endswith(shown.split("…")[1]))


_ALPHABET = "ab<>, 0123"
_NAME = st.text(alphabet=_ALPHABET, min_size=0, max_size=30)
_MIDDLES = _NAME.flatmap(lambda a: st.tuples(st.just(a), st.text(alphabet=_ALPHABET, min_size=len(a), max_size=len(a))))


@given(head=_NAME, middles=_MIDDLES, tail=_NAME, width=st.integers(11, 60))
@settings(max_examples=400, deadline=None)
def test_names_shortened_alike_keep_where_they_differ(head, middles, tail, width):
    """SYNTHETIC names (random text around two middles of one length): each at most ``width`` characters, unchanged
    where it fits, the same name shown the same, and two different names never shown alike, wherever they differ
    (kernel names that differ only in their template arguments read alike once shortened to their start and end)."""
    from traceprobe.report.grid import shortened

    one, two = head + middles[0] + tail, head + middles[1] + tail
    got = shortened([one, two, one], width)
    assert all(len(s) <= width for s in got) and got[0] == got[2]
    assert got[0] == one if len(one) <= width else "…" in got[0]
    assert (got[0] == got[1]) == (one == two)


def test_kernel_names_alike_at_their_ends_are_told_apart():
    """Two cuDNN kernels whose names differ only inside their template arguments (Kineto's tb_plugin ResNet-50 samples,
    diffed): each row shows where they differ, not the same start and end twice."""
    from traceprobe.report.grid import shorten, shortened

    names = ["void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float, int, float "
             "const*, int, int, int, int)",
             "void cudnn::cnn::wgrad_alg0_engine<float, 512, 6, 5, 3, 3, 3, false, 512>(int, int, int, float, int, float "
             "const*, int, int, int, int)"]
    assert shorten(names[0], 60) == shorten(names[1], 60)
    got = shortened(names, 60)
    assert got[0] != got[1] and "128, 6, 7" in got[0] and "512, 6, 5" in got[1]


def test_traces_on_other_devices_pair_their_devices_by_order():
    """Recorded (DDP, 2 ranks): rank 0's trace (cuda:0) against rank 1's (cuda:1) compares each device figure and
    kernel of one with the other's, named ``cuda:0 / cuda:1``, where every one had a side missing; two traces on the
    same device keep its name."""
    ddp = [SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in (0, 1)]
    d = diff(analyze_paths([ddp[0]], jobs=1), analyze_paths([ddp[1]], jobs=1))
    assert not d.figures["subject"].str.match(r"cuda:[01](?: [A-Za-z]|$)").any()  # (no device named alone)
    compute = fig(d.figures, "compute_ns", "cuda:0 / cuda:1")
    assert compute["a"] > 0 and compute["b"] > 0 and abs(compute["delta"]) < 0.01 * compute["a"]
    assert set(d.kernels["device_label"]) == {"cuda:0 / cuda:1"} and (d.kernels[["a_ns", "b_ns"]] > 0).all(axis=None)
    same = diff(analyze_paths([NB], jobs=1), analyze_paths([OV], jobs=1))
    assert "cuda:0" in set(same.figures["subject"]) and "/" not in "".join(same.figures["subject"])


def test_findings_of_two_ranks_pair_without_their_rank():
    """Recorded (held-out, 4-rank DDP, rank 2 given more compute): rank 0's trace against rank 1's pairs their
    findings of one kind on paired devices in one row (``exposed comm cuda:0 / cuda:1``), where each side's named its
    own rank and device (``exposed comm rank 0 cuda:0``) and had the other side empty; a subject naming another rank or
    every rank keeps it."""
    folder = HELDOUT / "w4-late2" / "ddp-compute"
    ra, rb = (next(folder.glob(f"rank{r}.*.pt.trace.json.gz")) for r in (0, 1))
    d = diff(analyze_paths([ra], jobs=1), analyze_paths([rb], jobs=1))
    found = d.figures[d.figures["figure"] == "headroom_ns"]
    assert not found.empty and not found["subject"].str.contains(r"\brank [01]\b").any()
    comm = fig(d.figures, "headroom_ns", "exposed_comm cuda:0 / cuda:1")
    assert comm["a"] > 0 and comm["b"] > 0 and abs(comm["delta"]) < 0.01 * comm["a"]
    r = SimpleNamespace(rank=3, backend="cuda")
    assert _finding_subject(r, "rank 3 cuda:3 HtoD", 3, lambda d: f"cuda:{d} / cuda:1") == "cuda:3 / cuda:1 HtoD"
    assert _finding_subject(r, "rank 3", 3, str) == ""
    assert _finding_subject(r, "rank 31 cuda:31", 31, str) == "rank 31 cuda:31"  # (another rank's: kept)
    assert _finding_subject(r, "every rank", 3, str) == "every rank"
