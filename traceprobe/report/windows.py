"""The first screen's unit: one profiler window of a run, its ranks collapsed (:class:`WindowView`), and the folder's counts.

Nothing is computed here: a window's busy range is the min and max over its ranks of each trace's ``busy`` (the mean
over its devices of the device utilization, :func:`traceprobe.analysis.device.concurrency.device_concurrency`); its
top claim is its ranks' top finding (:func:`.actions.top_findings`: the window's top what-if where it has one, else the
largest of its traces' own top findings); the ranks it names are those the analysis names: the straggler
(:attr:`traceprobe.analysis.job.causes.WindowCauses.straggler`), the rank with the most device work outside collectives
and the one with the most time in collectives (:func:`traceprobe.analysis.job.ranks.rank_summary`), and a rank whose
busy is :data:`BUSY_GAP` below the window's busiest. Windows come in the first screen's order
(:func:`traceprobe.analysis.summary.display_order`), each under the folder it is shown in (``group``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..analysis.per_trace import OverlapReport
from ..analysis.run import run_group
from ..analysis.summary import Summary, display_order
from . import units
from .actions import Top, top_findings
from .job_text import PART_WORDS
from .places import _stem, relative

BUSY_GAP = 0.10
"""A rank whose busy is this much (a share of the window, 0..1) below the window's busiest rank is named."""


@dataclass(frozen=True)
class WindowView:
    """One window on the first screen (module doc).

    Attributes:
        run: its run, relative to the folder every trace shares (a trace alone among others: its file).
        group: the folder it is shown under, relative to that folder (``""``: that folder itself).
        window: ``2-4`` for steps 2 to 4, ``#n`` for the n-th trace of a rank, ``""`` for a trace without steps.
        reports, ranks: its traces and their ranks (None where unknown), in rank order.
        busy: the min and max of its traces' busy (0..1; NaN where no trace has a device).
        top: its top claim, None without one.
        named: the ranks it names, in words (``straggler rank 1 (extra device work)``, ``rank 1 busy 76%``).
        path: where its critical path ran, in words
            (:meth:`traceprobe.analysis.causal.what_if_windows.WindowWhatIf.path_line`; ``""`` without one).
    """

    run: str
    group: str
    window: str
    reports: tuple[OverlapReport, ...]
    ranks: tuple[int | None, ...]
    busy: tuple[float, float]
    top: Top | None
    named: tuple[str, ...] = ()
    path: str = ""

    @property
    def rank_count(self) -> int:
        """Its distinct known ranks (0 for one trace without a rank)."""
        return len({r for r in self.ranks if r is not None})

    @property
    def share(self) -> float:
        """What its top claim gives back, as a share of the window (0 without one): the first screen's order of worst."""
        return self.top.share if self.top is not None else 0.0

    def where(self) -> str:
        """Its run and window: ``causes/ddp-compute 2-4``."""
        return f"{self.run} {self.window}".rstrip()


def busy_of(r: OverlapReport) -> float:
    """A trace's busy: the mean over its devices of the device utilization (0..1), NaN without a device."""
    d = r.devices.devices
    return float("nan") if d.empty else float(d["utilization"].mean())


def busy_text(lo: float, hi: float) -> str:
    """``96-99%``, ``99%`` where both round alike, ``-`` where missing."""
    if units.missing(lo) or math.isnan(lo):
        return "-"
    a, b = round(lo * 100), round(hi * 100)
    return f"{a}%" if a == b else f"{a}-{b}%"


def short_claim(top: Top) -> str:
    """A top claim without its window total: ``rank 1 extra device work -19.8 ms/step``."""
    return top.label.split(" (-")[0]


def _window(label: str) -> str:
    if label.startswith("steps "):
        return label[6:]
    return "#" + label[6:] if label.startswith("trace ") else ""


def _named(summary: Summary, run: str, window: str, ranks: tuple[int | None, ...], busy: list[float]) -> tuple[str, ...]:
    out = []
    for c in summary.causes:
        if c.run == run and c.window == window and c.straggler is not None:
            out.append(f"straggler rank {c.straggler}" + (f" ({PART_WORDS.get(c.cause, c.cause)})" if c.cause else ""))
    rs = summary.rank_summary
    if not rs.empty:
        at = ((rs["run"] == run) & (rs["window"] == window)).to_numpy().nonzero()[0]
        if len(at):
            b, m = rs["busiest_rank"].iloc[at[0]], rs["most_comm_rank"].iloc[at[0]]
            if any(not math.isnan(x) for x in busy):  # (a CPU-only window has no device work to compare)
                out.append(f"most device work rank {int(b)}")
            if not units.missing(m):
                out.append(f"most time in collectives rank {int(m)}")
    known = [x for x in busy if not math.isnan(x)]
    if len(known) >= 2:
        top = max(known)
        out += [f"rank {k} busy {x:.0%}" for k, x in zip(ranks, busy) if k is not None and not math.isnan(x) and x < top - BUSY_GAP]
    return tuple(out)


def window_views(summary: Summary, base: str) -> list[WindowView]:
    """Every window of ``summary`` (module doc), names relative to ``base`` (the folder every trace shares)."""
    tops = top_findings(summary)
    joint = {(w.run, w.window): w for w in summary.what_ifs if not w.path}
    alone_ = {w.path: w for w in summary.what_ifs if w.path}
    out = []
    for run in display_order(summary.runs, base):
        alone = len(run.windows) == 1 and len(run.windows[0].reports) == 1 and Path(run.name) != Path(base)
        group = relative(run_group(run.name, run.folder), base) if base else run_group(run.name, run.folder)
        group = (Path(base).name or base) if Path(run_group(run.name, run.folder)) == Path(base) else group
        for w in run.windows:
            ranked = len({k for k in w.ranks if k is not None}) >= 2
            # (traces of one window that are not ranks of one job: each on its own, named by its file where unnamed)
            for reports, ranks in [(w.reports, w.ranks)] if ranked else [((r,), (k,)) for r, k in zip(w.reports, w.ranks)]:
                first = reports[0]
                named = first.info.get("workload") or ranks[0] is not None or alone
                label = relative(run.name, base) if named else relative(str(Path(first.path).parent / _stem(first.path)), base)
                busy = [busy_of(r) for r in reports]
                known = [x for x in busy if not math.isnan(x)]
                span = (min(known), max(known)) if known else (float("nan"), float("nan"))
                found = [tops[id(r)] for r in reports if id(r) in tops]
                shared = [t for t in found if t.what_if]
                top = shared[0] if shared else max(found, key=lambda t: t.gain_ns) if found else None
                wi = joint.get((run.name, w.label)) if ranked else alone_.get(first.path)
                out.append(WindowView(label, group, _window(w.label), reports, ranks, span, top,
                                      _named(summary, run.name, w.label, ranks, busy) if ranked else (),
                                      wi.path_line() if wi is not None else ""))
    return out


@dataclass(frozen=True)
class Counts:
    """What a folder holds: ``traces`` analysed, ``runs``, ``windows``, ``multi`` windows of two or more ranks,
    ``failed`` files that could not be read."""

    traces: int
    runs: int
    windows: int
    multi: int
    failed: int

    def line(self) -> str:
        """``518 traces: 240 runs, 243 windows (127 of 2 or more ranks); 3 files could not be read``."""
        def n(k: int, word: str) -> str:
            return f"{k:,} {word}{'' if k == 1 else 's'}"

        multi = f" ({self.multi} of 2 or more ranks)" if self.multi else ""
        failed = f"; {n(self.failed, 'file')} could not be read" if self.failed else ""
        return f"{n(self.traces, 'trace')}: {n(self.runs, 'run')}, {n(self.windows, 'window')}{multi}{failed}"


def counts(summary: Summary) -> Counts:
    """The :class:`Counts` of ``summary``."""
    windows = [w for run in summary.runs for w in run.windows]
    return Counts(len(summary.reports), len(summary.runs), len(windows), sum(w.rank_count >= 2 for w in windows),
                  len(summary.failures))


def claims_by_cause(views: list[WindowView]) -> list[tuple[str, int, WindowView]]:
    """Each cause that is some window's top claim: (the cause in words, how many windows it leads, the window where
    it gives back the largest share), the causes leading most windows first."""
    by: dict[str, list[WindowView]] = {}
    for v in views:
        if v.top is not None:
            by.setdefault(v.top.cause or short_claim(v.top), []).append(v)
    rows = [(cause, len(vs), max(vs, key=lambda v: v.share)) for cause, vs in by.items()]
    return sorted(rows, key=lambda x: (-x[1], -x[2].share, x[0]))
