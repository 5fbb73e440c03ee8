"""Clocks across hosts: each rank's clock offset and drift, estimated from the collectives it took part in.

Ranks on several hosts stamp their events with their own host's clock; skew, wait and a merged timeline
compare those stamps as they are (:mod:`.collectives`). This module estimates how far each rank's clock
is from the reference rank's (the lowest rank of the window), with an uncertainty, and says when the data
cannot support an estimate.

Definitions (quoted by docs/measures.md):

- *evidence*: the matched collectives of a window (:func:`.collectives.match_window`) in which every rank
  sends and receives (all-reduce, all-gather, reduce-scatter, all-to-all): their kernels end nearly
  together on every rank of the group, as the last data arrives everywhere at once. Broadcast, reduce and
  point-to-point kernels are not used (a root or a sender ends early).
- *clock model*: rank r's clock reads x_r(t) = a_r + b_r (t - t_m) ahead of the reference's, where t is
  the rank's own timestamp and t_m the middle of the window's evidence as stamped. a_r is the
  *offset* (``offset_ns``, at t_m), b_r the *drift* (``drift_ppm``, 1 ppm = 1 µs per s).
- *fit*: least squares over every kernel end e_{r,c} = E_c + x_r(t) + noise, with one unknown end time E_c
  per collective (so ranks of different process groups are tied through the groups they share), solved by
  alternating between E_c and each rank's line (exact at convergence); ends more than
  max(6 x the residuals' robust spread, :data:`END_TOLERANCE_NS`) from the fit are then left out and the fit
  repeated. A rank's drift is fitted only from :data:`MIN_DRIFT` ends spread over at least
  :data:`MIN_DRIFT_SPAN` of the window, and kept only where it exceeds its uncertainty; else the rank is fitted
  again with its offset alone (``offset only``: drift 0, its uncertainty the largest drift the data allow). A
  profiler window of a few hundred ms rarely shows a drift: 100 ppm over 300 ms moves the ends by 30 µs, less
  than they scatter.
- *uncertainty* (``uncertainty_ns``) of a rank's offset: 3 standard errors of the fitted offsets of the rank
  and of the reference (from the residuals), plus :data:`END_TOLERANCE_NS`: how far apart kernel ends of
  one collective lie on ranks that share a clock, which no fit can tell from an offset.
  ``drift_uncertainty_ppm``: 3 standard errors of the fitted drift, plus the slope 2 x :data:`END_TOLERANCE_NS`
  over the time the rank's ends span; for an offset-only rank, add the drift it fitted. An offset-only rank's
  offset holds at the mean time of its ends: its uncertainty adds that bound times their distance to t_m.
- *supported*: every rank has at least :data:`MIN_COLLECTIVES` usable collectives tying it, through its
  process groups, to the reference; fewer than a third of the ends were left out as outliers; the ends once
  corrected scatter by at most :data:`MAX_SPREAD_NS`; and after
  correction no more than :data:`MAX_IMPLAUSIBLE` of the collectives end on one rank before they start on
  another by more than the uncertainty. Otherwise ``reason`` says which failed and no offset is applied.
- *differ*: supported, and some rank's \\|offset\\| exceeds its uncertainty: the clocks differ by more than
  the data can blur. Only then is a correction applied (:func:`aligned_tables`), when asked for.
- *correction* of a rank's timestamp t: t - x_r(t), which puts it on the reference rank's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from .collectives import _ALL_TO_ALL_TYPES

END_TOLERANCE_NS = 50_000
"""How far apart the kernel ends of one collective may lie on ranks that share a clock (50 µs). Measured on
the 2-rank recordings of one host in ``sample_traces/``: the median gap between the two ranks' ends is
-18 to +18 µs (data-parallel.ddp -17.6, causes/ddp-compute +18.4, training/tb-fsdp +15.1, tb-ddp +11.3 µs),
constant over the window: NCCL's last step and each process's GPU-to-host clock conversion, which no fit can
tell apart from a clock offset."""
MIN_COLLECTIVES = 3
"""Fewest usable collectives a rank needs for an offset."""
MIN_DRIFT = 8
"""Fewest usable collectives a rank needs for a drift..."""
MIN_DRIFT_SPAN = 0.25
"""...spread over at least this share of the window's evidence."""
MAX_IMPLAUSIBLE = 0.1
"""Largest share of collectives that may still end on one rank before starting on another once corrected."""
MAX_SPREAD_NS = 4 * END_TOLERANCE_NS
"""Largest robust spread of the corrected ends (1.4826 x median absolute residual) of a supported estimate (200 µs;
the recordings of ``sample_traces/`` scatter by 1 to 12 µs)."""
_MAX_ITER = 500

COLUMNS = ["rank", "offset_ns", "uncertainty_ns", "drift_ppm", "drift_uncertainty_ppm", "collectives", "status"]


@dataclass(frozen=True)
class ClockEstimate:
    """Each rank's clock against the reference rank's, over one window (module docstring).

    Attributes:
        run, window: labels.
        reference: the rank whose clock the others are measured against (the lowest), -1 without ranks.
        mid_ns: t_m, the middle of the evidence as stamped (ns).
        ranks: one row per rank: ``rank`` (int64), ``offset_ns`` (int64, a_r: the rank's clock minus the
            reference's at ``mid_ns``), ``uncertainty_ns`` (int64), ``drift_ppm``,
            ``drift_uncertainty_ppm`` (float64), ``collectives`` (int64, ends used), ``status`` (str:
            ``reference``, ``offset and drift``, ``offset only``, ``too few collectives``).
        supported: whether the data support the estimate (module docstring).
        differ: supported, and some rank's \\|offset\\| exceeds its uncertainty.
        reason: why the estimate is not supported ("" when it is).
        spread_ns: robust spread (1.4826 x median absolute residual) of the kernel ends once corrected.
        outliers: ends left out of the fit.
    """

    run: str
    window: str
    reference: int
    mid_ns: int
    ranks: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    supported: bool = False
    differ: bool = False
    reason: str = ""
    spread_ns: int = 0
    outliers: int = 0

    def line(self, rank: int) -> tuple[float, float]:
        """``(a_r, b_r)`` of ``rank``: offset in ns and drift in ns per ns; (0, 0) for a rank without an estimate."""
        return self._lines.get(int(rank), (0.0, 0.0))

    @cached_property
    def _lines(self) -> dict[int, tuple[float, float]]:
        r = self.ranks
        return {int(k): (float(a), float(b) * 1e-6) for k, a, b in zip(r["rank"].tolist(), r["offset_ns"].tolist(), r["drift_ppm"].tolist())}

    def correction_ns(self, rank: int, t_ns: np.ndarray) -> np.ndarray:
        """x_r(t) for the rank's own timestamps ``t_ns`` (int64 ns): what to subtract to read them on the reference clock."""
        a, b = self.line(rank)
        t = np.asarray(t_ns, dtype=np.int64)
        return np.rint(a + b * (t - self.mid_ns).astype(np.float64)).astype(np.int64)

    def describe(self) -> str:
        """One line for a person: the largest offset and its uncertainty, or why there is no estimate."""
        if not self.supported:
            return f"clock offsets not estimated: {self.reason}"
        est = pd.DataFrame(self.ranks[self.ranks["rank"] != self.reference])
        if est.empty:
            return "clock offsets: one rank only"
        i = int(np.argmax(np.abs(est["offset_ns"].to_numpy())))
        row = est.iloc[i]
        what = "clocks differ" if self.differ else "clocks agree within the uncertainty"
        return (f"{what}: rank {int(row['rank'])} is {int(row['offset_ns']) / 1e3:+,.1f} ± {int(row['uncertainty_ns']) / 1e3:,.1f} µs "
                f"from rank {self.reference} (largest of {len(est)}, from collective ends)")


def _unsupported(run: str, window: str, ranks: list[int], reason: str, counts: dict[int, int] | None = None) -> ClockEstimate:
    counts = counts or {}
    df = pd.DataFrame({"rank": np.array(ranks, np.int64), "offset_ns": np.zeros(len(ranks), np.int64),
                       "uncertainty_ns": np.zeros(len(ranks), np.int64), "drift_ppm": np.zeros(len(ranks)),
                       "drift_uncertainty_ppm": np.zeros(len(ranks)),
                       "collectives": np.array([counts.get(r, 0) for r in ranks], np.int64),
                       "status": ["reference" if i == 0 else "too few collectives" for i in range(len(ranks))]})
    return ClockEstimate(run, window, ranks[0] if ranks else -1, 0, df, False, False, reason)


def _connected(rank_idx: np.ndarray, coll: np.ndarray, n_ranks: int) -> np.ndarray:
    """Which ranks the collectives tie to rank index 0 (the reference), by label propagation over shared collectives:
    each rank takes the least label of the ranks it shares a collective with, then every label its own label's label
    until none changes (pointer jumping: a chain of n ranks joined pair by pair takes O(log n) rounds of it, where
    propagation alone took n rounds over every row: 2.8 s at 4,096 ranks of 20 collectives a pair, quadratic)."""
    label = np.arange(n_ranks)
    for _ in range(n_ranks + 1):
        per_coll = np.full(int(coll.max()) + 1, n_ranks)
        np.minimum.at(per_coll, coll, label[rank_idx])
        new = label.copy()
        np.minimum.at(new, rank_idx, per_coll[coll])
        while not np.array_equal(jumped := new[new], new):  # (a label is a rank of its component, at most the rank itself)
            new = jumped
        if np.array_equal(new, label):
            break
        label = new
    return label == 0


def estimate_clocks(per_rank: pd.DataFrame, ranks: tuple[int, ...] | list[int] | None = None, run: str = "", window: str = "") -> ClockEstimate:
    """Each rank's clock offset and drift against the lowest rank's, from one window's matched collectives (module docstring).

    Args:
        per_rank: :attr:`.collectives.WindowCollectives.per_rank` (``pg``, ``seq``, ``rank``, ``start_ns``,
            ``end_ns``, ``collective``), each rank's times on its own clock.
        ranks: the window's ranks (default: those in ``per_rank``).
        run, window: labels carried into the result.

    Returns:
        a :class:`ClockEstimate`; ``supported`` False (with ``reason``) where the data cannot support one.
    """
    all_ranks = sorted(int(r) for r in (ranks if ranks is not None else (per_rank["rank"].unique() if len(per_rank) else [])))
    if len(all_ranks) < 2:
        return _unsupported(run, window, all_ranks, "fewer than two ranks")
    pr = pd.DataFrame(per_rank[per_rank["collective"].isin(_ALL_TO_ALL_TYPES)]) if len(per_rank) else per_rank
    if pr.empty:
        return _unsupported(run, window, all_ranks, "no matched all-reduce, all-gather, reduce-scatter or all-to-all")
    rank_idx = np.searchsorted(np.array(all_ranks, np.int64), pr["rank"].to_numpy(np.int64))
    coll = pr.groupby(["pg", "seq"], sort=False).ngroup().to_numpy(np.int64)
    end = pr["end_ns"].to_numpy(np.int64)
    start = pr["start_ns"].to_numpy(np.int64)
    R, C = len(all_ranks), int(coll.max()) + 1
    ref_ends = end[rank_idx == 0]
    base = int(np.median(ref_ends)) if ref_ends.size else int(np.median(end))
    lo_t, hi_t = int(end.min()), int(end.max())
    mid = (lo_t + hi_t) // 2
    span = max(hi_t - lo_t, 1)
    y = (end - base).astype(np.float64)
    u = (end - mid).astype(np.float64) * 1e-9  # seconds from the middle, on the rank's own clock
    w = np.ones(y.size)
    allow = np.ones(R, bool)
    a, b, drift_ok = _fit(rank_idx, coll, y, u, w, R, C, span, allow)
    res = _residuals(rank_idx, coll, y, u, w, a, b, C)
    scale = 1.4826 * float(np.median(np.abs(res))) if res.size else 0.0
    keep = np.abs(res) <= max(6 * scale, END_TOLERANCE_NS)
    outliers = int((~keep).sum())
    if outliers:
        w = keep.astype(np.float64)
        a, b, drift_ok = _fit(rank_idx, coll, y, u, w, R, C, span, allow)
    # a drift is kept only where it exceeds its uncertainty (3 standard errors, plus the slope the ends' tolerance
    # allows over the rank's evidence); elsewhere the rank is fitted again with its offset alone
    se_a, se_b, ubar, used = _errors(rank_idx, coll, y, u, w, a, b, C, R, drift_ok)
    floor_b = 2 * END_TOLERANCE_NS / np.maximum(_spans(rank_idx, u, w, R), 1e-9)  # ns per s: u is in s
    unc_b = 3 * np.sqrt(se_b**2 + se_b[0] ** 2) + floor_b
    significant = drift_ok & (np.abs(b) > unc_b)
    bound_b = np.where(significant, unc_b, np.abs(b) + unc_b)  # without a drift: the largest the data allow
    if not np.array_equal(significant, drift_ok):
        a, b, drift_ok = _fit(rank_idx, coll, y, u, w, R, C, span, significant)
        se_a, se_b, ubar, used = _errors(rank_idx, coll, y, u, w, a, b, C, R, drift_ok)
        unc_b = np.where(drift_ok, 3 * np.sqrt(se_b**2 + se_b[0] ** 2) + floor_b, bound_b)
    res = _residuals(rank_idx, coll, y, u, w, a, b, C)
    counts = {r: int(n) for r, n in zip(all_ranks, used)}
    connected = _connected(rank_idx[w > 0], coll[w > 0], R) if (w > 0).any() else np.arange(R) == 0
    if outliers * 3 > y.size:
        return _unsupported(run, window, all_ranks, f"inconsistent: {outliers} of {y.size} collective ends lie far from any clock line", counts)
    short = [r for i, r in enumerate(all_ranks) if used[i] < MIN_COLLECTIVES or not connected[i]]
    if short:
        shown = ", ".join(map(str, short[:8])) + (" ..." if len(short) > 8 else "")
        return _unsupported(run, window, all_ranks, f"too few collectives: rank(s) {shown} have fewer than {MIN_COLLECTIVES} "
                            "all-reduce/all-gather/reduce-scatter/all-to-all tied to the other ranks", counts)
    # an offset-only rank's offset holds at its evidence's mean time: a drift within its bound moves it by bound x |mean - t_m|
    unc = 3 * np.sqrt(se_a**2 + se_a[0] ** 2) + END_TOLERANCE_NS + np.where(drift_ok, 0.0, bound_b * np.abs(ubar))
    ww = w > 0
    status = np.where(drift_ok, "offset and drift", "offset only").astype(object)
    status[0] = "reference"
    unc[0], unc_b[0] = 0.0, 0.0
    df = pd.DataFrame({"rank": np.array(all_ranks, np.int64), "offset_ns": np.rint(a).astype(np.int64),
                       "uncertainty_ns": np.rint(unc).astype(np.int64), "drift_ppm": b / 1e3, "drift_uncertainty_ppm": unc_b / 1e3,
                       "collectives": used, "status": status})
    spread = int(1.4826 * np.median(np.abs(res[ww]))) if ww.any() else 0
    # after correction, does any collective still end on one rank before it starts on another by more than the uncertainty?
    corr = np.rint(a[rank_idx] + b[rank_idx] * 1e-9 * (end - mid).astype(np.float64)).astype(np.int64)
    s2, e2 = start - corr, end - corr
    last_start = np.full(C, np.iinfo(np.int64).min)
    np.maximum.at(last_start, coll, s2)
    first_end = np.full(C, np.iinfo(np.int64).max)
    np.minimum.at(first_end, coll, e2)
    bad = int((last_start - first_end > int(unc.max())).sum())
    est = ClockEstimate(run, window, all_ranks[0], mid - int(np.rint(a[0])), df, True, False, "", spread, outliers)
    if spread > MAX_SPREAD_NS:
        return _unsupported(run, window, all_ranks, f"inconsistent: the collectives' ends scatter by {spread / 1e3:,.0f} µs once "
                            "corrected, more than one clock per rank explains", counts)
    if bad > MAX_IMPLAUSIBLE * C:
        return _unsupported(run, window, all_ranks, f"inconsistent: once corrected, {bad} of {C} collectives still end on one rank "
                            "before they start on another", counts)
    differ = bool((np.abs(a[1:]) > unc[1:]).any())
    return ClockEstimate(est.run, est.window, est.reference, est.mid_ns, df, True, differ, "", spread, outliers)


def _residuals(rank_idx: np.ndarray, coll: np.ndarray, y: np.ndarray, u: np.ndarray, w: np.ndarray,
               a: np.ndarray, b: np.ndarray, C: int) -> np.ndarray:
    x = a[rank_idx] + b[rank_idx] * u
    wsum = np.bincount(coll, weights=w, minlength=C)
    e = np.bincount(coll, weights=w * (y - x), minlength=C) / np.maximum(wsum, 1e-300)
    return y - e[coll] - x


def _spans(rank_idx: np.ndarray, u: np.ndarray, w: np.ndarray, R: int) -> np.ndarray:
    """Per rank, the time its used ends span (s)."""
    lo, hi = np.full(R, np.inf), np.full(R, -np.inf)
    sel = w > 0
    np.minimum.at(lo, rank_idx[sel], u[sel])
    np.maximum.at(hi, rank_idx[sel], u[sel])
    return np.where(np.isfinite(hi - lo), hi - lo, 0.0)


def _errors(rank_idx: np.ndarray, coll: np.ndarray, y: np.ndarray, u: np.ndarray, w: np.ndarray, a: np.ndarray, b: np.ndarray,
            C: int, R: int, drift_ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Standard errors of each rank's offset (ns) and drift (ns per s) from its residuals; its mean u; its ends used."""
    res = _residuals(rank_idx, coll, y, u, w, a, b, C)
    ww = w > 0
    used = np.bincount(rank_idx[ww], minlength=R).astype(np.int64)
    n = np.maximum(used, 1).astype(np.float64)
    sq = np.bincount(rank_idx[ww], weights=res[ww] ** 2, minlength=R)
    sigma = np.sqrt(sq / np.maximum(n - np.where(drift_ok, 2, 1), 1))
    ubar = np.bincount(rank_idx[ww], weights=u[ww], minlength=R) / n
    sxx = np.maximum(np.bincount(rank_idx[ww], weights=u[ww] ** 2, minlength=R) - n * ubar**2, 1e-30)
    se_a = np.where(drift_ok, sigma * np.sqrt(1 / n + ubar**2 / sxx), sigma / np.sqrt(n))
    se_b = sigma / np.sqrt(sxx)
    return se_a, se_b, ubar, used


def _fit(rank_idx: np.ndarray, coll: np.ndarray, y: np.ndarray, u: np.ndarray, w: np.ndarray, R: int, C: int,
         span: int, allow: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of y = E_c + a_r + b_r u by alternating over the E_c and the ranks' lines; rank index 0 is held at 0.
    A drift is fitted for the ranks ``allow`` names that have enough ends spread over the window."""
    n = np.bincount(rank_idx, weights=w, minlength=R)
    su = np.bincount(rank_idx, weights=w * u, minlength=R)
    suu = np.bincount(rank_idx, weights=w * u * u, minlength=R)
    sxx = suu - np.where(n > 0, su**2 / np.maximum(n, 1e-300), 0)
    # a rank's drift only from enough ends spread over the window
    drift_ok = allow & (n >= MIN_DRIFT) & (_spans(rank_idx, u, w, R) * 1e9 >= MIN_DRIFT_SPAN * span) & (sxx > 0)
    a, b = np.zeros(R), np.zeros(R)
    wsum = np.bincount(coll, weights=w, minlength=C)
    for _ in range(_MAX_ITER):
        x = a[rank_idx] + b[rank_idx] * u
        e = np.bincount(coll, weights=w * (y - x), minlength=C) / np.maximum(wsum, 1e-300)
        r = y - e[coll]
        sy = np.bincount(rank_idx, weights=w * r, minlength=R)
        suy = np.bincount(rank_idx, weights=w * u * r, minlength=R)
        nb = np.where(drift_ok, (suy - su * sy / np.maximum(n, 1e-300)) / np.where(sxx > 0, sxx, 1.0), 0.0)
        na = (sy - nb * su) / np.maximum(n, 1e-300)
        na, nb = na - na[0], nb - nb[0]
        done = np.max(np.abs(na - a)) < 0.5 and np.max(np.abs(nb - b)) * span * 1e-9 < 0.5
        a, b = na, nb
        if done:
            break
    return a, b, drift_ok


def shift_times(df: pd.DataFrame, est: ClockEstimate, rank: int, columns: tuple[str, ...] = ("start_ns", "end_ns")) -> pd.DataFrame:
    """``df`` with its ``columns`` (one rank's int64 ns timestamps) read on the reference clock: t - x_r(t) (module docstring)."""
    if df is None or df.empty:
        return df
    out = df.copy()
    for c in columns:
        if c in out:
            t = out[c].to_numpy(np.int64)
            out[c] = t - est.correction_ns(rank, t)
    return out


def aligned_tables(tables: dict[int, pd.DataFrame], est: ClockEstimate) -> dict[int, pd.DataFrame]:
    """Each rank's collective table (:func:`.collectives.collective_table`) on the reference clock, when the estimate
    says the clocks differ (``est.differ``); the tables as they are otherwise."""
    if not est.differ:
        return tables
    return {r: shift_times(t, est, r) for r, t in tables.items()}
