"""scripts/synth_job.py: a SYNTHETIC whole job (rank traces with matching collectives, late ranks)."""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job as job  # noqa: E402

st = job.st

KEYS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Name", "Process Group Description")


def _comms(path: Path) -> tuple[dict, list[dict]]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    ev = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})),
                key=lambda e: e["ts"])
    return doc, ev


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    cfg = st.Config(events=6000, nccl_share=0.2, seed=3)
    return job.write_job(cfg, 4, folder, skewed=1, skew_ns=400_000, jobs=1), folder


def test_ranks_have_the_same_collectives_in_the_same_order(written):
    paths, _ = written
    docs = [_comms(p) for p in paths]
    assert [d["distributedInfo"]["rank"] for d, _ in docs] == [0, 1, 2, 3]
    assert all(d["distributedInfo"]["world_size"] == 4 and d["traceName"].startswith("synthetic: ") for d, _ in docs)
    seqs = [[tuple(e["args"][k] for k in KEYS) for e in ev] for _, ev in docs]
    assert len(seqs[0]) > 20 and all(s == seqs[0] for s in seqs)
    names = {s[0] for s in seqs[0]}
    assert names == {"allreduce", "allgather", "reduce_scatter"}
    assert {s[5] for s in seqs[0]} == {"0", "1"}  # the default group and the pairs
    for (_, ev), r in zip(docs, range(4)):
        for e in ev:
            ranks = json.loads(e["args"]["Process Group Ranks"])
            assert r in ranks and len(ranks) == e["args"]["Group size"]
            assert e["args"]["Collective name"].replace("_", "") in e["name"].lower()


def test_a_collective_ends_together_on_its_group_and_the_late_rank_waits_least(written):
    paths, _ = written
    evs = [_comms(p)[1] for p in paths]
    waits = defaultdict(list)
    for k in range(len(evs[0])):
        ends = [round((ev[k]["ts"] + ev[k]["dur"]) * 1000) for ev in evs]
        if evs[0][k]["args"]["Process Group Name"] == "0":
            assert len(set(ends)) == 1
        else:
            assert ends[0] == ends[1] and ends[2] == ends[3]
            continue
        for r, ev in enumerate(evs):
            waits[r].append(ev[k]["dur"])
        starts = [ev[k]["ts"] for ev in evs]
        assert max(starts) == starts[3] or starts[3] >= min(starts)  # the skewed rank is never the only early one
    mean = {r: sum(w) / len(w) for r, w in waits.items()}
    assert mean[3] < min(mean[0], mean[1], mean[2])  # it arrives last, so it waits least


def test_each_stream_is_serial_and_traceprobe_reads_the_job(written):
    from traceprobe.collect import analyze_paths

    paths, folder = written
    for p in paths:
        doc, _ = _comms(p)
        by_stream = defaultdict(list)
        for e in doc["traceEvents"]:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                by_stream[e["args"]["stream"]].append((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
        for iv in by_stream.values():
            iv.sort()
            assert all(a[1] <= b[0] for a, b in zip(iv, iv[1:]))
    summary = analyze_paths([folder], jobs=1)
    assert not summary.failures and sorted(r.rank for r in summary.reports) == [0, 1, 2, 3]


def test_bad_arguments():
    with pytest.raises(ValueError):
        job.write_job(st.Config(events=6000), 2, "/nonexistent-never", skewed=3)
    with pytest.raises(ValueError, match="NCCL"):
        job.write_job(st.Config(events=6000, nccl_share=0.0), 2, "/nonexistent-never")


def test_collective_sizes_and_transfers_do_not_grow_with_the_group():
    """A collective's whole tensor is the same at 8 and 4,096 ranks (an all-gather's output, a reduce-scatter's input,
    an all-reduce's buffer; the parts are the whole over the group), and so is its transfer after the last arrival: an
    all-gather whose output grew with the group made the window of thousands of ranks communication alone, every cause
    under its noise floor."""
    import numpy as np

    cfg = st.Config(events=3000, nccl_share=0.2, seed=7)
    small, big = job.plan_job(cfg, 8, skewed=0), job.plan_job(cfg, 4096, skewed=0)
    assert small.kind.tolist() == big.kind.tolist() and small.in_pairs.tolist() == big.in_pairs.tolist()
    whole = np.where(small.kind == 1, small.n_out, small.n_in)
    assert np.array_equal(np.where(big.kind == 1, big.n_out, big.n_in), whole)
    for p, n in ((small, 8), (big, 4096)):
        size = np.where(p.in_pairs, 2, n)
        part = np.maximum(whole // size, 1)
        assert np.array_equal(np.where(p.kind == 1, p.n_in, np.where(p.kind == 2, p.n_out, part)), part)
    first = ~small.in_pairs & ~np.r_[True, small.in_pairs[:-1]]  # (group-wide collectives after a group-wide one)

    def transfer(p):  # (each collective's end after its group's last arrival, or the previous collective's end)
        start = np.maximum(p.arrive.max(axis=0), np.r_[np.iinfo(np.int64).min, p.end.max(axis=0)[:-1]])
        return (p.end.max(axis=0) - start)[first]
    assert np.array_equal(transfer(small), transfer(big))
