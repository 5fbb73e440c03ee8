"""Causes across ranks: who waited for whom in collectives, for how long, and why the late rank was late.

Definitions (quoted by the README). Within one profiler window of a run, with
the collectives matched across ranks (:func:`.collectives.match_window`):

- *wait* of a rank in a collective: from its kernel's start to the last rank's
  arrival (the latest start), clipped to the kernel: min(end, latest start) -
  start. The rest of the kernel is *transfer*. The wait is charged to the *late
  rank* (the one that started last). TraceLens's NCCL analyser and NCCL's own
  docs call the same split "skew" and "time".
- *exposed wait* of rank r for late rank L: the part of r's exposed collective
  communication ((M \\ M_p2p) \\ C, :func:`.findings.exposed_collective_spans`)
  that lies inside r's waits charged to L. *Exposed transfer*: the rest of r's
  exposed collective communication, what overlap can hide.
- *straggler*: the rank charged the most wait, when the largest exposed wait it
  caused on another rank is above :data:`NOISE_SHARE` of the window and
  :data:`NOISE_MIN_NS` per step; else no straggler is named.
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

- *blame path*: per step (each rank's step GPU interval, :mod:`.steps`), the late
  rank that caused the largest exposed wait on one other rank in that step, and
  the part in which it most exceeded the other ranks' median in that step: which
  rank and which cause bound each step.

HTA's critical-path analysis follows one rank's dependency graph; we compare the
ranks' device time between collectives instead, which needs no call stacks and
works on any trace with matched collectives. Headroom is claimed once: the waiting
ranks' findings hold the wait (exposed wait, on their own timelines), the
straggler's finding holds its own excess time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..reading.comm_kernels import COMM_KERNEL_RE
from .collectives import WindowCollectives
from .findings import MIN_SHARE, short_label
from .idle_causes import HOST_CAUSES, LABELS
from .per_trace import OverlapReport

NOISE_SHARE = 0.02
"""A straggler is named only if the exposed wait it caused on some rank is at least this share of the window..."""
NOISE_MIN_NS = 500_000
"""...and at least this much per step (0.5 ms)."""

WAIT_COLUMNS = ["rank", "pg", "pg_desc", "collective", "count", "wait_ns", "transfer_ns", "exposed_wait_ns", "exposed_transfer_ns"]
EXPOSED_COLUMNS = ["rank", "late_rank", "exposed_wait_ns"]
BLAME_COLUMNS = ["step", "rank", "cause", "excess_ns", "wait_ns"]

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
        cause: the part of :data:`.collectives.PRE_PARTS` the straggler had most in excess ("" without straggler).
        excess_ns: per part of :data:`PARTS`, the straggler's excess over the other ranks' median, summed over the steps.
        excess_per_step_ns: the same, the median over the window's steps.
        caused_wait_ns: the largest exposed wait the straggler caused on one rank.
        kernels: for a compute cause, the kernel names with the largest excess on the straggler.
        label, text: the window's finding, short and long ("" without straggler).
        blame: the blame path, one row per step of the window: ``step`` (int64),
            ``rank`` (int64, the rank whose lateness caused the most exposed wait on
            another rank in that step; -1 where no wait was above
            :data:`NOISE_MIN_NS`), ``cause`` (str, its part of :data:`PARTS` with the
            largest excess in that step; ``""`` where no excess reaches :data:`NOISE_MIN_NS`), ``excess_ns`` (int64, that excess) and
            ``wait_ns`` (int64, the largest exposed wait it caused on one rank in the step).
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
    blame: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({c: np.zeros(0, np.int64) for c in BLAME_COLUMNS}))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _spans(rep: OverlapReport) -> dict[int, iv.Intervals]:
    ex = rep.exposed_comm
    if ex is None or ex.empty:
        return {}
    out = {}
    for d, g in ex.groupby("device"):
        out[int(d)] = (g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64))  # type: ignore[index]
    return out


PARTS = ("compute", "other_busy", *HOST_CAUSES, "queued")
"""What the blame compares across ranks: device compute, other device work alone (exposed copies, memsets), and the
idle time of each host cause and ``queued`` (:mod:`.idle_causes`)."""


def _parts_by_step(rep: OverlapReport) -> pd.DataFrame:
    """One rank's :data:`PARTS` per step (index ``step``; -1 for the whole window where the trace has no steps), ns."""
    per_step = rep.breakdown_steps is not None and not rep.breakdown_steps.empty
    b: pd.DataFrame = rep.breakdown_steps if per_step else rep.breakdown.assign(step=-1)
    if b is None or b.empty:
        return pd.DataFrame(columns=list(PARTS), dtype=np.float64)
    g = b.groupby("step")
    alone: pd.Series = g["exposed_copy_ns"].sum() + g["other_ns"].sum()  # type: ignore[operator]
    out = pd.DataFrame({"compute": g["compute_ns"].sum(), "other_busy": alone})
    ic = rep.idle_causes
    if ic is not None and not ic.empty:
        ic = ic[ic["step"] >= 0] if per_step else ic[ic["step"] == -1]
        piv = ic.pivot_table(index="step", columns="cause", values="ns", aggfunc="sum")
        out = out.join(piv, how="left")
    return out.reindex(columns=list(PARTS)).fillna(0.0).astype(np.float64)


def _excess(reports: dict[int, OverlapReport], late: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per part of :data:`PARTS`: the late rank's excess over the other ranks' median, summed over the window's steps,
    and its median over the steps (the per-step figure)."""
    tables = {r: _parts_by_step(rep) for r, rep in reports.items()}
    mine = tables[late]
    others = [t for r, t in tables.items() if r != late]
    if mine.empty or not others:
        return {}, {}
    steps = mine.index
    med = np.median(np.stack([o.reindex(steps).fillna(0.0).to_numpy() for o in others]), axis=0)
    diff = mine.to_numpy() - med
    return ({p: float(diff[:, i].sum()) for i, p in enumerate(PARTS)},
            {p: float(np.median(diff[:, i])) for i, p in enumerate(PARTS)})


def _kernel_excess(reports: dict[int, OverlapReport], late: int, top: int = 2) -> tuple[tuple[str, ...], int]:
    """The kernels ``late`` spent more time in than the other ranks' median: the ``top`` names with the largest
    excess, and the sum of every kernel's positive excess (ns). Communication kernels are left out (their time on the
    waiting ranks is the wait). Kernels the other ranks spent longer in (slowed beside their spinning collectives)
    do not offset it."""
    def totals(r: OverlapReport) -> pd.Series:
        k: pd.DataFrame = r.kernels
        if k is None or k.empty or "total_ns" not in k:
            return pd.Series(dtype=np.float64)
        k = pd.DataFrame(k[k["kind"] == "kernel"]) if "kind" in k else k
        comm = np.array([COMM_KERNEL_RE.search(str(n)) is not None for n in k["name"].tolist()], dtype=bool)  # one row per name
        k = pd.DataFrame(k[~comm])
        total: pd.Series = k.groupby("name")["total_ns"].sum()  # type: ignore[assignment]
        return total.astype(np.float64)

    mine = totals(reports[late])
    others = [totals(r) for k, r in reports.items() if k != late]
    if mine.empty or not others:
        return (), 0
    med = pd.concat(others, axis=1).fillna(0.0).median(axis=1)
    diff = (mine - med.reindex(mine.index).fillna(0.0)).sort_values(ascending=False)
    return tuple(str(n) for n, v in diff.head(top).items() if v > 0), int(diff.clip(lower=0).sum())


def window_causes(wc: WindowCollectives, reports: dict[int, OverlapReport], steps: int = 1) -> WindowCauses:
    """Wait, transfer, straggler and blame of one window (module docstring).

    Args:
        wc: the window's matched collectives.
        reports: the window's report of each rank.
        steps: the window's step count, for per-step figures.

    Returns:
        a :class:`WindowCauses`.
    """
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
    summed = pd.DataFrame(pr.groupby(["rank", "pg", "pg_desc", "collective"], sort=True)[["count", "wait_ns", "transfer_ns"]].sum())
    waits = summed.reset_index().astype({"rank": np.int64, "count": np.int64, "wait_ns": np.int64, "transfer_ns": np.int64})
    waits = _exposed_by_group(waits, pr, {r: _spans(rep) for r, rep in reports.items()})
    exposed_rows = []
    transfer: dict[int, int] = {}
    by_step: dict[tuple[int, int], int] = {}  # (step, late rank) -> the largest exposed wait it caused on one rank
    for rank, rep in reports.items():
        spans = _spans(rep)
        total = sum(iv.length(s) for s in spans.values())
        mine = pd.DataFrame(pr[(pr["rank"] == rank) & (pr["last_rank"] != rank)])
        claimed = 0
        for late, g in mine.groupby("last_rank"):
            s = g["start_ns"].to_numpy(np.int64)
            e = np.minimum(g["end_ns"].to_numpy(np.int64), s + g["wait_ns"].to_numpy(np.int64))
            w = iv.union(s, e)
            hit = [iv.intersect(x, w) for x in spans.values()]
            ns = sum(iv.length(x) for x in hit)
            claimed += ns
            st = rep.steps
            if st is not None and not st.empty and "gpu_start_ns" in st:
                lo, hi = st["gpu_start_ns"].to_numpy(np.int64), st["gpu_end_ns"].to_numpy(np.int64)
                per = sum((iv.measure(x, lo, hi) for x in hit), np.zeros(lo.size, np.int64))
                for step, v in zip(st["step"].tolist(), per.tolist()):
                    k = (int(step), int(late))  # type: ignore[arg-type]
                    by_step[k] = max(by_step.get(k, 0), int(v))
            exposed_rows.append((int(rank), int(late), int(ns)))  # type: ignore[arg-type]
        transfer[int(rank)] = int(total - claimed)
    exposed = pd.DataFrame(exposed_rows, columns=EXPOSED_COLUMNS).astype(np.int64)
    out = WindowCauses(wc.run, wc.window, steps, waits, exposed, transfer, blame=_blame_path(by_step, reports))
    if exposed.empty:
        return out
    by_late = exposed.groupby("late_rank")["exposed_wait_ns"].max()
    late = int(by_late.idxmax())
    caused = int(by_late.max())
    window_ns = max((r.window_ns[1] - r.window_ns[0] for r in reports.values()), default=0)
    if caused < NOISE_SHARE * window_ns or caused < NOISE_MIN_NS * steps:
        return out
    excess, per_step = _excess(reports, late)
    if not excess:
        return replace(out, straggler=late, caused_wait_ns=caused)
    cause = max(excess, key=lambda p: excess[p])
    kernels: tuple[str, ...] = ()
    if cause == "compute":
        # more compute is counted by kernel: the other ranks' kernels run slower beside their spinning collectives,
        # which would hide part of the straggler's extra work in a difference of totals
        kernels, extra = _kernel_excess(reports, late)
        excess["compute"] = max(excess["compute"], float(extra))
        per_step["compute"] = extra / steps
    each = per_step[cause] if per_step[cause] > 0 else excess[cause] / steps
    what = _PART_WORDS.get(cause, cause)
    label = f"wait for rank {late}: +{_ms(each)}/step {what}"
    names = f" ({', '.join(k[:60] for k in kernels)})" if kernels else ""
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


def _exposed_by_group(waits: pd.DataFrame, pr: pd.DataFrame, spans: dict[int, dict[int, iv.Intervals]]) -> pd.DataFrame:
    """``waits`` with ``exposed_wait_ns`` and ``exposed_transfer_ns`` per row: the rank's exposed collective time inside
    the waits, and inside the transfers, of that group's and type's kernels."""
    ew, et = np.zeros(len(waits), np.int64), np.zeros(len(waits), np.int64)
    keys = ["rank", "pg", "pg_desc", "collective"]
    groups = {k: g for k, g in pr.groupby(keys, sort=True)}
    for i, key in enumerate(waits[keys].itertuples(index=False, name=None)):
        g = groups.get(tuple(key))
        ex = spans.get(int(key[0]), {})
        if g is None or not ex:
            continue
        s = g["start_ns"].to_numpy(np.int64)
        mid = np.minimum(g["end_ns"].to_numpy(np.int64), s + g["wait_ns"].to_numpy(np.int64))
        e = g["end_ns"].to_numpy(np.int64)
        wset, tset = iv.union(s, mid), iv.union(mid, e)
        ew[i] = sum(iv.length(iv.intersect(x, wset)) for x in ex.values())
        et[i] = sum(iv.length(iv.intersect(x, tset)) for x in ex.values())
    return waits.assign(exposed_wait_ns=ew, exposed_transfer_ns=et)


def _blame_path(by_step: dict[tuple[int, int], int], reports: dict[int, OverlapReport]) -> pd.DataFrame:
    """The blame path (:attr:`WindowCauses.blame`): per step, the rank that bound it and why."""
    rows = []
    tables = {r: _parts_by_step(rep) for r, rep in reports.items()}
    for step in sorted({s for s, _ in by_step}):
        late, wait = max(((r, w) for (s, r), w in by_step.items() if s == step), key=lambda x: (x[1], -x[0]))
        if wait < NOISE_MIN_NS or late not in tables or step not in tables[late].index:
            rows.append((step, -1, "", 0, wait))
            continue
        others = [t.loc[step].to_numpy() for r, t in tables.items() if r != late and step in t.index]
        if not others:
            rows.append((step, late, "", 0, wait))
            continue
        diff = tables[late].loc[step].to_numpy() - np.median(np.stack(others), axis=0)
        k = int(np.argmax(diff))
        # an excess under the noise floor names no cause: the lateness came from outside this step's device time
        rows.append((step, late, PARTS[k] if diff[k] >= NOISE_MIN_NS else "", int(max(diff[k], 0)), wait))
    out = pd.DataFrame(rows, columns=BLAME_COLUMNS)
    for c in ("step", "rank", "excess_ns", "wait_ns"):
        out[c] = out[c].astype(np.int64)
    return out


def _group_advice(waits: pd.DataFrame, rank: int) -> str:
    """What to try for exposed transfer, by the process group that holds most of it (``pg_desc``: torch's DeviceMesh names
    its groups ``mesh_<dim>``, e.g. ``mesh_tp``, ``mesh_dp``; ``default_pg`` is the world)."""
    mine = pd.DataFrame(waits[waits["rank"] == rank] if "exposed_transfer_ns" in waits else waits.iloc[:0])
    if mine.empty or int(mine["exposed_transfer_ns"].max()) <= 0:
        return ": overlap the transfer with compute, or reduce what is sent"
    top = mine.iloc[int(np.argmax(mine["exposed_transfer_ns"].to_numpy()))]
    desc = str(top["pg_desc"]).lower()
    where = f" (most in process group {top['pg']!s}{' ' + str(top['pg_desc']) if top['pg_desc'] else ''}, {top['collective']})"
    if "tp" in desc.replace("mesh_", "").split("_") or desc.endswith("tp"):
        return f"{where}: tensor-parallel collectives sit between dependent matmuls; try async tensor parallelism or sequence parallelism"
    if "pp" in desc.replace("mesh_", "").split("_") or desc.endswith("pp"):
        return f"{where}: pipeline hand-offs; use more microbatches or an interleaved schedule"
    return f"{where}: overlap the transfer with compute (bucketed or prefetched collectives), or reduce what is sent"


def _frame(rows: list[tuple]) -> pd.DataFrame:
    cols = ["kind", "subject", "device", "headroom_ns", "per_step_ns", "label", "text"]
    out = pd.DataFrame(rows, columns=cols)
    for c in ("device", "headroom_ns", "per_step_ns"):
        out[c] = out[c].astype(np.int64)
    return out


def with_causes(rep: OverlapReport, rank: int, wcause: WindowCauses) -> OverlapReport:
    """``rep`` with its findings seen across ranks: its ``exposed_comm`` finding split into the exposed wait for each
    late rank (``wait``) and the exposed transfer (``exposed_transfer``); the straggler gets a ``straggler`` finding
    holding its own excess time. Findings under :data:`.findings.MIN_SHARE` of the window are dropped."""
    f = rep.findings
    if f is None or f.empty or "label" not in f:
        f = pd.DataFrame(columns=["kind", "subject", "device", "headroom_ns", "per_step_ns", "label", "text"])
    lo, hi = rep.window_ns
    w = max(hi - lo, 1)
    rows = [tuple(r) for r in f.itertuples(index=False) if r[0] != "exposed_comm"]
    comm = pd.DataFrame(f[f["kind"] == "exposed_comm"])
    subject = str(comm["subject"].iloc[0]) if len(comm) else f"rank {rank}"
    device = int(comm["device"].iloc[0]) if len(comm) else -1
    mine = pd.DataFrame(wcause.exposed[wcause.exposed["rank"] == rank])
    for late, ns in zip(mine["late_rank"].tolist(), mine["exposed_wait_ns"].tolist()):
        if ns <= 0:
            continue
        if late == wcause.straggler and wcause.label:
            label, why = wcause.label, wcause.text
        else:
            label, why = f"wait for rank {late}", f"rank {late} arrived last at these collectives; see its own findings"
        rows.append(("wait", subject, device, ns, ns // wcause.steps, f"{label} ({_ms(ns)})",
                      f"{_ms(ns)} ({_ms(ns / wcause.steps)} per step): {subject} waited in collectives for rank {late}: {why}"))
    tr = wcause.exposed_transfer_ns.get(rank, 0)
    if tr > 0 and len(comm):
        rows.append(("exposed_transfer", subject, device, tr, tr // wcause.steps, short_label("exposed transfer", tr, w),
                     f"{_ms(tr)}: collectives on {subject} moved data with no compute beside them (their waits for late "
                     f"ranks are counted apart){_group_advice(wcause.waits, rank)}"))
    if wcause.straggler == rank and wcause.cause:
        own = int(max(wcause.excess_ns.get(wcause.cause, 0), 0))
        each = wcause.excess_per_step_ns.get(wcause.cause, own // wcause.steps)
        rows.append(("straggler", f"rank {rank}", device if device >= 0 else 0, own, each,
                     f"straggler: +{_ms(each)}/step {_PART_WORDS.get(wcause.cause, wcause.cause)}", wcause.text))
    out = _frame(rows)
    out = pd.DataFrame(out[out["headroom_ns"] >= MIN_SHARE * w])
    out = out.sort_values(by="headroom_ns", ascending=False, kind="stable").reset_index(drop=True)
    return replace(rep, findings=out)
