"""``export --perfetto --merge-ranks``: all ranks of a window in one .pftrace, read back with the perfetto protos.

Real traces: sample_traces/data-parallel.ddp.rank0/1 (DDP over NCCL on two H200s).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_perfetto import replay
from typer.testing import CliRunner

from traceprobe import load_trace, overlap_report
from traceprobe.cli import app
from traceprobe.report.perfetto_ranks import CROSS_FLOW_BASE, RANK_PID_BASE

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
DDP = [SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def _under(tracks: dict, uuid: int) -> int | None:
    """The rank of the process a track belongs to (following parents), or None."""
    while uuid:
        td = tracks[uuid]
        if td.HasField("process"):
            return td.process.pid - RANK_PID_BASE
        uuid = td.parent_uuid
    return None


def test_merge_ranks_round_trip(tmp_path):
    res = CliRunner().invoke(app, ["export", *map(str, DDP), "--perfetto", "--merge-ranks", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "data-parallel.ddp.pftrace"
    assert "clocks: timestamps as each rank recorded them, not shifted" in res.stdout
    r = replay(out)  # every slice closes on its own track, packets in time order
    tracks, slices = r["tracks"], r["slices"]
    procs = {td.process.process_name: u for u, td in tracks.items() if td.HasField("process")}
    assert set(procs) == {"rank 0", "rank 1"}
    for rank, path in enumerate(DDP):
        ev = load_trace(path).device_events
        mine = slices[[_under(tracks, t) == rank for t in slices["track"]]]
        coll = [u for u, td in tracks.items() if td.name == "collectives" and td.parent_uuid == procs[f"rank {rank}"]]
        assert len(coll) == 1
        on_coll = mine[mine["track"] == coll[0]]
        assert len(on_coll) == int(ev["is_comm"].sum()) > 0
        devices = mine[mine["kind"].notna() & (mine["track"] != coll[0])]
        assert len(devices) == len(ev)  # every device event, once, under its rank
        assert sorted(devices["start"]) == sorted(ev["start_ns"])
        names = {tracks[u].name for u in tracks if _under(tracks, u) == rank}
        assert {"overlap", "busy streams", "busy devices", "traceprobe verdicts"} <= names
        assert any(n.startswith("cuda:") for n in names) and any(n.startswith("stream ") for n in names)
    clocks = slices[slices["name"].str.startswith("clocks:")]
    assert len(clocks) == 1 and "ranks share a clock" in clocks["name"].iloc[0]
    for fid, outs in r["flows_out"].items():  # launch flows stay within their rank
        if fid >= CROSS_FLOW_BASE:
            continue  # (the critical path's crossings between ranks: test_merge_ranks_draws_the_critical_path)
        assert _under(tracks, outs[0]["track"]) == _under(tracks, r["flows_in"][fid][0]["track"])


def test_merge_ranks_needs_ranks(tmp_path):
    res = CliRunner().invoke(app, ["export", str(SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz"), "--perfetto", "--merge-ranks",
                                   "-o", str(tmp_path)])
    assert res.exit_code == 2 and "nothing to merge" in res.stderr


@pytest.mark.slow  # export --merge-ranks over copies of two runs' folders
def test_merge_ranks_names_never_collide(tmp_path):
    """Two multi-rank runs whose folders end alike (and each two windows): one file per run and window, none
    written twice; a single-GPU trace in the folder is named as skipped, with the reason."""
    import shutil

    src = SAMPLES / "training" / "tb-ddp"
    for run in ("ddp", "fsdp"):
        shutil.copytree(src, tmp_path / "in" / run / "train_gpt")
    shutil.copy(SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz", tmp_path / "in")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["export", str(tmp_path / "in"), "--perfetto", "--merge-ranks", "-o", str(out)])
    assert res.exit_code == 0, res.output
    written = sorted(p.name for p in out.iterdir())
    assert written == ["ddp-train_gpt.steps2-4.pftrace", "ddp-train_gpt.steps7-9.pftrace",
                       "fsdp-train_gpt.steps2-4.pftrace", "fsdp-train_gpt.steps7-9.pftrace"]
    assert len([x for x in res.stdout.splitlines() if ".pftrace" in x]) == 4  # each written once
    (line,) = [x for x in res.stderr.splitlines() if "skipped" in x]
    assert line.startswith("skipped 1 single-rank trace (") and "multi-gpu.concurrent.pt.trace.json.gz):" in line
    assert line.endswith("--merge-ranks needs two or more ranks in a window (export them without --merge-ranks)")


def test_export_names_keep_the_folder(tmp_path):
    from traceprobe.report.chrome import unique_stems

    assert unique_stems(["/d/rec-ddp/rank0.pt.trace.json", "/d/rec-fsdp/rank0.pt.trace.json"]) == ["rec-ddp-rank0", "rec-fsdp-rank0"]
    assert unique_stems(["/d/a.pt.trace.json.gz", "/d/a.pt.trace.json"]) == ["a", "a.2"]


def test_merge_ranks_draws_the_critical_path(tmp_path):
    """The matrix's mesh-sleep run (4x H200, rank 3 sleeps 20 ms a step): a ``critical path`` track under each rank the
    path crosses, its slices the path's segments, laid end to end without overlap, rank 3's holding its sleep."""
    from traceprobe.collect import analyze_paths

    folder = SAMPLES / "matrix" / "mesh-sleep"
    res = CliRunner().invoke(app, ["export", str(folder), "--perfetto", "--merge-ranks", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    r = replay(next(tmp_path.glob("*.pftrace")))
    tracks, slices = r["tracks"], r["slices"]
    on = {u: _under(tracks, u) for u, td in tracks.items() if td.name == "critical path"}
    path = analyze_paths([str(folder)], jobs=1).what_ifs[0].critical_path
    assert sorted(on.values()) == sorted(set(path["rank"]))
    drawn = slices[slices["track"].isin(list(on))].sort_values("start")
    assert len(drawn) == len(path.drop_duplicates(["rank", "lane", "start_ns", "end_ns"]))
    assert (drawn["start"].to_numpy()[1:] >= drawn["end"].to_numpy()[:-1] - 1_000_000).all()  # (end to end, give or take a launch)
    rank3 = np.array([on[t] == 3 for t in drawn["track"]])
    sleep = drawn[rank3 & drawn["name"].str.startswith("host").to_numpy()]
    assert (sleep["end"] - sleep["start"]).max() > 15_000_000
    # where the path crosses ranks, a flow leads from the earlier rank's segment to the later one's
    r_path = path["rank"].to_numpy()
    crossings = int((r_path[1:] != r_path[:-1]).sum())
    cross = {f: (out, r["flows_in"].get(f, [])) for f, out in r["flows_out"].items() if f >= CROSS_FLOW_BASE}
    assert crossings > 0 and len(cross) == crossings
    for out, into in cross.values():
        assert len(out) == 1 and len(into) == 1
        assert on[out[0]["track"]] != on[into[0]["track"]] and out[0]["start"] <= into[0]["start"]


def test_merge_ranks_says_the_skipped_traces_in_one_line(tmp_path):
    """A folder of single-rank traces: one line for all of them (not one per trace), and the error that nothing merged."""
    import shutil

    for name in ("cpu-gpu.sequential", "cpu-gpu.concurrent", "tile-parallel.single", "streams.one-stream"):
        shutil.copy(SAMPLES / f"{name}.pt.trace.json.gz", tmp_path)
    res = CliRunner().invoke(app, ["export", str(tmp_path), "--perfetto", "--merge-ranks", "-o", str(tmp_path / "out"), "-j", "1"])
    lines = res.stderr.splitlines()
    assert [x for x in lines if "skipped" in x] == [
        "skipped 4 single-rank traces: --merge-ranks needs two or more ranks in a window (export them without --merge-ranks)"]
    assert res.exit_code == 2 and any("nothing to merge" in x for x in lines)


def test_merge_ranks_claims_roundtrip(tmp_path):
    """export --perfetto --merge-ranks of the matrix's mesh-sleep run (real, 4x H200, rank 3 sleeps 20 ms a step): a
    top-level ``traceprobe claims`` track holds the window's claim in the words of the JSON document's ``top_claims``
    (the same for the four ranks: one slice, ``ranks`` 0-3), its action, figure, gain and share beside it, over the
    ranks' windows together; as one trace's export has (test_perfetto.test_achieved_tflops_and_claims_roundtrip)."""
    import json

    from traceprobe.report.perfetto_claims import CLAIMS_TRACK

    folder = SAMPLES / "matrix" / "mesh-sleep"
    res = CliRunner().invoke(app, ["export", str(folder), "--perfetto", "--merge-ranks", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    r = replay(next(tmp_path.glob("*.pftrace")))
    doc = json.loads(CliRunner().invoke(app, ["overlap-report", str(folder), "--format", "json", "--jobs", "1"]).stdout)
    want = doc["top_claims"]
    assert len(want) == 4 and len({c["claim"] for c in want}) == 1
    (ct,) = [u for u, td in r["tracks"].items() if td.name == CLAIMS_TRACK]
    assert _under(r["tracks"], ct) is None  # (the window's, not a rank's)
    got = r["slices"][r["slices"]["track"] == ct]
    assert got["name"].tolist() == [want[0]["claim"]] and got["do"].tolist() == [want[0]["do"]]
    assert got["gain_ns"].tolist() == [want[0]["gain_ns"]] and got["rank"].tolist() == [1]
    assert got["value"].tolist() == pytest.approx([want[0]["share"]]) and got["ranks"].tolist() == ["0, 1, 2, 3"]
    windows = [t["window_ns"] for t in doc["traces"]]
    assert got["start"].tolist() == [min(w[0] for w in windows)] and got["end"].tolist() == [max(w[1] for w in windows)]


def test_merge_ranks_claims_of_ranks_apart(tmp_path):
    """SYNTHETIC claims on the DDP pair (real traces): each rank's own claim is a slice of its own, the larger gain first
    (outermost), with the rank whose claim it is; a claim of both ranks is one slice, ``ranks`` ``0, 1``; no claims, no
    track."""
    from traceprobe.report.actions import Top
    from traceprobe.report.perfetto_claims import CLAIMS_TRACK
    from traceprobe.report.perfetto_ranks import write_perfetto_ranks

    items = [(rank, t, overlap_report(t)) for rank, t in ((r, load_trace(p)) for r, p in enumerate(DDP))]
    small = Top("syncs -0.5 ms/step", "drop the syncs", True, "syncs", "-0.5 ms/step", 1.5e6, 0.125)
    large = Top("exposed copies -1.0 ms/step", "pin the buffer", True, "exposed copies", "-1.0 ms/step", 3e6, 0.25)
    cases = {"apart": ([(0, small), (1, large)], [(large.label, "1", 1), (small.label, "0", 2)]),
             "shared": ([(0, large), (1, large)], [(large.label, "0, 1", 1)]), "none": ([], [])}
    for name, (claims, want) in cases.items():
        out = write_perfetto_ranks(items, tmp_path / f"{name}.pftrace", claims=claims)
        r = replay(tmp_path / f"{name}.pftrace")
        on = [u for u, td in r["tracks"].items() if td.name == CLAIMS_TRACK]
        assert out.claims == len(want) and len(on) == (1 if want else 0)
        got = r["slices"][r["slices"]["track"].isin(on)].sort_values("rank")
        assert list(zip(got["name"], got["ranks"], got["rank"])) == want
        lo, hi = min(rep.window_ns[0] for _, _, rep in items), max(rep.window_ns[1] for _, _, rep in items)
        assert (got["start"] == lo).all() and (got["end"] == hi).all()
