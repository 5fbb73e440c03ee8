"""``traceprobe job``'s text: the whole-job report (:class:`traceprobe.analysis.job.job.JobReport`) for a person.

Nothing is computed here. Per window of two or more ranks: each figure's min, median, p95 and max across ranks under
a name and unit a person reads (:data:`FIGURES`: per step first, in ``ms/step``; then shares in %; then the window's
totals, labelled ``in the window``), the outlier ranks and why, the ranks that arrived last at collectives per process
group and the wait they caused, the straggler and the one action it calls for, the clocks, and the window replayed
(where its ranks carry their graph): its top what-if and where its critical path ran. Every line fits the width it is
given (the terminal's; 80 columns on a pipe or in a file): a sentence wraps under its label, a figure's name too long
for its column stands on its own line above its values, and a name is cut in the middle (``…``) only where it is longer
than its line. ``--format json`` keeps the keys and integer ns (:func:`traceprobe.analysis.job.job.job_json`).
"""

from __future__ import annotations

import math

from ..analysis.causal.what_if_windows import LABELS
from ..analysis.job.causes import WindowCauses
from ..analysis.job.job import JobReport
from .actions import DO_CAUSE, DO_KIND
from .grid import GAP, Column, cell, lines, para, shorten

FIGURES = (
    ("mean_step_ns", "step time", "step"),
    ("compute_per_step_ns", "compute", "step"),
    ("exposed_comm_per_step_ns", "exposed communication", "step"),
    ("exposed_copy_per_step_ns", "exposed copies", "step"),
    ("other_per_step_ns", "memsets alone", "step"),
    ("idle_per_step_ns", "idle", "step"),
    ("utilization", "busy (mean GPU utilization)", "share"),
    ("comm_overlap", "communication under compute", "share"),
    ("copy_overlap", "copies under compute", "share"),
    ("stream_concurrency", "two or more streams busy", "share"),
    ("cpu_gpu_overlap", "CPU work beside the GPU", "share"),
    ("mfu", "MFU (model FLOPs / window / peak)", "share"),
    ("duration_ns", "trace window", "total"),
    ("gpu_busy_ns", "device busy", "total"),
    ("work_ns", "device work outside collectives", "total"),
    ("comm_ns", "time in collectives", "total"),
)
"""(figure key of :data:`traceprobe.analysis.job.job.FIGURES`, its name, its kind): ``step`` per step (ms/step), ``share``
a 0..1 fraction (%), ``total`` over the window (ms, labelled ``in the window``); in the order shown."""

HOST_FIGURES = ("mean_step_ns",)
"""The figures of :data:`FIGURES` a window without device work has (the others read zero there by definition)."""

PART_WORDS = {"compute": "compute", "other_busy": "other device work", "launch": "launch-bound dispatch",
              "dependency": "waiting for other streams' work", "queued": "queued work waiting", "unattributed": "unattributed idle",
              **{k: v for k, v in LABELS.items() if k not in ("dependency", "queued")}}
"""A straggler's cause (:data:`traceprobe.analysis.job.collectives.PRE_PARTS`: compute, other device work, an idle cause) in words."""
PART_ACTIONS = {**DO_CAUSE, "compute": "balance the work across ranks (data, experts or stages)",
                "other_busy": "balance the device work across ranks", "launch": DO_CAUSE["dispatch"],
                "dependency": DO_KIND["stream_wait"], "queued": DO_KIND["queued_wait"]}
"""The action a straggler's cause (:data:`traceprobe.analysis.job.collectives.PRE_PARTS`) calls for."""


def value(kind: str, x: float) -> str:
    """A figure's value with its unit (``-`` where undefined): ``39.4 ms/step``, ``48.1%``, ``121.0 ms``."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if kind == "share":
        return f"{100 * x:.1f}%"
    return f"{x / 1e6:,.1f} ms" + ("/step" if kind == "step" else "")


def figure_label(figure: str) -> tuple[str, str]:
    """A figure's name for a person (window totals labelled ``in the window``) and its kind (:data:`FIGURES`)."""
    for key, name, kind in FIGURES:
        if key == figure:
            return name + (" in the window" if kind == "total" and key != "duration_ns" else ""), kind
    return figure, "share" if not figure.endswith("_ns") else "total"


def straggler_line(c: WindowCauses) -> str:
    """The straggler in one sentence: ``rank 1 arrived last at its collectives; the others waited up to 6.8 ms/step;
    removing its syncs gives back 8.3 ms/step (the job replayed); ...`` where its cause is its what-if, else ``rank 1
    arrived last at its collectives: +15.5 ms/step more launch-bound dispatch than the other ranks; ...``."""
    late = c.straggler
    steps = max(c.steps, 1)
    waited = f"the others waited up to {c.caused_wait_ns / steps / 1e6:,.1f} ms/step"
    if not c.cause:
        return (f"rank {late} arrived last at its collectives; {waited}; its device time shows no excess over the other "
                "ranks': look at its host time before its first device work")
    what = PART_WORDS.get(c.cause, c.cause)
    if c.gain_per_step_ns > 0:  # (named by its what-if)
        return (f"rank {late} arrived last at its collectives; {waited}; removing its {what} gives back "
                f"{c.gain_per_step_ns / 1e6:,.1f} ms/step (the job replayed); overlapping communication on the waiting ranks "
                "would not help")
    each = c.excess_per_step_ns.get(c.cause, 0) or c.excess_ns.get(c.cause, 0) / steps
    return (f"rank {late} arrived last at its collectives: +{each / 1e6:,.1f} ms/step more {what} than the other ranks; "
            f"{waited}; overlapping communication on the waiting ranks would not help")


HEADERS = ("min", "median", "p95", "max")
"""The columns of a window's table, after the figure's name."""


def figure_lines(named: list, width: int | None, value_width: int) -> list[str]:
    """A window's table (``named``: ((name, kind), min, median, p95, max) per figure), indented two: the values
    right-aligned in columns of ``value_width``, two spaces apart where the names fit beside them, else one; a name
    still too long for what is left stands on its own line above its values (cut in the middle only where longer than
    the line)."""
    names = [n for (n, _), *_ in named]
    room = max(len(n) for n in [*names, "figure"])
    pad = 1
    if width is not None and 2 + room + len(HEADERS) * (value_width + 2) > width:
        pad = 0
        room = max(min(room, width - 2 - len(HEADERS) * (value_width + len(GAP))), len("figure"))
    values = [Column(h, [cell(value(kind, xs[i])) for (_, kind), *xs in named], right=True, width=value_width + pad)
              for i, h in enumerate(HEADERS)]
    above = {i: [cell(shorten(n, width - 2) if width else n)] for i, n in enumerate(names) if len(n) > room}
    col = Column("figure", [cell("" if i in above else n) for i, n in enumerate(names)], width=room)
    return ["  " + t.plain for t in lines([col, *values], before=above)]


def job_text(job: JobReport, top: int = 5, width: int | None = None) -> str:
    """The job report as text (module doc); ``top`` ranks named per list; every line at most ``width`` columns (None:
    each paragraph on one line): text wrapped under its label (:func:`.grid.para`), a name cut in the middle only where
    longer than its line."""
    out: list[str] = []

    def add(text: str, indent: int = 0) -> None:
        out.extend(t.plain for t in para(text, width, indent))

    causes = {(c.run, c.window): c for c in job.causes}
    clocks = {(c.run, c.window): c for c in job.clocks}
    what_ifs: dict[tuple[str, str], list] = {}
    for wi in job.what_ifs:
        what_ifs.setdefault((wi.run, wi.window), []).append(wi)
    order = {key: i for i, (key, _, _) in enumerate(FIGURES)}
    f = job.figures
    value_width = max([len(h) for h in HEADERS] + [len(value(figure_label(str(k))[1], x)) for k, *xs in
                       zip(f["figure"], f["min"], f["median"], f["p95"], f["max"]) for x in xs])
    for key, g in f.groupby(["run", "window"], sort=False):
        run, window = key  # type: ignore[misc]
        add(f"{run} {window}: {int(g['ranks'].max())} ranks")
        g = g.assign(_order=g["figure"].map(lambda f: order.get(f, len(order)))).sort_values("_order", kind="stable")
        host_only = bool((g["figure"] == "gpu_busy_ns").any()) and not (g.loc[g["figure"] == "gpu_busy_ns", "max"] > 0).any()
        if host_only:  # (a CPU-only window: every device figure is zero by definition; the host's figures are what it has)
            g = g[g["figure"].isin(HOST_FIGURES)]
            add("no device work on any rank (a CPU-only job): its collectives run on the host (gloo), and its critical path "
                "reads the host's time (its host collectives are no cross-rank edges of the replay: no what-if)", 2)
        named = [(figure_label(str(f)), lo, med, p95, hi) for f, lo, med, p95, hi in
                 zip(g["figure"], g["min"], g["median"], g["p95"], g["max"])]
        out += figure_lines(named, width, value_width)
        o = job.outliers[(job.outliers["run"] == run) & (job.outliers["window"] == window)]
        if len(o):
            add(f"outliers ({len(o)}" + (f", the first {top * 2}" if len(o) > top * 2 else "") + "):", 2)
            for r in o.head(top * 2).itertuples(index=False):
                name, kind = figure_label(str(r.figure))
                rel = f" ({100 * (r.value / r.median - 1):+.0f}%)" if kind != "share" and r.median else ""
                add(f"rank {r.rank}: {name} {value(kind, r.value)} against a median of {value(kind, r.median)}{rel}", 4)
        s = job.stragglers[(job.stragglers["run"] == run) & (job.stragglers["window"] == window)]
        for pg, sg in s.groupby("pg", sort=False):
            d0 = str(sg["pg_desc"].tolist()[0])
            add(f"arrived last, process group {pg}" + (f" ({d0})" if d0 else "") + ":", 2)
            for r in sg.head(top).itertuples():
                add(f"rank {r.rank} in {r.last} of {r.collectives} (the others waited {r.caused_wait_ns / 1e6:,.1f} ms in the "
                    "window)", 4)
        c = causes.get((run, window))
        if c is not None and c.straggler is not None and c.label:
            add(f"straggler: {straggler_line(c)}", 2)
            if PART_ACTIONS.get(c.cause):
                add(f"do: {PART_ACTIONS[c.cause]} (rank {c.straggler})", 2)
        k = clocks.get((run, window))
        if k is not None:
            add(k.describe(), 2)
        for wi in what_ifs.get((run, window), []):  # (the window replayed: its top what-if and where its critical path ran)
            for x in (wi.finding(), wi.path_line()):
                if x:
                    add(x, 2)
        if (run, window) in job.notes:
            add(job.notes[(run, window)], 2)
    if not out:
        add("no window of two or more ranks (one rank's trace: traceprobe overlap-report PATH)")
    return "\n".join(out) + "\n"
