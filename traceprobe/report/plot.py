"""Pictures of traces: a timeline per trace, and traces compared on one time axis.

matplotlib through its Agg canvas (``matplotlib.figure.Figure``, no pyplot): no
display is needed and no global backend is changed.

A renderer only: each function takes what the analysis returned for each trace (its
report and its :class:`~traceprobe.analysis.device.picture.TimelineLanes`, computed where the
trace was analysed) and returns the image's bytes, or the :class:`Figure`; it computes
no interval and writes no file (the caller writes them, through :mod:`traceprobe.fileio`).

- :func:`timeline`: one lane per (device, stream) over the trace window; kernels coloured by class
  (:mod:`traceprobe.analysis.work.kernel_classes`: GEMM, attention, convolution, elementwise, reduction/norm,
  copy (memcpys and memsets among them), communication, other; the classes a picture holds are its legend's); where
  copies or communication ran under compute, the device's lanes are shaded; with
  two or more devices a top lane marks when two or more were busy; each step's GPU
  interval begins at a dotted line (``step N``); the verdicts are the title block.
- :func:`compare`: several traces stacked on one time axis, by groups that share a
  clock (:func:`traceprobe.analysis.device.picture.shared_clock_groups`): the ranks of one
  profiler window are drawn on their shared clock, from the earliest device event of
  the window (so rank 1's work lies where its timestamps put it against rank 0's);
  any other trace from its own first device event (e.g. the three compute-copy variants).
- a rank of a job (:func:`with_findings`) gets a band of its own, ``waiting``, where its collective kernels
  waited for the last rank to arrive, and one, ``critical path``, where its window's critical path ran on it (a trace
  on its own: ``host on the path``, where the host held it); each trace its window's top finding and action under its
  title (a rank's folder and rank where no manifest names it, :func:`title_of`). The legend gives every entry whole,
  in rows of :data:`LEGEND_COLUMNS`, above the first title.

Slices less than a quarter pixel apart were merged by the analysis; every slice is drawn at
least a fraction of a pixel wide, so short kernels stay visible.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..analysis.device.picture import KINDS, TimelineLanes
from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary
from .chrome import trace_stem

CLASSES = tuple({"gemm": "GEMM", "reduction": "reduction/norm", "copy": "copy (memcpy, memset)", "other": "other kernels"}.get(k, k)
                for k in KINDS)
"""The legend's name of each kernel class (:data:`traceprobe.analysis.device.picture.KINDS`)."""
COLORS = ("#4e79a7", "#ff9da7", "#9c755f", "#edc948", "#76b7b2", "#f28e2b", "#9467bd", "#bab0ac")
"""The colour of each kernel class (Tableau's palette, apart from the bands' colours below)."""
SHADE = "#2ca02c"
MULTI = "#17becf"
WAIT = "#cf222e"
CRITICAL = "#6f42c1"
CRITICAL_HOST = "#c5a8f5"
STEP = "#555555"
LEVEL_COLORS = {"confirmed": "#1a7f37", "partial": "#9a6700", "none": "#cf222e", "n/a": "#555555"}
WIDTH_IN, DPI = 14.0, 110
LEFT_IN, RIGHT_IN = 1.25, 0.25
FONT = 8.5
LEGEND_COLUMNS = 4
"""Legend entries per row: the longest entries side by side fit the figure's width."""


@dataclass(frozen=True)
class Item:
    """One trace to draw: a label, its report and what the analysis returned to draw (its lanes).

    ``waits``: ``start_ns``, ``end_ns`` (int64) where this rank's collective kernels waited for the last rank of
    their collective to arrive (:attr:`traceprobe.analysis.job.collectives.WindowCollectives.per_rank`: from each
    kernel's start for its ``wait_ns``), drawn as a band of their own; None: no such band. ``finding``: the
    window's top finding and its action (:mod:`.actions`), under the title block.
    """

    label: str
    report: OverlapReport
    lanes: TimelineLanes
    waits: pd.DataFrame | None = None
    finding: str = ""
    critical: pd.DataFrame | None = None
    """``start_ns``, ``end_ns`` (int64) and ``host`` (bool: held by the host, not a device) of the pieces of the
    window's critical path on this rank (:func:`traceprobe.analysis.causal.critical_path.critical_path`), drawn as a
    band of their own, each piece apart; None: no such band. For a trace on its own (the path always on it), only
    where the host held the path (``host_path``)."""
    host_path: bool = False


def label_of(path: str | Path, info: dict | None = None, rank: int | None = None) -> str:
    """``workload.variant[.rankR]`` from manifest facts, else the file name without ``.pt.trace.json.gz``."""
    info = info or {}
    if info.get("workload"):
        label = ".".join(x for x in (info.get("workload"), info.get("variant")) if x)
        return label if rank is None else f"{label}.rank{rank}"
    return trace_stem(path)


def title_of(path: str | Path, info: dict | None = None, rank: int | None = None) -> str:
    """A picture's title of one trace: :func:`label_of` where a manifest names it; else a rank's folder and rank
    (``ddp-compute rank 1``: ``tensorboard_trace_handler`` names its files by worker and time); else the file's stem."""
    if (info or {}).get("workload") or rank is None:
        return label_of(path, info, rank)
    folder = Path(str(path)).parent.name
    return f"{folder} rank {rank}" if folder else f"rank {rank}"


def _rects(x0, x1, y0, y1) -> np.ndarray:
    return np.stack([np.stack([x0, y0], -1), np.stack([x0, y1], -1), np.stack([x1, y1], -1), np.stack([x1, y0], -1)], 1)


def _rows(it: Item) -> int:
    """Lanes drawn: one per (device, stream), the "2+ devices busy" lane with several devices, the waits' lane, the
    critical path's lane."""
    return len(it.lanes.lanes) + (1 if it.lanes.devices > 1 else 0) + (1 if it.waits is not None else 0) + \
        (1 if it.critical is not None else 0)


def _x(t_ns, t0: int):
    return (np.asarray(t_ns, dtype=np.int64) - t0) / 1e6


def _draw(ax, item: Item, t0: int, span_ns: int, px_ns: float) -> None:
    """One trace's lanes on ``ax``, in ms from ``t0`` (ns, on the lanes' clock), over ``span_ns``."""
    tl = item.lanes
    lanes = tl.lanes
    n = len(lanes)
    multi = tl.devices > 1
    waits = item.waits is not None
    crit = item.critical is not None
    # the "2+ devices busy" summary with several devices, then the waits, then the critical path
    top = (1 if multi else 0) + (1 if waits else 0) + (1 if crit else 0)
    ax.set_xlim(0, span_ns / 1e6)
    ax.set_ylim(max(n + top, 1) - 0.5, -0.5)
    if not n:
        ax.text(0.5, 0.5, "no device activity", transform=ax.transAxes, ha="center", va="center")
        ax.set_yticks([])
        return
    sl = tl.slices
    s, e = sl["start_ns"].to_numpy(np.int64), sl["end_ns"].to_numpy(np.int64)
    x0, x1 = _x(s, t0), _x(np.maximum(e, s + int(px_ns * 0.6)), t0)  # tiny slices widened to stay visible
    y, kind = sl["lane"].to_numpy() + top, sl["kind"].to_numpy()
    for c, color in enumerate(COLORS):
        m = kind == c
        if m.any():
            ax.add_collection(PolyCollection(_rects(x0[m], x1[m], y[m] - 0.4, y[m] + 0.4), facecolors=color, edgecolors="none", zorder=2,  # pyright: ignore  (pandas/matplotlib stubs)
                                             label=CLASSES[c]))
    uc = tl.under_compute
    if len(uc):
        dev, ud = lanes["device"].to_numpy(np.int64), uc["device"].to_numpy(np.int64)  # (lanes sorted by device)
        lo, hi = np.searchsorted(dev, ud, "left") + top, np.searchsorted(dev, ud, "right") - 1 + top
        us, ue = uc["start_ns"].to_numpy(np.int64), uc["end_ns"].to_numpy(np.int64)
        ax.add_collection(PolyCollection(_rects(_x(us, t0), _x(np.maximum(ue, us + int(px_ns * 0.6)), t0), lo - 0.5, hi + 0.5),  # pyright: ignore  (pandas/matplotlib stubs)
                                         facecolors=SHADE, alpha=0.22, edgecolors="none", zorder=1))
    if item.waits is not None and len(item.waits):
        w = item.waits
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        row = top - 1 - (1 if crit else 0)
        ax.add_collection(PolyCollection(_rects(_x(ws, t0), _x(np.maximum(we, ws + int(px_ns * 0.6)), t0), np.full(len(w), row - 0.4),  # pyright: ignore  (pandas/matplotlib stubs)
                                         np.full(len(w), row + 0.4)), facecolors=WAIT, edgecolors="none", zorder=2))
    if item.critical is not None and len(item.critical):
        c = item.critical
        cs, ce = c["start_ns"].to_numpy(np.int64), c["end_ns"].to_numpy(np.int64)
        host = c["host"].to_numpy(bool) if "host" in c.columns else np.zeros(len(c), bool)
        # (each piece of the path apart, a white edge between them; where the host held it, lighter)
        ax.add_collection(PolyCollection(_rects(_x(cs, t0), _x(np.maximum(ce, cs + int(px_ns * 0.6)), t0), np.full(len(c), top - 1.4),  # pyright: ignore  (pandas/matplotlib stubs)
                                         np.full(len(c), top - 0.6)), facecolors=np.where(host, CRITICAL_HOST, CRITICAL).tolist(),
                                         edgecolors="white", linewidths=0.5, zorder=2))
    two = tl.multi_device
    if multi and len(two):
        ax.add_collection(PolyCollection(_rects(_x(two["start_ns"], t0), _x(two["end_ns"], t0), np.full(len(two), -0.4), np.full(len(two), 0.4)),  # pyright: ignore  (pandas/matplotlib stubs)
                                         facecolors=MULTI, edgecolors="none", zorder=2))
    st = tl.steps
    if len(st):
        edges = np.r_[st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)[-1:]]
        names = [f"step {int(k)}" for k in st["step"]] + ["end of the steps"]
        for t, name in zip(_x(edges, t0).tolist(), names):
            ax.axvline(t, color=STEP, linewidth=0.8, linestyle=":", zorder=4, label=name)
            if len(st) <= 40 and name.startswith("step"):
                ax.text(t, 1.0, f" {name}", transform=ax.get_xaxis_transform(), fontsize=FONT - 2, color=STEP, va="bottom", ha="left")
    labels = (["2+ devices busy"] if multi else []) + (["waiting"] if waits else []) + \
        (["host on the path" if item.host_path else "critical path"] if crit else []) + \
        lanes["label"].tolist()
    fs = float(np.clip(300 / max(n + top, 1), 5.5, FONT))
    ax.set_yticks(np.arange(n + top), labels, fontsize=fs)
    bounds = np.flatnonzero(np.diff(lanes["device"].to_numpy())) + top + 0.5
    for b in list(bounds) + ([top - 0.5] if top else []):
        ax.axhline(b, color="#444444", linewidth=0.6, zorder=3)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5, zorder=0)
    ax.set_axisbelow(True)


def _header(item: Item, chars: int) -> list[list[tuple[str, str, str]]]:
    """Rows of (text, colour, weight) cells: the label and window, then the verdicts,
    in two columns when there are many."""
    lo, hi = item.report.window_ns
    tl = item.lanes
    head = f"{item.label}: window {(hi - lo) / 1e6:,.1f} ms, {tl.events:,} device events on {len(tl.lanes)} stream(s)"
    head += f"; times {tl.clock}" if tl.clock else ""
    verdicts = item.report.verdicts
    cols = 2 if len(verdicts) > 10 else 1
    width = chars // cols - 3
    blocks = [[(part, LEVEL_COLORS.get(v.level, "black"), "normal") for part in textwrap.wrap(f"[{v.level}] {v.text}", width, subsequent_indent="    ")]
              for v in verdicts] or [[("no figure to judge", "#555555", "normal")]]
    sizes = np.cumsum([len(b) for b in blocks])
    cut = int(np.searchsorted(sizes, sizes[-1] / 2)) + 1 if cols == 2 else len(blocks)  # whole verdicts per column
    columns = [sum(blocks[:cut], []), sum(blocks[cut:], [])]
    rows = [[col[r] if r < len(col) else ("", "black", "normal") for col in columns] for r in range(max(map(len, columns)))]
    found = [[(part, WAIT if item.waits is not None and len(item.waits) else "black", "normal")]
             for part in textwrap.wrap(item.finding, chars - 3, subsequent_indent="    ")] if item.finding else []
    return [[(head, "black", "bold")]] + found + rows


def _present(items: Sequence[Item]) -> list[bool]:
    """Which of CLASSES occur in any of the traces (for the legend)."""
    return [any(x) for x in zip(*(it.lanes.present() for it in items))] if items else [False] * len(CLASSES)


def _lane_in(n: int) -> float:
    return float(np.clip(7.0 / max(n, 1), 0.11, 0.32))


def _figure(items: Sequence[tuple[Item, int]], span_ns: int, title: str | None, xlabel: str) -> Figure:
    """The picture of ``items``, each ``(item, t0)`` drawn from its own ``t0`` (ns) over ``span_ns``."""
    line_in = FONT * 1.45 / 72
    chars = int((WIDTH_IN - 0.4) * 72 / (FONT * 0.52))
    sections = []
    for it, t0 in items:
        n = _rows(it)
        sections.append((it, t0, _header(it, chars), max(n, 1) * _lane_in(n) + 0.15))
    title_in = 0.45 if title else 0.0
    legend_in = 0.35
    axis_in = 0.45  # x tick labels under each axes
    legend_rows = -(-(len(CLASSES) + 6) // LEGEND_COLUMNS)  # (at most this many entries: room for every row)
    height = title_in + legend_in + (legend_rows - 1) * line_in * 1.25 + sum(len(h) * line_in + 0.12 + a + axis_in for _, _, h, a in sections) + 0.25
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    FigureCanvasAgg(fig)
    y = height - 0.15  # inches from the bottom, moving down
    if title:
        fig.text(0.4 / WIDTH_IN, y / height, title, fontsize=FONT + 3, weight="bold", va="top")
        y -= title_in
    shown = [it for it, _ in items]
    handles: list[Artist] = [Patch(color=c, label=l) for c, l, on in zip(COLORS, CLASSES, _present(shown)) if on]
    handles.append(Patch(color=SHADE, alpha=0.35, label="copy or communication under compute"))
    if any(it.lanes.devices > 1 for it in shown):
        handles.append(Patch(color=MULTI, label="2+ devices busy"))
    if any(it.waits is not None for it in shown):
        handles.append(Patch(color=WAIT, label="waiting for the last rank at a collective"))
    if any(it.critical is not None and not it.host_path for it in shown):
        handles.append(Patch(color=CRITICAL, label="the window's critical path on this rank"))
    if any(it.critical is not None and bool(it.critical["host"].any()) for it in shown):
        handles.append(Patch(color=CRITICAL_HOST, label="the critical path held by the host"))
    if any(len(it.lanes.steps) for it in shown):
        handles.append(Line2D([], [], color=STEP, linewidth=0.8, linestyle=":", label="step start (GPU)"))
    rows = -(-len(handles) // LEGEND_COLUMNS)  # (every entry whole, in rows of its own: nothing drawn over the titles)
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.4 / WIDTH_IN, y / height), ncol=LEGEND_COLUMNS, fontsize=FONT,
               frameon=False, borderaxespad=0)
    y -= legend_in + (rows - 1) * line_in * 1.25
    px_ns = span_ns / ((WIDTH_IN - LEFT_IN - RIGHT_IN) * DPI) if span_ns else 1.0
    axes = []
    for it, t0, lines, ax_in in sections:
        for cells in lines:
            for c, (text, color, weight) in enumerate(cells):
                x = (0.4 + c * (WIDTH_IN - 0.4) / 2) / WIDTH_IN
                fig.text(x, y / height, text, fontsize=FONT, color=color, weight=weight, va="top")
            y -= line_in
        y -= 0.12
        ax = fig.add_axes((LEFT_IN / WIDTH_IN, (y - ax_in) / height, (WIDTH_IN - LEFT_IN - RIGHT_IN) / WIDTH_IN, ax_in / height))
        _draw(ax, it, t0, span_ns, px_ns)
        axes.append(ax)
        y -= ax_in + axis_in
    if axes:
        axes[-1].set_xlabel(xlabel, fontsize=FONT)
    return fig


def image(fig: Figure, fmt: str = "png") -> bytes:
    """``fig`` as the bytes of a ``fmt`` image (any format matplotlib writes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=DPI, facecolor="white")
    return buf.getvalue()


def timeline_figure(item: Item) -> Figure:
    """One trace over its window (module doc), from its first device event."""
    lo, hi = item.lanes.window_ns
    return _figure([(item, lo)], max(hi - lo, 1), None, "time since the first device event (ms)")


def timeline(item: Item, fmt: str = "png") -> bytes:
    """:func:`timeline_figure` as the bytes of a ``fmt`` image."""
    return image(timeline_figure(item), fmt)


def compare_figure(groups: Sequence[Sequence[Item]], title: str | None = None) -> Figure:
    """Groups of traces stacked on one time axis (module doc): each group from its earliest device event
    (the lanes' ``window_ns``, on the clock the group shares), over the longest group."""
    placed = []
    span = 1
    for g in groups:
        if not g:
            continue
        t0 = min(it.lanes.window_ns[0] for it in g)
        span = max(span, max(it.lanes.window_ns[1] for it in g) - t0)
        placed += [(it, t0) for it in g]
    items = [it for it, _ in placed]
    shared = any(len(g) > 1 for g in groups)
    xlabel = ("time since the first device event of each window's ranks, on their shared clock, "
              "or of each other trace (ms)") if shared else "time since each trace's first device event (ms)"
    return _figure(placed, span, title or "compared: " + ", ".join(i.label for i in items), xlabel)


def compare(groups: Sequence[Sequence[Item]], title: str | None = None, fmt: str = "png") -> bytes:
    """:func:`compare_figure` as the bytes of a ``fmt`` image."""
    return image(compare_figure(groups, title), fmt)


def item_of(report: OverlapReport, lanes: TimelineLanes) -> Item:
    """The :class:`Item` of one analysed trace, labelled by :func:`label_of` as a name is shown
    (:func:`traceprobe.console.one_line`: no control byte, bidi override or non-UTF-8 byte drawn raw)."""
    from ..console import one_line

    return Item(one_line(title_of(report.path, report.info, report.rank)), report, lanes)


def with_findings(items: Sequence[Item], summary: Summary) -> list[Item]:
    """``items`` with their rank's waits at collectives (a band of their own: :class:`Item`) and their window's top
    finding and action (:func:`.actions.top_findings`). Waits are drawn only where the lanes keep their trace's own
    clock (the collectives' times are each rank's own)."""
    from dataclasses import replace

    from ..console import one_line
    from .actions import tops_by_path

    tops = tops_by_path(summary)
    where = {rep.path: (run.name, win.label) for run in summary.runs for win in run.windows for rep in win.reports}
    colls = {(c.run, c.window): c for c in summary.collectives}
    paths = {(w.run, w.window): w.critical_path for w in summary.what_ifs if not w.path}  # (a window of ranks)
    paths_of = {w.path: w.critical_path for w in summary.what_ifs if w.path}  # (a trace on its own)
    out = []
    for it in items:
        r = it.report
        top = tops.get(r.path)
        finding = one_line(f"top finding: {top.label}" + (f"; do: {top.do}" if top.do else "")) if top else ""
        c = colls.get(where.get(r.path, ("", "")))
        waits = None
        if c is not None and r.rank is not None and not it.lanes.clock and not c.per_rank.empty:
            pr = c.per_rank[(c.per_rank["rank"] == r.rank) & (c.per_rank["wait_ns"] > 0)]
            start = np.asarray(pr["start_ns"], dtype=np.int64)
            waits = pd.DataFrame({"start_ns": start, "end_ns": start + np.asarray(pr["wait_ns"], dtype=np.int64)})
            total = int(pr["wait_ns"].sum())
            finding += ("; " if finding else "") + (f"waited {total / 1e6:,.1f} ms in the window for the last rank at collectives"
                                                     if total else "never waited for another rank at a collective")
        critical = None
        alone = r.path in paths_of
        cp = paths_of.get(r.path, paths.get(where.get(r.path, ("", ""))))
        if cp is not None and len(cp) and not it.lanes.clock:
            # (a trace on its own: the path is always on it, so only where the host, not its device, held it)
            on = (np.asarray(cp["lane"]) == "host") if alone else np.asarray(cp["rank"]) == (r.rank if r.rank is not None else -1)
            if on.any():
                critical = pd.DataFrame({"start_ns": np.asarray(cp["start_ns"], dtype=np.int64)[on],
                                         "end_ns": np.asarray(cp["end_ns"], dtype=np.int64)[on],
                                         "host": (np.asarray(cp["lane"]) == "host")[on]})
        out.append(replace(it, waits=waits, finding=finding, critical=critical, host_path=alone))
    return out


def per_trace_paths(output: str | Path, labels: Sequence[str]) -> list[Path]:
    """``output`` for one trace; ``<stem>.<label><suffix>`` beside it for several
    (a repeated label gets ``.2``, ``.3``...)."""
    out = Path(output)
    if len(labels) == 1:
        return [out]
    seen: dict[str, int] = {}
    paths = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        name = label if seen[label] == 1 else f"{label}.{seen[label]}"
        paths.append(out.with_name(f"{out.stem}.{name}{out.suffix or '.png'}"))
    return paths
