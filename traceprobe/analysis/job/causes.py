"""Causes across ranks: who waited for whom in collectives, for how long, and why the late rank was late.

Definitions (quoted by docs/measures.md). Within one profiler window of a run, with
the collectives matched across ranks (:func:`.collectives.match_window`):

- *wait* of a rank in a collective: from its kernel's start to the last rank's
  arrival (the latest start), clipped to the kernel: min(end, latest start) -
  start. The rest of the kernel is *transfer*. The wait is charged to the *late
  rank* (the one that started last). It is computed once, by
  :func:`..causal.contention.wait_spans` (in :func:`.collectives.match_window`), the function the dependency
  graph's replay reads: the part of a member's kernel before the critical path crosses into the late rank. TraceLens's NCCL analyser and NCCL's own
  docs call the same split "skew" and "time".
- *exposed wait* of rank r for late rank L: the part of r's exposed collective
  communication ((M \\ M_p2p) \\ C, :func:`.findings.exposed_collective_spans`)
  that lies inside r's waits charged to L. *Exposed transfer*: the rest of r's
  exposed collective communication, what overlap can hide.
- *straggler*: the rank charged the most wait, when the largest exposed wait it
  caused on another rank is above :data:`NOISE_SHARE` of the window and
  :data:`NOISE_MIN_NS` per step; else no straggler is named.
- *cause* of the straggler: where the window was replayed (:mod:`..causal.what_if`), the cause whose removal on the
  straggler alone gives back the most time, above the window's noise floor (its what-if: the critical path's answer,
  as the first screen gives it); its figure is that gain per step. Elsewhere (no graph, a window too large to replay,
  no cause of the straggler above the floor) the part of its *blame* below with the largest excess.
- *blame*: what the straggler's device did that the other ranks' did not, step
  by step (each step's device interval, :mod:`.steps`): per step, its device
  compute, other device work alone, and idle time by cause (:mod:`.idle_causes`),
  minus the median of the other ranks in that step. The part whose excess,
  summed over the window's steps, is largest is the *cause*; its per-step figure
  is the median over the steps (a window's first step often holds only part of
  it). For compute, the excess is counted kernel by kernel: the sum, over kernel
  names, of the straggler's time beyond the other ranks' median, where positive
  (the waiting ranks' kernels run slower beside their spinning collectives, which
  would hide part of the extra work in a difference of totals), per step over the
  window's steps; the kernels with the largest excess are named. Without steps
  the window is one step.

- *blame path*: which rank and which cause bound each step. Where the window was replayed, the replay's: per step,
  the first what-if of one rank, in the what-if table's order, that gives back at least the window's noise floor
  per step in that step (:meth:`..causal.what_if_windows.WindowWhatIf.step_tops`), with that gain and the exposed wait
  the rank caused in the step. Elsewhere, measured: per step (each rank's step GPU interval, :mod:`.steps`), the late
  rank that caused the largest exposed wait on one other rank in that step, and the part in which it most exceeded
  the other ranks' median in that step.

HTA's critical-path analysis follows one rank's dependency graph; we compare the
ranks' device time between collectives instead, which needs no call stacks and
works on any trace with matched collectives. Headroom is claimed once: the waiting
ranks' findings hold the wait (exposed wait, on their own timelines), the
straggler's finding holds its own excess time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..advice.findings import MIN_SHARE, findings_frame, short_label
from ..advice.replayed import with_findings
from ..advice.verdicts import Verdict
from ..advice.verdicts import waited as waited_verdict
from ..causal.what_if_windows import LABELS as WHAT_IF_LABELS
from ..causal.what_if_windows import WindowWhatIf, advice
from ..host.host_classes import LABELS
from ..per_trace import OverlapReport
from .blame import BLAME_COLUMNS, NOISE_MIN_NS, blame_path, replayed_blame
from .cause_tables import PARTS, RANK_TABLES, ExposedSpans, RankTables, pair_codes, rank_columns, rank_tables, step_maxima
from .collectives import WindowCollectives

NOISE_SHARE = 0.02
"""A straggler is named only if the exposed wait it caused on some rank is at least this share of the window and
:data:`.blame.NOISE_MIN_NS` per step."""

WAIT_COLUMNS = ["rank", "pg", "pg_desc", "collective", "count", "wait_ns", "transfer_ns", "exposed_wait_ns", "exposed_transfer_ns"]
EXPOSED_COLUMNS = ["rank", "late_rank", "exposed_wait_ns"]

_PART_WORDS = {"compute": "compute", "other_busy": "other device work", **{c: LABELS[c] for c in LABELS}}


@dataclass(frozen=True)
class WindowCauses:
    """Wait, transfer and blame of one window of a run (module docstring).

    Attributes:
        run, window: labels.
        steps: the window's step count (1 without steps).
        waits: per rank, process group and collective type: ``rank`` (int64),
            ``pg``, ``pg_desc``, ``collective`` (str), ``count``, ``wait_ns``,
            ``transfer_ns`` (int64; kernel time before and after the last arrival),
            ``exposed_wait_ns``, ``exposed_transfer_ns`` (int64; the rank's exposed
            collective time inside those waits and transfers).
        exposed: per waiting rank and late rank: ``rank``, ``late_rank``,
            ``exposed_wait_ns`` (int64).
        exposed_transfer_ns: per rank, exposed collective time that is no wait.
        straggler: the rank the others waited for (None: none above noise).
        cause: the straggler's cause (module docstring): a what-if cause (:data:`..causal.what_if_windows.LABELS`)
            where ``gain_ns`` > 0, else the part of :data:`.collectives.PRE_PARTS` it had most in excess ("" without
            straggler).
        gain_ns, gain_per_step_ns: what removing that cause on the straggler gives back (its what-if), int ns; 0 where
            the cause is its excess.
        excess_ns: per part of :data:`PARTS`, the straggler's excess over the other ranks' median, summed over the steps.
        excess_per_step_ns: the same, the median over the window's steps.
        caused_wait_ns: the largest exposed wait the straggler caused on one rank.
        kernels: for a compute cause, the kernel names with the largest excess on the straggler.
        label, text: the window's finding, short and long ("" without straggler).
        blame: the blame path, one row per step of the window: ``step`` (int64),
            ``rank`` (int64: replayed, the rank whose what-if bound the step; measured, the rank whose lateness caused
            the most exposed wait on another rank in that step; -1 where none was above the floor), ``cause`` (str:
            replayed, a what-if cause; measured, its part of :data:`PARTS` with the largest excess in that step; ``""``
            where none reaches the floor), ``excess_ns`` (int64: replayed, the gain in that step; measured, that
            excess) and ``wait_ns`` (int64, the largest exposed wait it caused on one rank in the step).
    """

    run: str
    window: str
    steps: int
    waits: pd.DataFrame
    exposed: pd.DataFrame
    exposed_transfer_ns: dict[int, int]
    straggler: int | None = None
    cause: str = ""
    excess_ns: dict[str, int] = field(default_factory=dict)
    excess_per_step_ns: dict[str, int] = field(default_factory=dict)
    caused_wait_ns: int = 0
    kernels: tuple[str, ...] = ()
    label: str = ""
    text: str = ""
    gain_ns: int = 0
    gain_per_step_ns: int = 0
    blame: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({c: np.zeros(0, np.int64) for c in BLAME_COLUMNS}))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def report_tables(reports: Mapping[int, OverlapReport]) -> RankTables:
    """The :class:`.cause_tables.RankTables` of reports by rank, in their order."""
    return rank_tables([rank_columns(r, rep.window_ns, {n: getattr(rep, n) for n in RANK_TABLES}) for r, rep in reports.items()])


def _excess(t: RankTables, late: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per part of :data:`PARTS`: the late rank's excess over the other ranks' median (a rank without the step
    counts 0), summed over the late rank's steps, and its median over the steps (the per-step figure)."""
    p = t.parts
    is_late = p["rank"].to_numpy(np.int64) == late
    mine = pd.DataFrame(p[is_late])
    others = t.ranks[t.ranks != late]
    if mine.empty or not others.size:
        return {}, {}
    steps = mine["step"].to_numpy(np.int64)
    o = pd.DataFrame(p[~is_late & p["step"].isin(steps).to_numpy()])
    ri = np.searchsorted(np.sort(others), o["rank"].to_numpy(np.int64))
    si = np.searchsorted(steps, o["step"].to_numpy(np.int64))
    diff = np.empty((steps.size, len(PARTS)))
    for j, part in enumerate(PARTS):  # (ranks x steps) per part, 0 where a rank lacks the step
        grid = np.zeros((others.size, steps.size))
        grid[ri, si] = o[part].to_numpy(np.float64)
        diff[:, j] = mine[part].to_numpy(np.float64) - np.median(grid, axis=0)
    return ({p: float(diff[:, i].sum()) for i, p in enumerate(PARTS)},
            {p: float(np.median(diff[:, i])) for i, p in enumerate(PARTS)})


def _kernel_excess(t: RankTables, late: int, top: int = 2) -> tuple[tuple[str, ...], int]:
    """The kernels ``late`` spent more time in than the other ranks' median (a rank without the kernel counts 0):
    the ``top`` names with the largest excess, and the sum of every kernel's positive excess (ns). Communication
    kernels are left out (their time on the waiting ranks is the wait). Kernels the other ranks spent longer in
    (slowed beside their spinning collectives) do not offset it."""
    k = t.kernels
    is_late = k["rank"].to_numpy(np.int64) == late
    mine: pd.Series = k[is_late].groupby("name")["total_ns"].sum()  # type: ignore[assignment]
    others = np.sort(t.ranks[t.ranks != late])
    if mine.empty or not others.size:
        return (), 0
    o = k[~is_late & k["name"].isin(mine.index).to_numpy()]
    o = o.groupby(["rank", "name"], sort=False)["total_ns"].sum().reset_index()
    grid = np.zeros((others.size, len(mine)))
    grid[np.searchsorted(others, o["rank"].to_numpy(np.int64)), mine.index.get_indexer(o["name"])] = o["total_ns"].to_numpy(np.float64)
    diff = (mine - pd.Series(np.median(grid, axis=0), index=mine.index)).sort_values(ascending=False)
    return tuple(str(n) for n, v in diff.head(top).items() if v > 0), int(diff.clip(lower=0).sum())


def window_causes(wc: WindowCollectives, reports: Mapping[int, OverlapReport] | RankTables, steps: int = 1,
                  what_if: WindowWhatIf | None = None) -> WindowCauses:
    """Wait, transfer, straggler and blame of one window (module docstring), for every rank at once.

    Args:
        wc: the window's matched collectives.
        reports: the window's report of each rank, or what the causes read of them (:mod:`.cause_tables`: from
            summary files, with no report built).
        steps: the window's step count, for per-step figures.
        what_if: the window's what-ifs (its ranks replayed together), which name the straggler's cause; None where
            it was not replayed.

    Returns:
        a :class:`WindowCauses`.
    """
    t = reports if isinstance(reports, RankTables) else report_tables(reports)
    pr, matches = wc.per_rank, wc.matches
    steps = max(int(steps), 1)
    if pr.empty:
        empty = pd.DataFrame({c: pd.Series([], dtype=object if c in ("pg", "pg_desc", "collective") else np.int64) for c in WAIT_COLUMNS})
        return WindowCauses(wc.run, wc.window, steps, empty, pd.DataFrame({c: np.zeros(0, np.int64) for c in EXPOSED_COLUMNS}), {})
    pr = pr.merge(matches[["pg", "seq", "last_rank"]], on=["pg", "seq"])
    pr = pr.assign(transfer_ns=pr["duration_ns"] - pr["wait_ns"], count=1)
    if "pg_desc" not in pr:
        pr["pg_desc"] = ""
    if "collective" not in pr:
        pr["collective"] = "other"
    keys = ["rank", "pg", "pg_desc", "collective"]
    grouped = pr.groupby(keys, sort=True)
    summed = pd.DataFrame(grouped[["count", "wait_ns", "transfer_ns"]].sum())
    waits = summed.reset_index().astype({"rank": np.int64, "count": np.int64, "wait_ns": np.int64, "transfer_ns": np.int64})
    # each kernel's wait [start, mid) and transfer [mid, end)
    rank = pr["rank"].to_numpy(dtype=np.int64, na_value=-1)
    late = pr["last_rank"].to_numpy(np.int64)
    s, e = pr["start_ns"].to_numpy(np.int64), pr["end_ns"].to_numpy(np.int64)
    mid = np.minimum(e, s + pr["wait_ns"].to_numpy(np.int64))
    spans = ExposedSpans(t)
    row = grouped.ngroup().fillna(-1).to_numpy(np.int64)  # the kernel's row of ``waits`` (-1: a key missing)
    ok = row >= 0
    wrank = waits["rank"].to_numpy(np.int64)
    ew = spans.inside(row[ok], wrank, s[ok], mid[ok])[0]
    et = spans.inside(row[ok], wrank, mid[ok], e[ok])[0]
    waits = waits.assign(exposed_wait_ns=ew, exposed_transfer_ns=et)
    # exposed wait per rank and late rank, in the reports' order, then by late rank
    sel = np.isin(rank, t.ranks) & (late != rank)
    pairs, code = pair_codes(rank[sel], late[sel])
    ns, grp, ps, pe = spans.inside(code, pairs[:, 0], s[sel], mid[sel])
    by_rank = np.argsort(t.ranks, kind="stable")
    pos = by_rank[np.searchsorted(t.ranks, pairs[:, 0], sorter=by_rank)]  # each pair's rank's place in the reports
    rows = np.argsort(pos, kind="stable")
    exposed = pd.DataFrame({"rank": pairs[rows, 0], "late_rank": pairs[rows, 1], "exposed_wait_ns": ns[rows]}, columns=EXPOSED_COLUMNS).astype(np.int64)
    claimed = np.zeros(t.ranks.size, np.int64)  # per rank, in the reports' order
    np.add.at(claimed, pos, ns)
    transfer = {r: spans.total.get(r, 0) - c for r, c in zip(t.ranks.tolist(), claimed.tolist())}
    by_step = step_maxima(t, pairs[grp, 0], pairs[grp, 1], ps, pe)
    st = t.steps[["rank", "step"]].to_numpy(np.int64)
    present = np.unique(st[np.isin(st[:, 0], pairs[:, 0]), 1])  # the steps of the ranks that waited
    blame = blame_path(by_step, present, t)
    if what_if is not None and not what_if.by_step.empty:  # (which rank and cause bound each step: the replay's answer)
        blame = replayed_blame(blame, by_step, what_if)
    out = WindowCauses(wc.run, wc.window, steps, waits, exposed, transfer, blame=blame)
    if exposed.empty:
        return out
    by_late = exposed.groupby("late_rank")["exposed_wait_ns"].max()
    window_ns = int(t.window_ns.max(initial=0))
    above = by_late[(by_late >= NOISE_SHARE * window_ns) & (by_late >= NOISE_MIN_NS * steps)]
    if above.empty:
        return out
    late_rank, top = straggler_of(above, what_if)
    out = _straggler(out, t, late_rank, int(by_late[late_rank]))
    return _replayed(out, top, what_if.steps if what_if is not None else 0) if top is not None and what_if is not None else out


def straggler_of(caused: pd.Series, what_if: WindowWhatIf | None) -> tuple[int, dict | None]:
    """The window's straggler among the ranks others waited for (``caused``: per late rank, the most exposed wait it
    caused on one rank, ns, each above the noise floor) and its own top what-if (None without one).

    Where the window was replayed, the straggler is the late rank whose own cause gives back most when removed (its
    :meth:`.WindowWhatIf.rank_top`): the replay's answer, the same rank its what-ifs and critical path name; a rank that
    arrived last only because another made it late (waiting for it at an earlier collective) gives back little on its
    own. Ties, and windows without a replay or where no late rank has a cause above the noise floor, go to the rank that
    caused the most exposed wait (the measured blame)."""
    ranks = [int(r) for r in caused.sort_values(ascending=False, kind="stable").index]
    if what_if is not None:
        tops = [(r, what_if.rank_top(r)) for r in ranks]
        named = [(r, x) for r, x in tops if x is not None]
        if named:
            return max(named, key=lambda rx: int(rx[1]["gain_ns"]))  # (max keeps the first of equals: most wait caused)
    return ranks[0], None


def _replayed(out: WindowCauses, top: dict, steps: int) -> WindowCauses:
    """``out`` with its straggler's cause the what-if ``top`` of that rank (module docstring)."""
    late, cause = out.straggler, str(top["cause"])
    what = WHAT_IF_LABELS.get(cause, cause)
    each, gain = int(top["per_step_ns"]), int(top["gain_ns"])
    fix = advice(cause, str(top["top"]), int(top["steps_with"]), steps)
    label = f"wait for rank {late}: {what} -{_ms(each)}/step"
    text = (f"rank {late} arrived last at its collectives, and the others waited for it, up to {_ms(out.caused_wait_ns / out.steps)} "
            f"per step of exposed wait; removing its {what} would give back {_ms(each)} per step (the job replayed): {fix}; "
            "overlapping communication on the waiting ranks would not help")
    return replace(out, cause=cause, kernels=(), label=label, text=text, gain_ns=gain, gain_per_step_ns=each)


def _straggler(out: WindowCauses, t: RankTables, late: int, caused: int) -> WindowCauses:
    """``out`` with its straggler ``late``, who caused up to ``caused`` ns of exposed wait on one rank, and its cause."""
    steps = out.steps
    excess, per_step = _excess(t, late)
    if not excess:
        return replace(out, straggler=late, caused_wait_ns=caused)
    cause = max(excess, key=lambda p: excess[p])
    kernels: tuple[str, ...] = ()
    if cause == "compute":
        # more compute is counted by kernel: the other ranks' kernels run slower beside their spinning collectives,
        # which would hide part of the straggler's extra work in a difference of totals
        kernels, extra = _kernel_excess(t, late)
        excess["compute"] = max(excess["compute"], float(extra))
        per_step["compute"] = extra / steps
    each = per_step[cause] if per_step[cause] > 0 else excess[cause] / steps
    what = _PART_WORDS.get(cause, cause)
    label = f"wait for rank {late}: +{_ms(each)}/step {what}"
    names = f" ({', '.join(k if len(k) <= 60 else k[:59] + '…' for k in kernels)})" if kernels else ""  # (cut, marked)
    text = (f"rank {late} arrived last at its collectives: it ran +{_ms(each)} per step more {what}{names} than the other ranks "
            f"before arriving; the others waited for it, up to {_ms(caused / steps)} per step of exposed wait. Fix rank {late}'s "
            f"{what}; overlapping communication on the waiting ranks would not help")
    if each < NOISE_MIN_NS:  # no part of its device time explains the lateness
        cause, kernels = "", ()
        label = f"wait for rank {late}"
        text = (f"rank {late} arrived last at its collectives, and the others waited for it, up to {_ms(caused / steps)} per "
                f"step of exposed wait; its device time in this window shows no excess over the other ranks' above "
                f"{_ms(NOISE_MIN_NS)} per step: look at its host time before its first device work and outside the window")
    return replace(out, straggler=late, cause=cause, excess_ns={p: int(v) for p, v in excess.items()},
                   excess_per_step_ns={p: int(v) for p, v in per_step.items()}, caused_wait_ns=caused,
                   kernels=kernels, label=label, text=text)


def _group_advice(waits: pd.DataFrame, rank: int, forward: bool = False) -> str:
    """What to try for exposed transfer, by the process group that holds most of it (``pg_desc``: torch's DeviceMesh names
    its groups ``mesh_<dim>``, e.g. ``mesh_tp``, ``mesh_dp``; ``default_pg`` is the world), or by its all-reduces
    launched in forward (``forward``: :attr:`..per_trace.OverlapReport.forward_allreduce`, tensor parallelism's)."""
    mine = np.flatnonzero(waits["rank"].to_numpy(np.int64) == rank) if "exposed_transfer_ns" in waits else np.zeros(0, np.int64)
    ns = waits["exposed_transfer_ns"].to_numpy(np.int64)[mine] if mine.size else mine
    if not mine.size or int(ns.max()) <= 0:
        return ": overlap the transfer with compute, or reduce what is sent"
    top = int(mine[int(np.argmax(ns))])
    pg, pg_desc, collective = (waits[c].iloc[top] for c in ("pg", "pg_desc", "collective"))
    desc = str(pg_desc).lower()
    where = f" (most in process group {pg!s}{' ' + str(pg_desc) if pg_desc else ''}, {collective})"
    tp = forward and collective == "allreduce" and not desc.startswith("mesh_")  # (a mesh's group says its own dim)
    if "tp" in desc.replace("mesh_", "").split("_") or desc.endswith("tp") or tp:
        return f"{where}: tensor-parallel collectives sit between dependent matmuls; try async tensor parallelism or sequence parallelism"
    if "pp" in desc.replace("mesh_", "").split("_") or desc.endswith("pp"):
        return f"{where}: pipeline hand-offs; use more microbatches or an interleaved schedule"
    return f"{where}: overlap the transfer with compute (bucketed or prefetched collectives), or reduce what is sent"


def with_causes(rep: OverlapReport, rank: int, wcause: WindowCauses) -> OverlapReport:
    """``rep`` with its findings seen across ranks: its ``exposed_comm`` finding split into the exposed wait for each
    late rank (``wait``) and the exposed transfer (``exposed_transfer``); the straggler gets a ``straggler`` finding
    holding its own excess time. Findings under :data:`.findings.MIN_SHARE` of the window are dropped.

    Plain rows, one DataFrame built at the end: this runs once per rank of a window."""
    f = rep.findings
    given: list[tuple] = []
    if f is not None and not f.empty and "label" in f:
        given = list(zip(*(f[c].tolist() for c in f.columns)))
    lo, hi = rep.window_ns
    w = max(hi - lo, 1)
    rows = [r for r in given if r[0] != "exposed_comm"]
    comm = [r for r in given if r[0] == "exposed_comm"]
    subject = str(comm[0][1]) if comm else f"rank {rank}"
    device = int(comm[0][2]) if comm else -1
    ex = wcause.exposed
    mine = ex["rank"].to_numpy(np.int64) == rank
    waited: dict[int, int] = {}
    for late, ns in zip(ex["late_rank"].to_numpy(np.int64)[mine].tolist(), ex["exposed_wait_ns"].to_numpy(np.int64)[mine].tolist()):
        if ns <= 0:
            continue
        waited[late] = ns
        if late == wcause.straggler and wcause.label:
            label, why = wcause.label, wcause.text
        else:
            label, why = f"wait for rank {late}", f"rank {late} arrived last at these collectives; see its own findings"
        rows.append(("wait", subject, device, ns, ns // wcause.steps, f"{label} ({_ms(ns)})",
                      f"{_ms(ns)} ({_ms(ns / wcause.steps)} per step): {subject} waited in collectives for rank {late}: {why}"))
    tr = wcause.exposed_transfer_ns.get(rank, 0)
    if tr > 0 and comm:
        rows.append(("exposed_transfer", subject, device, tr, tr // wcause.steps, short_label("exposed transfer", tr, w),
                     f"{_ms(tr)}: collectives on {subject} moved data with no compute beside them (their waits for late "
                     f"ranks are counted apart){_group_advice(wcause.waits, rank, bool(rep.forward_allreduce))}"))
    if wcause.straggler == rank and wcause.cause and wcause.gain_ns > 0:  # (its what-if: what removing its cause gives back)
        rows.append(("straggler", f"rank {rank}", device if device >= 0 else 0, wcause.gain_ns, wcause.gain_per_step_ns,
                     f"straggler: {WHAT_IF_LABELS.get(wcause.cause, wcause.cause)} -{_ms(wcause.gain_per_step_ns)}/step", wcause.text))
    elif wcause.straggler == rank and wcause.cause:
        own = int(max(wcause.excess_ns.get(wcause.cause, 0), 0))
        each = wcause.excess_per_step_ns.get(wcause.cause, own // wcause.steps)
        rows.append(("straggler", f"rank {rank}", device if device >= 0 else 0, own, each,
                     f"straggler: +{_ms(each)}/step {_PART_WORDS.get(wcause.cause, wcause.cause)}", wcause.text))
    kept = sorted((r for r in rows if r[3] >= MIN_SHARE * w), key=lambda r: -r[3])  # (stable: ties keep their order)
    return with_findings(rep, findings_frame(kept, "str" if rows else object), _comm_waited(rep, waited))


def _comm_waited(rep: OverlapReport, waited: dict[int, int]) -> list[Verdict] | None:
    """``rep``'s verdicts with its one ``none`` communication verdict told as a wait (:func:`..advice.verdicts.waited`)
    where its exposed waits for late ranks (``waited``: ns by late rank) are at least half of its exposed
    communication; None where they are not (its verdicts as they are)."""
    comm = [i for i, v in enumerate(rep.verdicts) if v.figure == "comm_overlap"]
    c = rep.comm_overlap
    if not waited or len(comm) != 1 or rep.verdicts[comm[0]].level != "none" or c is None or len(c) != 1:
        return None
    exposed = float(c["comm_ns"].iloc[0]) * (1 - float(c["fraction"].iloc[0]))
    if 2 * sum(waited.values()) < exposed:
        return None
    late = max(waited, key=lambda r: waited[r])
    out = list(rep.verdicts)
    out[comm[0]] = waited_verdict(out[comm[0]], waited[late], late)
    return out
