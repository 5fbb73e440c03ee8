"""Small answers to narrow questions over a :class:`~traceprobe.analysis.summary.Summary`: what ``traceprobe mcp``
(:mod:`.server`) hands an agent, a few KB of JSON each where the whole document (``overlap-report --format json``) is
10-100 MB.

Every answer is a JSON-ready dict. Times are int nanoseconds (``*_ns``), fractions 0..1, and each claim carries its
figure in words too (``label``, the first screen's unit rule, :mod:`traceprobe.report.actions`) and its
``share_of_step`` (of a step's time, or of the window's where the trace has no steps). A *claim* is one cause
of lost time in a window with what removing it gives back: a what-if of the window's replay
(:mod:`traceprobe.analysis.causal.what_if_windows`: ``replayed`` true, its gain replayed on the job's dependency graph)
or a span of lost device time no replay stands for (:mod:`traceprobe.analysis.advice.findings`: exposed copies, waits,
the bubble...; ``replayed`` false, its gain the span). A window's claims are ranked as the first screen ranks them: its
top what-if first (unless a stall the replay cannot model is larger), then the others by gain.

Nothing here loads a file or runs an analysis: :mod:`.server` does, once per path.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.advice.replayed import KINDS
from ..analysis.causal.critical_path import path_shares
from ..analysis.causal.what_if_windows import WindowWhatIf
from ..analysis.diff import Diff
from ..analysis.job.causes import WindowCauses
from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary
from ..report.actions import DO_KIND, UNMODELLED, finding_top, what_if_top
from ..report.json_values import clean, rows

REPLAYED_KINDS = frozenset(KINDS.values()) | {"straggler"}
"""Finding kinds a window's replay stands for (:data:`traceprobe.analysis.advice.replayed.KINDS`, and the straggler's
cause): in a replayed window these claims come from the what-if table, with its evidence."""


@dataclass(frozen=True)
class Window:
    """One profiler window of a run, with what was computed across its ranks.

    Attributes:
        run, label: the run's name and the window's label (``steps 2-4``, ``trace``).
        ranks: each report's rank (None: the trace names none), in the run's order.
        reports: the window's reports.
        what_if: its replay (None where it was not replayed: a trace without a dependency graph).
        causes: its waits and straggler (None for a window of one rank).
    """

    run: str
    label: str
    ranks: tuple[int | None, ...]
    reports: tuple[OverlapReport, ...]
    what_if: WindowWhatIf | None
    causes: WindowCauses | None

    def key(self) -> dict[str, Any]:
        """The window's name for a question about it: ``run``, ``window``, and its ``ranks`` (a count beyond 8)."""
        known = sorted(r for r in self.ranks if r is not None)
        return {"run": self.run, "window": self.label, "ranks": known if len(known) <= 8 else len(known)}


def windows(summary: Summary) -> list[Window]:
    """Every window of every run of ``summary``, in the runs' order, each with its replay and causes."""
    by_path = {w.path: w for w in summary.what_ifs if w.path}
    joint = {(w.run, w.window): w for w in summary.what_ifs if not w.path}
    causes = {(c.run, c.window): c for c in summary.causes}
    out = []
    for run in summary.runs:
        for w in run.windows:
            x = joint.get((run.name, w.label)) or next((by_path[r.path] for r in w.reports if r.path in by_path), None)
            out.append(Window(run.name, w.label, w.ranks, w.reports, x, causes.get((run.name, w.label))))
    return out


def _step_ns(w: WindowWhatIf | None, win: Window) -> float:
    """A step's length: the replay's (as :meth:`WindowWhatIf.finding` divides by), else the first report's window per step."""
    if w is not None:
        return max(w.step_ns, w.window_ns // max(w.steps, 1))
    r = win.reports[0]
    n = len(r.steps) if r.steps is not None else 0
    return (r.window_ns[1] - r.window_ns[0]) / max(n, 1)


def _what_if_claim(win: Window, w: WindowWhatIf, row: dict[str, Any]) -> dict[str, Any]:
    """A row of the what-if table as a claim, with its evidence: what holds most of it, the time removed, its gain
    step by step, and where the critical path ran on its rank."""
    top = what_if_top(replace(w, top=row))
    rank = int(row["rank"])
    by_step = w.by_step[(w.by_step["rank"] == rank) & (w.by_step["cause"] == row["cause"])]
    shares = path_shares(w.critical_path)
    if rank >= 0 and not shares.empty:
        shares = shares[shares["rank"] == rank]
    per = int(row["per_step_ns"]) if w.steps else None
    return {
        "rank": rank if w.ranked else None, "cause": str(row["cause"]), "label": top.label if top else w.cause_label(str(row["cause"])),
        "replayed": True, "gain_ns": int(row["gain_ns"]), "gain_per_step_ns": per,
        "share_of_step": round((per or int(row["gain_ns"])) / max(_step_ns(w, win), 1), 3),
        "evidence": {"holds_most": str(row["top"]), "removed_ns": int(row["removed_ns"]),
                     "steps_with": int(row["steps_with"]),
                     "gain_by_step_ns": {str(s): int(g) for s, g in zip(by_step["step"], by_step["gain_ns"])},
                     "critical_path": [{"lane": s["lane"], "cause": s["cause"], "name": s["name"], "share": round(float(s["share"]), 3)}
                                       for s in shares.head(3).to_dict(orient="records")]},
        "do": top.do if top else "", "advice": w.finding(row),
    }


def _span_claim(win: Window, rep: OverlapReport, i: int) -> dict[str, Any]:
    """Row ``i`` of a report's findings (a span of lost device time) as a claim."""
    f = rep.findings.iloc[i]
    top = finding_top(replace(rep, findings=rep.findings.iloc[[i]]))
    per = int(f["per_step_ns"]) if int(f["per_step_ns"]) > 0 else None
    return {
        "rank": rep.rank, "cause": str(f["kind"]), "label": top.label if top else str(f["label"]), "replayed": False,
        "gain_ns": int(f["headroom_ns"]), "gain_per_step_ns": per,
        "share_of_step": round((per or int(f["headroom_ns"])) / max(_step_ns(win.what_if, win), 1), 3),
        "evidence": {"subject": str(f["subject"]), "device": f"{rep.backend}:{int(f['device'])}" if int(f["device"]) >= 0 else None},
        "do": top.do if top else DO_KIND.get(str(f["kind"]), ""), "advice": str(f["text"]),
    }


def claims(win: Window) -> list[dict[str, Any]]:
    """The window's claims (module docstring), ranked: its top what-if first unless the largest span is a stall the
    replay cannot model (:data:`traceprobe.report.actions.UNMODELLED`) larger than it, then by gain, largest first."""
    w = win.what_if
    out: list[dict[str, Any]] = []
    if w is not None and not w.table.empty:
        for row in w.table.to_dict(orient="records"):
            if int(row["gain_ns"]) >= w.floor_ns:
                out.append(_what_if_claim(win, w, row))
    seen: set[tuple[Any, ...]] = set()
    for rep in win.reports:
        for i, kind in enumerate(rep.findings["kind"].astype(str)):
            if w is not None and kind in REPLAYED_KINDS:
                continue
            c = _span_claim(win, rep, i)
            key = (c["rank"], c["cause"], c["label"])
            if key not in seen:
                seen.add(key)
                out.append(c)
    first = out[0] if w is not None and w.top is not None and out and out[0]["replayed"] else None
    rest = sorted(out[1:] if first else out, key=lambda c: -c["gain_ns"])
    if first and rest and rest[0]["cause"] in UNMODELLED and rest[0]["gain_ns"] > first["gain_ns"]:
        return [*rest[:1], first, *rest[1:]]
    return [first, *rest] if first else rest


def _brief(c: dict[str, Any]) -> dict[str, Any]:
    """A claim without its evidence and full advice: what a list of many windows holds."""
    return {k: c[k] for k in ("rank", "cause", "label", "gain_ns", "gain_per_step_ns", "do")}


def folder_summary(summary: Summary, path: str, top: int = 5, listed: int = 20) -> dict[str, Any]:
    """What a folder (or trace) holds: how many traces, runs and windows, the ``top`` largest claims across it (each
    window's first claim, where it is), and up to ``listed`` windows, those of the largest first claim first (each with
    its first claim's label), with how many were left out; the files that failed (the first 5) and their count."""
    ws = windows(summary)
    firsts = []
    for win in ws:
        cs = claims(win)
        firsts.append((win, cs[0] if cs else None))
    ranked = sorted(firsts, key=lambda wc: -(wc[1]["gain_ns"] if wc[1] else -1))
    return clean({
        "path": path, "traces": len(summary.reports), "runs": len(summary.runs), "windows": len(ws),
        "largest_claims": [{**w.key(), **_brief(c)} for w, c in ranked[:top] if c is not None],
        "windows_by_gain": [{**w.key(), "top": c["label"] if c else None} for w, c in ranked[:listed]],
        "windows_left_out": max(len(ranked) - listed, 0),
        "failures": [{"path": f.path, "error": f.error} for f in summary.failures[:5]], "failure_count": len(summary.failures),
        "next": "window_claims(path, run, window) for a window's claims with their evidence",
    })


def find_window(summary: Summary, run: str | None = None, window: str | None = None) -> Window:
    """The window of run ``run`` (its name, or the end of it: ``ddp-compute``) labelled ``window`` (``steps 2-4``);
    either left out: the window whose first claim gives back the most among those that match.

    Raises:
        LookupError: no window matches, its message naming up to 10 that exist.
    """
    ws = windows(summary)
    match = [w for w in ws if (not run or w.run == run or w.run.rstrip("/").endswith("/" + run.strip("/")) or w.run.endswith(run))
             and (not window or w.label == window)]
    if not match:
        names = "; ".join(f"{w.run} [{w.label}]" for w in ws[:10])
        raise LookupError(f"no window matches run={run!r} window={window!r}; there are {len(ws)}: {names}")
    if len(match) == 1:
        return match[0]
    return max(match, key=lambda w: (c[0]["gain_ns"] if (c := claims(w)) else -1))


def window_answer(win: Window, top: int = 5) -> dict[str, Any]:
    """A window's ``top`` claims with their evidence and action (module docstring), its steps and step time, the
    straggler where the ranks waited for one, and how many claims were left out."""
    cs = claims(win)
    w, c = win.what_if, win.causes
    straggler = None
    if c is not None and c.straggler is not None:
        straggler = {"rank": c.straggler, "cause": c.cause, "caused_wait_ns": c.caused_wait_ns, "kernels": list(c.kernels)[:3], "text": c.text}
    return clean({
        **win.key(), "steps": w.steps if w is not None else len(win.reports[0].steps),
        "step_ns": int(_step_ns(w, win)), "window_ns": w.window_ns if w is not None else win.reports[0].window_ns[1] - win.reports[0].window_ns[0],
        "replayed": w is not None, "noise_floor_ns": w.floor_ns if w is not None else None,
        "claims": cs[:top], "claims_left_out": max(len(cs) - top, 0), "straggler": straggler,
        "traces": [r.path for r in win.reports][:8],
    })


def critical_path_answer(win: Window, step: int | None = None, top: int = 8) -> dict[str, Any]:
    """The critical path of the window's ``step`` (None: the whole window): its time, its parts by (rank, lane,
    cause) with their share (:func:`traceprobe.analysis.causal.critical_path.path_shares`), and its ``top`` longest
    segments.

    Raises:
        LookupError: the window was not replayed, or has no such step.
    """
    w = win.what_if
    if w is None or w.critical_path.empty:
        raise LookupError(f"{win.run} [{win.label}] has no critical path: it was not replayed (no dependency graph in its traces)")
    path = w.critical_path
    steps = sorted(int(s) for s in path["step"].unique() if int(s) >= 0) if "step" in path.columns else []
    if step is not None:
        if step not in steps:
            raise LookupError(f"{win.run} [{win.label}] has no step {step} on its critical path; its steps: {steps}")
        path = pd.DataFrame(path[path["step"] == step])
    longest = path.sort_values("ns", ascending=False, kind="stable").head(top)
    return clean({
        **win.key(), "step": step, "steps": steps, "path_ns": int(path["ns"].sum()),
        "parts": rows(path_shares(path).head(top).round({"share": 3})),
        "longest_segments": rows(longest[["rank", "lane", "cause", "name", "ns", "step"]]),
    })


def pick_report(summary: Summary, trace: str | None = None, rank: int | None = None) -> OverlapReport:
    """The one report whose path contains ``trace`` and whose rank is ``rank`` (either left out: any).

    Raises:
        LookupError: none or several match, its message naming up to 10 of them.
    """
    match = [r for r in summary.reports if (not trace or trace in r.path) and (rank is None or r.rank == rank)]
    if len(match) != 1:
        names = "; ".join(f"{r.path} (rank {r.rank})" for r in (match or summary.reports)[:10])
        raise LookupError(f"{len(match)} traces match trace={trace!r} rank={rank!r} (give trace= or rank= to pick one): {names}")
    return match[0]


def kernels_answer(rep: OverlapReport, device: int | None = None, top: int = 10) -> dict[str, Any]:
    """The ``top`` kernels (and copies, memsets) by total device time on each device of one trace (``device``: that
    one only): :func:`traceprobe.analysis.device.kernels.kernel_table`'s ``kind``, ``name``, ``count``, ``total_ns``,
    ``mean_ns``, ``max_ns`` and ``share`` of the device's summed event time."""
    k = rep.kernels
    if device is not None:
        k = pd.DataFrame(k[(k["device"] == device).to_numpy()])
    out = {}
    for d in sorted(set(k["device"].tolist())):
        group = pd.DataFrame(k[(k["device"] == d).to_numpy()])
        out[f"{rep.backend}:{d}"] = rows(group.head(top)[["kind", "name", "count", "total_ns", "mean_ns", "max_ns", "share"]])
    return clean({"trace": rep.path, "rank": rep.rank, "devices": out})


def diff_answer(d: Diff, a: Summary, b: Summary, top: int = 10) -> dict[str, Any]:
    """Two analyses compared: each pair's first claims before and after, the ``top`` figures that changed most (by
    ``change``, the change over the larger side, float64; :class:`traceprobe.analysis.diff.Diff`'s ``figure``,
    ``subject``, ``a``, ``b``, ``delta``: times in ns, fractions 0..1) and the ``top`` kernels whose time changed most."""
    first = {}
    for s in (a, b):
        for win in windows(s):
            cs = claims(win)
            for r in win.reports:
                first[r.path] = _brief(cs[0]) if cs else None
    f = pd.DataFrame(d.figures[d.figures["delta"].notna().to_numpy() & (d.figures["delta"] != 0).to_numpy()])
    scale = np.fmax(np.abs(f["a"].to_numpy(float)), np.abs(f["b"].to_numpy(float)))
    change = f["delta"].to_numpy(float) / np.where(scale > 0, scale, 1.0)
    order = np.argsort(-np.abs(change), kind="stable")
    f = f.iloc[order].assign(change=change[order])
    return clean({
        "pairs": [{"label": label, "a": pa, "b": pb, "a_top": first.get(pa), "b_top": first.get(pb)} for label, pa, pb in d.pairs[:10]],
        "pair_count": len(d.pairs), "only_a": len(d.only_a), "only_b": len(d.only_b),
        "figures": rows(f.head(top)), "kernels": rows(d.kernels.head(top)),
    })
