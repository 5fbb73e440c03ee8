"""Pictures of traces: a timeline per trace, and variants of one experiment compared.

matplotlib through its Agg canvas (``matplotlib.figure.Figure``, no pyplot): no
display is needed and no global backend is changed.

Renderers only: each function takes loaded traces and their reports and returns
the image's bytes; the caller writes them (through :mod:`traceprobe.fileio`).

- :func:`timeline`: one lane per (device, stream) over the trace window; compute
  kernels, copies, communication kernels and memsets in distinct colours; where
  copies or communication ran under compute, the device's lanes are shaded; with
  two or more devices a top lane marks when two or more were busy; the verdicts
  are the title block.
- :func:`compare`: several traces stacked on one time axis, each relative to its
  own start (e.g. the three compute-copy variants), each with its verdicts.

Slices less than a quarter pixel apart are merged before drawing and every slice is at least
a fraction of a pixel wide, so a trace of a million kernels draws as fast as one
of a thousand and short kernels stay visible.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import intervals as iv
from ..analysis.busy import comm_mask, device_intervals
from ..analysis.per_trace import OverlapReport
from ..analysis.timeline import under_compute
from ..reading import Trace
from .chrome import trace_stem

CLASSES = ("compute kernel", "memcpy", "communication kernel", "memset")
COLORS = ("#1f77b4", "#ff7f0e", "#9467bd", "#7f7f7f")
SHADE = "#2ca02c"
MULTI = "#17becf"
LEVEL_COLORS = {"confirmed": "#1a7f37", "partial": "#9a6700", "none": "#cf222e", "n/a": "#555555"}
WIDTH_IN, DPI = 14.0, 110
LEFT_IN, RIGHT_IN = 1.25, 0.25
FONT = 8.5


@dataclass(frozen=True)
class Item:
    """One trace to draw: a label, the trace and its report."""

    label: str
    trace: Trace
    report: OverlapReport


def label_of(path: str | Path, info: dict | None = None, rank: int | None = None) -> str:
    """``workload.variant[.rankR]`` from manifest facts, else the file name without ``.pt.trace.json.gz``."""
    info = info or {}
    if info.get("workload"):
        label = ".".join(x for x in (info.get("workload"), info.get("variant")) if x)
        return label if rank is None else f"{label}.rank{rank}"
    return trace_stem(path)


def _lanes(trace: Trace) -> pd.DataFrame:
    ev = trace.device_events
    return ev[["device", "stream"]].drop_duplicates().sort_values(["device", "stream"]).reset_index(drop=True)  # pyright: ignore  (pandas/matplotlib stubs)


def _rects(x0, x1, y0, y1) -> np.ndarray:
    return np.stack([np.stack([x0, y0], -1), np.stack([x0, y1], -1), np.stack([x1, y1], -1), np.stack([x1, y0], -1)], 1)


def _draw(ax, item: Item, t0: int, span_ns: int, px_ns: float) -> None:
    trace = item.trace
    ev = trace.device_events
    lanes = _lanes(trace)
    n = len(lanes)
    multi = lanes["device"].nunique() > 1
    top = 1 if multi else 0  # lane 0 is the "2+ devices busy" summary with several devices
    ax.set_xlim(0, span_ns / 1e6)
    ax.set_ylim(max(n + top, 1) - 0.5, -0.5)
    if not n:
        ax.text(0.5, 0.5, "no device activity", transform=ax.transAxes, ha="center", va="center")
        ax.set_yticks([])
        return
    lane = pd.MultiIndex.from_frame(lanes).get_indexer(pd.MultiIndex.from_frame(ev[["device", "stream"]])) + top  # pyright: ignore  (pandas/matplotlib stubs)
    cls = np.select([(ev["kind"] == "memcpy").to_numpy(), ev["is_comm"].to_numpy(), (ev["kind"] == "memset").to_numpy()], [1, 2, 3], 0)
    # merge slices less than a quarter pixel apart, per lane and class; then widen tiny ones
    gap = int(px_ns / 4)
    k, s, e = iv.grouped_union(lane * 4 + cls, ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy() + gap)
    e = np.maximum(e - gap, s + int(px_ns * 0.6))
    x0, x1 = (s - t0) / 1e6, (e - t0) / 1e6
    y = (k // 4).astype(float)
    for c, color in enumerate(COLORS):
        m = (k % 4) == c
        if m.any():
            ax.add_collection(PolyCollection(_rects(x0[m], x1[m], y[m] - 0.4, y[m] + 0.4), facecolors=color, edgecolors="none", zorder=2))  # pyright: ignore  (pandas/matplotlib stubs)
    # shade each device's lanes where copies or communication ran under compute
    shade = []
    span = pd.Series(lanes.index + top).groupby(lanes["device"].to_numpy()).agg(["min", "max"])
    mk = {**under_compute(trace, (ev["kind"] == "memcpy").to_numpy())}
    for d, ivs in under_compute(trace, comm_mask(trace)).items():
        mk[d] = iv.union(np.r_[mk[d][0], ivs[0]], np.r_[mk[d][1], ivs[1]]) if d in mk else ivs
    for d, (s_, e_) in mk.items():
        lo, hi = span.loc[d, "min"], span.loc[d, "max"]
        shade.append(_rects((s_ - t0) / 1e6, (np.maximum(e_, s_ + int(px_ns * 0.6)) - t0) / 1e6, np.full(len(s_), lo - 0.5), np.full(len(s_), hi + 0.5)))
    if shade:
        ax.add_collection(PolyCollection(np.concatenate(shade), facecolors=SHADE, alpha=0.22, edgecolors="none", zorder=1))  # pyright: ignore  (pandas/matplotlib stubs)
    if multi:
        two = iv.coverage_at_least(list(device_intervals(trace).values()), 2)
        if len(two[0]):
            ax.add_collection(PolyCollection(_rects((two[0] - t0) / 1e6, (two[1] - t0) / 1e6, np.full(len(two[0]), -0.4), np.full(len(two[0]), 0.4)),  # pyright: ignore  (pandas/matplotlib stubs)
                                             facecolors=MULTI, edgecolors="none", zorder=2))
    labels = (["2+ devices busy"] if multi else []) + [f"{trace.device_label(d)} stream {s}" for d, s in lanes.itertuples(index=False)]
    fs = float(np.clip(300 / max(n + top, 1), 5.5, FONT))
    ax.set_yticks(np.arange(n + top), labels, fontsize=fs)
    bounds = np.flatnonzero(np.diff(lanes["device"].to_numpy())) + top + 0.5
    for b in list(bounds) + ([0.5] if multi else []):
        ax.axhline(b, color="#444444", linewidth=0.6, zorder=3)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5, zorder=0)
    ax.set_axisbelow(True)


def _header(item: Item, chars: int) -> list[list[tuple[str, str, str]]]:
    """Rows of (text, colour, weight) cells: the label and window, then the verdicts,
    in two columns when there are many."""
    lo, hi = item.report.window_ns
    ev = item.trace.device_events
    head = f"{item.label}: window {(hi - lo) / 1e6:,.1f} ms, {len(ev):,} device events on {len(_lanes(item.trace))} stream(s)"
    verdicts = item.report.verdicts
    cols = 2 if len(verdicts) > 10 else 1
    width = chars // cols - 3
    blocks = [[(part, LEVEL_COLORS.get(v.level, "black"), "normal") for part in textwrap.wrap(f"[{v.level}] {v.text}", width, subsequent_indent="    ")]
              for v in verdicts] or [[("no figure to judge", "#555555", "normal")]]
    sizes = np.cumsum([len(b) for b in blocks])
    cut = int(np.searchsorted(sizes, sizes[-1] / 2)) + 1 if cols == 2 else len(blocks)  # whole verdicts per column
    columns = [sum(blocks[:cut], []), sum(blocks[cut:], [])]
    rows = [[col[r] if r < len(col) else ("", "black", "normal") for col in columns] for r in range(max(map(len, columns)))]
    return [[(head, "black", "bold")]] + rows


def _present(items: Sequence[Item]) -> list[bool]:
    """Which of CLASSES occur in any of the traces (for the legend)."""
    evs = [it.trace.device_events for it in items]
    memcpy = any((ev["kind"] == "memcpy").any() for ev in evs)
    comm = any(ev["is_comm"].any() for ev in evs)
    memset = any((ev["kind"] == "memset").any() for ev in evs)
    compute = any(((ev["kind"] == "kernel") & ~ev["is_comm"]).any() for ev in evs)
    return [compute, memcpy, comm, memset]


def _lane_in(n: int) -> float:
    return float(np.clip(7.0 / max(n, 1), 0.11, 0.32))


def _render(items: Sequence[Item], span_ns: int, title: str | None, fmt: str) -> bytes:
    line_in = FONT * 1.45 / 72
    chars = int((WIDTH_IN - 0.4) * 72 / (FONT * 0.52))
    sections = []
    for it in items:
        n = len(_lanes(it.trace)) + (1 if it.trace.device_events["device"].nunique() > 1 else 0)
        sections.append((it, _header(it, chars), max(n, 1) * _lane_in(n) + 0.15))
    title_in = 0.45 if title else 0.0
    legend_in = 0.35
    axis_in = 0.45  # x tick labels under each axes
    height = title_in + legend_in + sum(len(h) * line_in + 0.12 + a + axis_in for _, h, a in sections) + 0.25
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    FigureCanvasAgg(fig)
    y = height - 0.15  # inches from the bottom, moving down
    if title:
        fig.text(0.4 / WIDTH_IN, y / height, title, fontsize=FONT + 3, weight="bold", va="top")
        y -= title_in
    handles = [Patch(color=c, label=l) for c, l, shown in zip(COLORS, CLASSES, _present(items)) if shown]
    handles.append(Patch(color=SHADE, alpha=0.35, label="copy or communication under compute"))
    if any(it.trace.device_events["device"].nunique() > 1 for it in items):
        handles.append(Patch(color=MULTI, label="2+ devices busy"))
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(LEFT_IN / WIDTH_IN, y / height), ncol=6, fontsize=FONT, frameon=False, borderaxespad=0)
    y -= legend_in
    px_ns = span_ns / ((WIDTH_IN - LEFT_IN - RIGHT_IN) * DPI) if span_ns else 1.0
    axes = []
    for it, lines, ax_in in sections:
        for cells in lines:
            for c, (text, color, weight) in enumerate(cells):
                x = (0.4 + c * (WIDTH_IN - 0.4) / 2) / WIDTH_IN
                fig.text(x, y / height, text, fontsize=FONT, color=color, weight=weight, va="top")
            y -= line_in
        y -= 0.12
        ax = fig.add_axes((LEFT_IN / WIDTH_IN, (y - ax_in) / height, (WIDTH_IN - LEFT_IN - RIGHT_IN) / WIDTH_IN, ax_in / height))
        _draw(ax, it, it.report.window_ns[0], span_ns, px_ns)
        axes.append(ax)
        y -= ax_in + axis_in
    if axes:
        axes[-1].set_xlabel("time since the first device event (ms)", fontsize=FONT)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=DPI, facecolor="white")
    return buf.getvalue()


def timeline(item: Item, fmt: str = "png") -> bytes:
    """One trace over its window (module doc), as the bytes of a ``fmt`` image (any format matplotlib writes)."""
    lo, hi = item.report.window_ns
    return _render([item], max(hi - lo, 1), None, fmt)


def compare(items: Sequence[Item], title: str | None = None, fmt: str = "png") -> bytes:
    """Several traces stacked on one time axis, each relative to its own first device event, as image bytes."""
    span = max([r.report.window_ns[1] - r.report.window_ns[0] for r in items] + [1])
    return _render(items, span, title or "compared: " + ", ".join(i.label for i in items), fmt)


def item_of(trace: Trace, report: OverlapReport) -> Item:
    """The :class:`Item` of one analysed trace, labelled by :func:`label_of`."""
    return Item(label_of(report.path, report.info, report.rank), trace, report)


def timeline_of(trace: Trace, report: OverlapReport, fmt: str = "png") -> bytes:
    """:func:`timeline` of one analysed trace: a module-level function, so that
    worker processes can draw the picture where the trace was analysed."""
    return timeline(item_of(trace, report), fmt)


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
