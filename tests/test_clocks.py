"""Clock offsets and drift across ranks (traceprobe.analysis.job.clocks).

Two kinds of evidence: real 2-rank recordings of one host (``sample_traces/``), whose clocks agree, with an
offset and drift injected into one rank's collective times in memory; and SYNTHETIC multi-rank windows
(made up here: several hosts, each with its own offset and drift, process groups within and across hosts).
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceprobe.analysis.job.clocks import END_TOLERANCE_NS, aligned_tables, estimate_clocks, shift_times
from traceprobe.analysis.job.collectives import collective_table, match_window
from traceprobe.reading import load_trace

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
PAIRS = {
    "causes/ddp-compute": sorted(glob.glob(str(SAMPLES / "causes/ddp-compute/*.json.gz"))),
    "causes/ddp-balanced": sorted(glob.glob(str(SAMPLES / "causes/ddp-balanced/*.json.gz"))),
    "training/tb-fsdp": [str(SAMPLES / "training/tb-fsdp/rank0.1795416686455675409.pt.trace.json.gz"),
                         str(SAMPLES / "training/tb-fsdp/rank1.1795416686468705131.pt.trace.json.gz")],
    "data-parallel.ddp": [str(SAMPLES / "data-parallel.ddp.rank0.pt.trace.json.gz"), str(SAMPLES / "data-parallel.ddp.rank1.pt.trace.json.gz")],
}


def _skew(table: pd.DataFrame, offset_ns: int, ppm: float, t0: int) -> pd.DataFrame:
    """One rank's times as a clock ``offset_ns`` ahead at ``t0`` and running ``ppm`` fast would stamp them."""
    out = table.copy()
    for c in ("start_ns", "end_ns"):
        t = out[c].to_numpy(np.int64)
        out[c] = t + offset_ns + np.rint(ppm * 1e-6 * (t - t0)).astype(np.int64)
    return out


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict[int, pd.DataFrame]]:
    out = {}
    for name, files in PAIRS.items():
        tables = {}
        for f in files:
            t = load_trace(f)
            assert t.rank is not None
            tables[t.rank] = collective_table(t)
        out[name] = tables
    return out


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize(("offset_ns", "ppm"), [(0, 0.0), (5_000_000, 100.0), (-5_000_000, -80.0), (1_234_567, 30.0), (-60_000, 0.0)])
def test_recorded_one_host_shifted_is_recovered(recorded, name: str, offset_ns: int, ppm: float) -> None:
    tables = recorded[name]
    t0 = int(tables[1]["end_ns"].median())
    wc = match_window({0: tables[0], 1: _skew(tables[1], offset_ns, ppm, t0)})
    est = estimate_clocks(wc.per_rank, wc.ranks)
    assert est.supported, est.reason
    row = est.ranks.set_index("rank").loc[1]
    true = offset_ns + ppm * 1e-6 * (est.mid_ns - t0)
    assert abs(row["offset_ns"] - true) <= row["uncertainty_ns"]
    assert abs(row["drift_ppm"] - ppm) <= row["drift_uncertainty_ppm"]
    assert row["uncertainty_ns"] < 2.5 * END_TOLERANCE_NS  # informative: far below the offsets injected
    if abs(offset_ns) >= 1_000_000:
        assert est.differ  # 5 ms and 1.2 ms are seen
    if offset_ns == 0:
        assert not est.differ  # one host's ranks agree
    if est.differ:  # corrected, the tables are matched as if the clocks agreed: skews come back to the unshifted ones
        fixed = match_window(aligned_tables({0: tables[0], 1: _skew(tables[1], offset_ns, ppm, t0)}, est))
        plain = match_window(tables)
        err = np.abs(fixed.matches["skew_ns"].to_numpy() - plain.matches["skew_ns"].to_numpy())
        assert err.max() <= row["uncertainty_ns"]


def _synthetic_window(ranks: int, per_host: int, groups: str, collectives: int, window_s: float, seed: int,
                      max_offset_ns: int = 5_000_000, max_ppm: float = 50.0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """SYNTHETIC per-rank collective times of one window (made up, not recorded): ``ranks`` ranks, ``per_host`` to a
    host; each host's clock has an offset in ±``max_offset_ns`` and a drift in ±``max_ppm``. ``groups``: ``world`` (every
    collective in one group), ``2d`` (data-parallel groups across hosts and tensor-parallel groups within one, no
    collective of every rank). Kernel ends of a collective lie within ±15 µs (a constant per rank) ±2 µs (jitter) of
    each other; ranks arrive up to 1 ms apart. Returns per_rank, each rank's true offset and drift."""
    rng = np.random.default_rng(seed)
    hosts = ranks // per_host
    h_off = rng.uniform(-max_offset_ns, max_offset_ns, hosts)
    h_ppm = rng.uniform(-max_ppm, max_ppm, hosts)
    off, ppm = np.repeat(h_off, per_host), np.repeat(h_ppm, per_host)
    bias = rng.uniform(-15_000, 15_000, ranks)
    t0 = 1_700_000_000_000_000_000
    true_end = t0 + np.sort(rng.uniform(0, window_s * 1e9, collectives)).astype(np.int64)
    rows = []
    if groups == "world":
        members = [(("0", np.arange(ranks)))] * collectives
    else:
        tp = [np.arange(h * per_host, (h + 1) * per_host) for h in range(hosts)]
        dp = [np.arange(i, ranks, per_host) for i in range(per_host)]
        members = [(f"tp{k // 2 % hosts}", tp[k // 2 % hosts]) if k % 2 else (f"dp{k // 2 % per_host}", dp[k // 2 % per_host]) for k in range(collectives)]
    seqs: dict[str, int] = {}
    for c, (pg, mem) in enumerate(members):
        e = true_end[c] + bias[mem] + rng.integers(-2_000, 2_000, mem.size)
        s = e - rng.integers(50_000, 1_000_000, mem.size)
        stamp = lambda t, m=mem: t + off[m] + ppm[m] * 1e-6 * (t - t0)  # noqa: E731
        seq = seqs.get(pg, 0)
        seqs[pg] = seq + 1
        rows.append(pd.DataFrame({"pg": pg, "seq": seq, "rank": mem, "start_ns": np.rint(stamp(s)).astype(np.int64),
                                  "end_ns": np.rint(stamp(e)).astype(np.int64), "collective": "allreduce"}))
    return pd.concat(rows, ignore_index=True), off, ppm


@pytest.mark.parametrize(("ranks", "per_host", "groups", "seed"), [(16, 4, "world", 1), (16, 4, "2d", 2), (64, 8, "2d", 3), (8, 1, "world", 4)])
def test_synthetic_hosts_recovered(ranks: int, per_host: int, groups: str, seed: int) -> None:
    per_rank, off, ppm = _synthetic_window(ranks, per_host, groups, collectives=400, window_s=20.0, seed=seed)
    est = estimate_clocks(per_rank)
    assert est.supported and est.differ, est.reason
    got = est.ranks.set_index("rank")
    t0 = 1_700_000_000_000_000_000
    true = (off + ppm * 1e-6 * (est.mid_ns - t0)) - (off[0] + ppm[0] * 1e-6 * (est.mid_ns - t0))
    err = np.abs(got["offset_ns"].to_numpy() - true)
    assert (err <= got["uncertainty_ns"].to_numpy()).all(), (err.max(), got["uncertainty_ns"].min())
    d_err = np.abs(got["drift_ppm"].to_numpy() - (ppm - ppm[0]))
    assert (d_err <= got["drift_uncertainty_ppm"].to_numpy() + 1e-9).all()
    # 20 s windows: a drift of tens of ppm moves the ends by far more than they scatter, so it is seen
    moved = np.abs(ppm - ppm[0]) * 1e-6 * 10e9 > 4 * END_TOLERANCE_NS
    assert (got["status"].to_numpy()[moved] == "offset and drift").all()


def test_synthetic_window_corrected_by_the_estimate() -> None:
    per_rank, off, ppm = _synthetic_window(8, 2, "world", collectives=200, window_s=5.0, seed=7)
    est = estimate_clocks(per_rank)
    fixed = pd.concat([shift_times(g, est, int(r)) for r, g in per_rank.groupby("rank")])
    gap = fixed.groupby(["pg", "seq"])["end_ns"].agg(lambda s: s.max() - s.min())
    assert gap.max() < 2 * END_TOLERANCE_NS  # ends together again (they were up to 10 ms apart)
    raw = per_rank.groupby(["pg", "seq"])["end_ns"].agg(lambda s: s.max() - s.min())
    assert raw.max() > 1_000_000


def test_too_few_collectives_is_said() -> None:
    per_rank, _, _ = _synthetic_window(4, 1, "world", collectives=2, window_s=1.0, seed=5)
    est = estimate_clocks(per_rank)
    assert not est.supported and "too few collectives" in est.reason and not est.differ
    assert "not estimated" in est.describe()


def test_only_broadcasts_is_said() -> None:
    per_rank, _, _ = _synthetic_window(4, 1, "world", collectives=50, window_s=1.0, seed=5)
    est = estimate_clocks(per_rank.assign(collective="broadcast"))
    assert not est.supported and "no matched all-reduce" in est.reason


def test_inconsistent_ends_are_said() -> None:
    per_rank, _, _ = _synthetic_window(4, 1, "world", collectives=100, window_s=1.0, seed=6, max_offset_ns=0, max_ppm=0.0)
    rng = np.random.default_rng(0)
    noisy = per_rank.assign(end_ns=per_rank["end_ns"] + rng.integers(0, 50_000_000, len(per_rank)))
    est = estimate_clocks(noisy)
    assert not est.supported and "inconsistent" in est.reason


def test_one_host_agrees() -> None:
    per_rank, _, _ = _synthetic_window(8, 8, "world", collectives=100, window_s=2.0, seed=8)
    est = estimate_clocks(per_rank)
    assert est.supported and not est.differ  # one host: offsets within the ends' tolerance
    assert aligned_tables({0: per_rank}, est) is not None
    assert "agree" in est.describe()


def test_thousand_ranks() -> None:
    """1,024 ranks of 8 hosts whose clocks differ: estimated, and found to differ (its time is a benchmark's, not a
    test's: ``scripts/bench.py --summaries``, the whole-job report, clocks included)."""
    per_rank, off, ppm = _synthetic_window(1024, 8, "2d", collectives=400, window_s=10.0, seed=9)
    est = estimate_clocks(per_rank)
    assert est.supported and est.differ


def test_summary_aligned_on_shifted_recording() -> None:
    """The recorded ddp-compute pair with rank 1's times 5 ms ahead (in memory): as recorded, the waits are wrong;
    with align_clocks they come back to the unshifted pair's, within the uncertainty per collective."""
    from dataclasses import replace

    from traceprobe.analysis.summary import summarize
    from traceprobe.collect import analyze_paths

    plain = analyze_paths([str(SAMPLES / "causes/ddp-compute")], jobs=1)
    t0 = int(plain.reports[1].collectives["end_ns"].median())

    def ahead(rep):
        return replace(rep, collectives=_skew(rep.collectives, 5_000_000, 50.0, t0), exposed_comm=_skew(rep.exposed_comm, 5_000_000, 50.0, t0))

    shifted = [ahead(r) if r.rank == 1 else r for r in plain.reports]
    raw, fixed = summarize(shifted), summarize(shifted, align_clocks=True)
    est = fixed.clocks[0]
    assert est.supported and est.differ and raw.clocks[0].differ
    unc = int(est.ranks.set_index("rank").loc[1, "uncertainty_ns"])
    want = plain.collectives[0].wait_ns
    assert abs(raw.collectives[0].wait_ns[0] - want[0]) > 10 * unc  # rank 1 seems to arrive 5 ms late everywhere
    n = plain.collectives[0].matched
    assert all(abs(fixed.collectives[0].wait_ns[r] - want[r]) <= n * unc for r in want)
    assert "align-clocks" in fixed.collectives[0].clock and "align-clocks" not in raw.collectives[0].clock
    assert fixed.causes[0].straggler == plain.causes[0].straggler == 1


def test_merged_perfetto_put_on_one_clock(tmp_path) -> None:
    """write_perfetto_ranks with an estimate that says the clocks differ moves every slice of a rank by its
    correction; with none (or one that agrees), slices keep their recorded times."""
    from test_perfetto import replay

    from traceprobe.analysis.job.clocks import ClockEstimate
    from traceprobe.analysis.per_trace import overlap_report
    from traceprobe.report.perfetto_ranks import RANK_PID_BASE, write_perfetto_ranks

    traces = [load_trace(SAMPLES / f"data-parallel.ddp.rank{r}.pt.trace.json.gz") for r in (0, 1)]
    items = [(t.rank, t, overlap_report(t)) for t in traces]
    mid = int(traces[1].device_events["start_ns"].median())
    ranks = pd.DataFrame({"rank": [0, 1], "offset_ns": [0, 3_000_000], "uncertainty_ns": [0, 60_000], "drift_ppm": [0.0, 40.0],
                          "drift_uncertainty_ppm": [0.0, 5.0], "collectives": [24, 24], "status": ["reference", "offset and drift"]})
    est = ClockEstimate("", "", 0, mid, ranks, supported=True, differ=True)
    plain = write_perfetto_ranks(items, tmp_path / "plain.pftrace")
    moved = write_perfetto_ranks(items, tmp_path / "moved.pftrace", clocks=est)
    assert moved.shifted and not plain.shifted and "put on one rank's clock" in moved.describe()

    def device_starts(path, rank):
        r = replay(path)
        tracks, slices = r["tracks"], r["slices"]

        def owner(u):
            while u:
                if tracks[u].HasField("process"):
                    return tracks[u].process.pid - RANK_PID_BASE
                u = tracks[u].parent_uuid
            return None
        mine = slices[np.array([owner(t) == rank for t in slices["track"]]) & slices["kind"].notna().to_numpy()]
        return np.sort(mine["start"].to_numpy(np.int64))

    for rank in (0, 1):
        a, b = device_starts(tmp_path / "plain.pftrace", rank), device_starts(tmp_path / "moved.pftrace", rank)
        assert len(a) == len(b) > 0
        np.testing.assert_array_equal(b, a - est.correction_ns(rank, a))
    assert est.correction_ns(1, np.array([mid]))[0] == 3_000_000


def _shifted_summary(offset_ns: int):
    """The recorded ddp-compute pair with rank 1's collective times ``offset_ns`` ahead (in memory, SYNTHETIC shift)."""
    from dataclasses import replace

    from traceprobe.analysis.summary import summarize
    from traceprobe.collect import analyze_paths

    plain = analyze_paths([str(SAMPLES / "causes/ddp-compute")], jobs=1)
    t0 = int(plain.reports[1].collectives["end_ns"].median())
    return plain, summarize([replace(r, collectives=_skew(r.collectives, offset_ns, 0.0, t0)) if r.rank == 1 else r for r in plain.reports])


def _unwrapped(text: str) -> str:
    """The first screen's paragraphs each on one line (a wrapped paragraph continues on lines indented by two)."""
    return re.sub(r"\n  (?=\S)", " ", text)


def test_table_and_markdown_say_the_offsets_only_where_clocks_differ() -> None:
    """Rank 1 shifted 5 ms ahead: one line under the table and a Markdown section give its offset with the
    uncertainty, each in its unit; the recording as it is (one host, clocks agree) shows neither."""
    from traceprobe.report.renderers import renderer

    plain, shifted = _shifted_summary(5_000_000)
    est = shifted.clocks[0]
    assert est.differ
    row = est.ranks.set_index("rank").loc[1]
    assert abs(int(row["offset_ns"]) - 5_000_000) <= int(row["uncertainty_ns"]) < 1_000_000
    table = _unwrapped(renderer("table").render(shifted))
    (line,) = [x for x in table.splitlines() if x.startswith("clocks of ")]
    assert re.search(r"clocks of \S*ddp-compute steps 2-4 differ \(offsets from rank 0's clock, .*\): rank 1 \+5\.0 ms ± \d+\.\d µs;", line), line
    md = renderer("markdown").render(shifted)
    assert "## Clocks across ranks" in md and re.search(r"\|\s+1 \| \+5\.0 ms ± \d+\.\d µs \|", md), md[md.find("## Clocks"):]
    for fmt in ("table", "markdown"):
        out = renderer(fmt).render(plain)
        assert "clocks of " not in out and "## Clocks" not in out  # nothing to report: the ranks share a clock
    behind = _shifted_summary(-250_000)[1]  # a quarter of a ms behind: µs, with the sign
    assert re.search(r"rank 1 -2\d\d\.\d µs ± \d+\.\d µs;", _unwrapped(renderer("table").render(behind)))


def _listed(line: str) -> list[list[int]]:
    """The rank groups a clock line names, each as its ranks (``ranks 4-7, 12 +4.5 ms ± ...``)."""
    body = line.split("): ", 1)[1].split("; --align", 1)[0]
    groups = re.findall(r"ranks? ((?:\d+(?:-\d+)?(?:, (?=\d))?)+) [+-]\d", body)
    return [sum((list(range(int(a), int(b or a) + 1)) for a, b in re.findall(r"(\d+)(?:-(\d+))?", g)), []) for g in groups]


def test_clock_notes_cannot_estimate_and_many_ranks() -> None:
    """SYNTHETIC windows: too few collectives reads 'cannot estimate' with the reason; of 16 ranks on 4 hosts the
    table line names every rank once, the ranks of one host together; of 128 ranks on 16 hosts, the largest
    offsets and how many more; Markdown lists every rank."""
    from dataclasses import replace

    from traceprobe.report.clock_notes import LISTED
    from traceprobe.report.renderers import renderer

    plain, _ = _shifted_summary(0)
    few, _, _ = _synthetic_window(4, 1, "world", collectives=2, window_s=1.0, seed=5)
    many, _, _ = _synthetic_window(16, 4, "world", collectives=400, window_s=20.0, seed=1)
    more, _, _ = _synthetic_window(128, 8, "world", collectives=400, window_s=20.0, seed=1)
    ests = tuple(estimate_clocks(w, run=f"synthetic/{n}", window="steps 1-9") for n, w in (("few", few), ("many", many), ("more", more)))
    s = replace(plain, clocks=ests)
    table = _unwrapped(renderer("table").render(s))
    assert re.search(r"clocks of \S*synthetic/few steps 1-9: cannot estimate the offsets between ranks \(too few collectives", table)
    (line,) = [x for x in table.splitlines() if "synthetic/many" in x]
    groups = _listed(line)
    assert sorted(sum(groups, [])) == list(range(1, 16)) and "more" not in line
    for host in range(1, 4):  # (host 0 holds the reference: its ranks' offsets are near 0, each its own)
        assert any(set(range(4 * host, 4 * host + 4)) <= set(g) for g in groups), (host, groups)
    (line,) = [x for x in table.splitlines() if "synthetic/more" in x]
    listed = _listed(line)
    rest = int(re.search(r"and (\d+) more", line).group(1))
    assert len(listed) == LISTED and rest > 0 and len(sum(listed, [])) + rest == 127
    md = renderer("markdown").render(s)
    assert "cannot estimate" in md and len(re.findall(r"^\|\s+\d+ \|", md[md.find("synthetic/many"):md.find("synthetic/more")], re.M)) == 16


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.lists(st.tuples(st.integers(0, 11), st.integers(0, 15)), max_size=40))
def test_the_ranks_tied_to_the_reference_are_its_component(n, rows) -> None:
    """SYNTHETIC memberships (rank index, collective): the ranks ``_connected`` ties to rank 0 are those a search over
    shared collectives reaches from it (its definition), however the collectives chain the ranks."""
    from traceprobe.analysis.job.clocks import _connected

    rows = [(r % n, c) for r, c in rows] or [(0, 0)]
    rank_idx, coll = np.array([r for r, _ in rows]), np.array([c for _, c in rows])
    reached, todo = {0}, [0]
    while todo:
        r = todo.pop()
        for c in {c for q, c in rows if q == r}:
            for q in {q for q, d in rows if d == c} - reached:
                reached.add(q)
                todo.append(q)
    assert np.flatnonzero(_connected(rank_idx, coll, n)).tolist() == sorted(reached)


def test_a_chain_of_ranks_is_tied_to_the_reference() -> None:
    """4,096 ranks joined pair by pair (rank k with k + 1: a pipeline's point-to-point only), and the same chain with
    its last link missing: every rank tied to rank 0, then every rank but the last (label propagation alone took 4,096
    rounds over every row here: 2.8 s, against 2.4 ms with pointer jumping, measured once; no timing is asserted)."""
    from traceprobe.analysis.job.clocks import _connected

    k = np.arange(4095)
    rank_idx, coll = np.concatenate([k, k + 1]), np.concatenate([k, k])
    assert _connected(rank_idx, coll, 4096).all()
    cut = coll != 4094
    assert np.flatnonzero(~_connected(rank_idx[cut], coll[cut], 4096)).tolist() == [4095]
