"""The whole job: every figure's distribution across ranks, the outlier ranks and why, stragglers counted.

Built from a :class:`.summary.Summary` (of traces or of summaries, :mod:`.summaries`): nothing here reads a
file, and nothing needs more than the per-rank reports and the matched collectives.

Definitions (quoted by docs/measures.md), per window of a run (:mod:`.run`):

- *figures* (:data:`FIGURES`): the report's headline figures (:attr:`.per_trace.OverlapReport.headline`), its MFU
  (:func:`..work.efficiency.window_mfu`; reports only, not summaries) and, from the GPU time breakdown (:mod:`.breakdown`),
  each part summed over the rank's devices and divided by its steps (``*_per_step_ns``; one step without steps).
- *distribution*: over the window's ranks, min, median, p95 (linear interpolation, numpy's default) and max of
  each figure; NaN figures are left out (``ranks`` counts the others).
- *outlier*: a rank whose figure lies more than :data:`OUTLIER_Z` robust deviations (1.4826 x the median
  absolute deviation) from the median, and by more than :data:`OUTLIER_MIN` of the median and the verdicts' floor
  (times: :data:`..advice.verdicts.MIN_NS`, 50 µs; a per-step figure's a step) or :data:`OUTLIER_MIN_FRACTION`
  (fractions); *why*: the figure, the rank's value and the median.
- *stragglers*, per process group: for each rank, how many of the group's matched collectives it arrived at
  last (``last``: its kernel started last, and later than another rank's, :func:`.collectives.match_window`),
  their share, and the wait it caused (``caused_wait_ns``: the other ranks' kernel time before its arrival, summed over those collectives).
- *causes*: the window's waits, straggler and blame (:func:`.causes.window_causes`) as the Summary holds them.

Two ways in, one result: :func:`job_report` takes a :class:`.summary.Summary` (of traces or summaries, every
report whole); :func:`job_report_from_summaries` reads summary files for thousands of ranks without building
their reports: each file is read and checked once, and the few fields the job needs (:func:`.rank_summary.rank_item`: headline, breakdown,
steps, collectives, and what the causes read: :func:`.cause_tables.rank_columns`) are kept as arrays, and the causes
of every window are computed on them for all its ranks at once (:mod:`.cause_tables`).
Both give the same figures, outliers, stragglers, causes and clocks (tests/test_job.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import Failure
from ..advice.verdicts import MIN_NS
from ..causal.replay_memory import replay_budget
from ..causal.what_if_windows import WindowWhatIf, window_instances, window_what_if
from ..summary import Summary
from ..work.efficiency import window_mfu
from .cause_tables import RankColumns, rank_tables
from .causes import WindowCauses, window_causes
from .clocks import ClockEstimate, estimate_clocks
from .collectives import match_rows
from .rank_summary import BREAKDOWN_PARTS, COLL, FIGURES, interned, rank_item
from .window_replay import Mapper, window_graphs

FRACTIONS = {"utilization", "comm_overlap", "copy_overlap", "stream_concurrency", "cpu_gpu_overlap", "mfu"}
OUTLIER_Z = 3.5
"""How many robust deviations from the median make an outlier..."""
OUTLIER_MIN = 0.05
"""...and by at least this share of the median and :data:`..advice.verdicts.MIN_NS` (times: a rank 16% off a median of
4 µs of memsets a step is no outlier)..."""
OUTLIER_MIN_FRACTION = 0.05
"""...or this much (fractions, 0..1)."""

DIST_COLUMNS = ["run", "window", "figure", "ranks", "min", "median", "p95", "max"]
OUTLIER_COLUMNS = ["run", "window", "rank", "figure", "value", "median", "why"]
STRAGGLER_COLUMNS = ["run", "window", "pg", "pg_desc", "rank", "last", "collectives", "share", "caused_wait_ns"]


@dataclass(frozen=True)
class JobReport:
    """The whole job (module docstring).

    Attributes:
        figures: per window and figure: ``run``, ``window``, ``figure`` (str), ``ranks`` (int64), ``min``, ``median``,
            ``p95``, ``max`` (float64; ns or 0..1 fractions).
        outliers: ``run``, ``window``, ``rank`` (int64), ``figure`` (str), ``value``, ``median`` (float64), ``why`` (str).
        stragglers: per window, process group and rank that arrived last at least once: ``run``, ``window``, ``pg``,
            ``pg_desc`` (str), ``rank``, ``last``, ``collectives`` (int64), ``share`` (float64), ``caused_wait_ns``
            (int64); most ``last`` first.
        causes: the Summary's :class:`.causes.WindowCauses`, one per window of several ranks.
        clocks: the Summary's :class:`.clocks.ClockEstimate`, one per such window.
        what_ifs: per such window whose ranks carry their graph, its what-ifs and critical path
            (:class:`~traceprobe.analysis.causal.what_if_windows.WindowWhatIf`).
        notes: per window, what could not be done there (``notes`` below).
    """

    figures: pd.DataFrame
    outliers: pd.DataFrame
    stragglers: pd.DataFrame
    causes: tuple[WindowCauses, ...]
    clocks: tuple[ClockEstimate, ...]
    what_ifs: tuple[WindowWhatIf, ...] = ()
    notes: dict[tuple[str, str], str] = field(default_factory=dict)
    """Per window (``run``, ``window``), what the report could not do there, in words (a window too large to replay)."""


def rank_figures(reports: list, ranks: list[int]) -> pd.DataFrame:
    """One row per rank (index ``rank``), one float64 column per figure of :data:`FIGURES` (module docstring)."""
    rows = []
    for rep in reports:
        h = dict(rep.headline) | window_mfu(getattr(rep, "extra", {}))  # (MFU, where the rank recorded shapes)
        steps = max(len(rep.steps), 1) if rep.steps is not None else 1
        b = rep.breakdown
        for p in BREAKDOWN_PARTS:
            h[p.replace("_ns", "_per_step_ns")] = float(b[p].sum()) / steps if b is not None and p in b else np.nan
        rows.append([h.get(f, np.nan) for f in FIGURES])
    return pd.DataFrame(np.array(rows, dtype=np.float64).reshape(len(rows), len(FIGURES)), columns=list(FIGURES),
                        index=pd.Index(ranks, name="rank"))


def _distribution(figs: pd.DataFrame, run: str, window: str) -> tuple[list[list], list[list]]:
    v = figs.to_numpy(np.float64)
    ranks = figs.index.to_numpy(np.int64)
    dist, out = [], []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (all-NaN figures: no copies, one device...)
        ok = np.isfinite(v)
        n = ok.sum(axis=0)
        q = np.nanquantile(np.where(ok, v, np.nan), [0.0, 0.5, 0.95, 1.0], axis=0) if v.size and n.any() else np.full((4, v.shape[1]), np.nan)
        med = q[1]
        mad = np.nanmedian(np.abs(v - med), axis=0) * 1.4826 if v.size and n.any() else np.full(v.shape[1], np.nan)
    for j, f in enumerate(figs.columns):
        if n[j] == 0:
            continue
        dist.append([run, window, f, int(n[j]), *(float(x) for x in q[:, j])])
        floor = OUTLIER_MIN_FRACTION if f in FRACTIONS else max(OUTLIER_MIN * abs(med[j]), MIN_NS)
        dev = np.abs(v[:, j] - med[j])
        hit = ok[:, j] & (dev > OUTLIER_Z * mad[j]) & (dev > floor)
        for i in np.flatnonzero(hit).tolist():
            val = float(v[i, j])
            out.append([run, window, int(ranks[i]), f, val, float(med[j]), _why(f, val, float(med[j]))])
    return dist, out


def _fmt(f: str, x: float) -> str:
    return f"{100 * x:.1f}%" if f in FRACTIONS else f"{x / 1e6:,.2f} ms"


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _why(f: str, val: float, med: float) -> str:
    rel = f" ({100 * (val / med - 1):+.0f}%)" if f not in FRACTIONS and med else ""
    return f"{f} {_fmt(f, val)} against a median of {_fmt(f, med)}{rel}"


def _stragglers(summary: Summary) -> pd.DataFrame:
    return _stragglers_of(summary.collectives)


def _stragglers_of(colls) -> pd.DataFrame:
    rows = []
    for wc in colls:
        m, pr = wc.matches, wc.per_rank
        if m is None or m.empty:
            continue
        caused = pr.groupby(["pg", "seq"], sort=False)["wait_ns"].sum()
        mm = m.join(caused.rename("caused"), on=["pg", "seq"])
        desc = pr.drop_duplicates("pg").set_index("pg")["pg_desc"] if "pg_desc" in pr else pd.Series(dtype=object)
        total = mm.groupby("pg").size()
        mm = mm[mm["skew_ns"] > 0]  # (every rank arrived at once: no one was last)
        g = mm.groupby(["pg", "last_rank"], sort=True).agg(last=("seq", "size"), caused_wait_ns=("caused", "sum")).reset_index()
        for pg, rank, last, cw in g.itertuples(index=False):
            n = int(total.get(pg, 0))
            rows.append([wc.run, wc.window, str(pg), str(desc.get(pg, "")), int(rank), int(last), n, last / n if n else np.nan, int(cw)])
    out = pd.DataFrame(rows, columns=STRAGGLER_COLUMNS)
    return out.sort_values(by=["run", "window", "pg", "last"], ascending=[True, True, True, False], kind="stable").reset_index(drop=True)


def job_report(summary: Summary) -> JobReport:
    """The whole-job report of ``summary`` (module docstring): per window of two or more ranks.

    Returns:
        a :class:`JobReport`.
    """
    dist, outl = [], []
    for run in summary.runs:
        for w in run.windows:
            ranked = [(k, r) for k, r in zip(w.ranks, w.reports) if k is not None]
            if len({k for k, _ in ranked}) < 2:
                continue
            figs = rank_figures([r for _, r in ranked], [k for k, _ in ranked])
            d, o = _distribution(figs, run.name, w.label)
            dist += d
            outl += o
    figures = pd.DataFrame(dist, columns=DIST_COLUMNS).astype({"ranks": np.int64})
    outliers = pd.DataFrame(outl, columns=OUTLIER_COLUMNS).astype({"rank": np.int64})
    return JobReport(figures, outliers, _stragglers(summary), tuple(summary.causes), tuple(summary.clocks),
                     tuple(w for w in summary.what_ifs if len(w.ranks) >= 2))


def job_json(job: JobReport) -> str:
    """The job report as JSON: ``figures``, ``outliers``, ``stragglers`` (rows of the tables), ``causes`` (per window:
    ``run``, ``window``, ``straggler``, ``cause``, ``label``, ``caused_wait_ns``) and ``clocks`` (per window: ``run``,
    ``window``, ``supported``, ``differ``, ``reason``, ``ranks`` rows) and ``what_if`` (per window replayed: ``run``,
    ``window``, ``top``: its top what-if's row or null, ``finding`` and ``critical_path`` in words); NaN as null, times in ns."""
    import json
    import math

    def rows(df: pd.DataFrame) -> list[dict]:
        out = df.astype(object).where(df.notna(), None).to_dict(orient="records")
        return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v.item() if isinstance(v, np.generic) else v)
                 for k, v in r.items()} for r in out]

    doc = {
        "figures": rows(job.figures), "outliers": rows(job.outliers), "stragglers": rows(job.stragglers),
        "causes": [{"run": c.run, "window": c.window, "straggler": c.straggler, "cause": c.cause, "label": c.label,
                    "caused_wait_ns": c.caused_wait_ns, "gain_per_step_ns": c.gain_per_step_ns} for c in job.causes],
        "clocks": [{"run": c.run, "window": c.window, "supported": c.supported, "differ": c.differ, "reason": c.reason,
                    "ranks": rows(c.ranks)} for c in job.clocks],
        "what_if": [{"run": w.run, "window": w.window, "top": None if w.top is None else {k: _plain(v) for k, v in w.top.items()},
                     "finding": w.finding(), "critical_path": w.path_line()} for w in job.what_ifs],
    }
    return json.dumps(doc, indent=1) + "\n"


def job_report_from_summaries(paths: list, replay_memory: int | None = None, mapper: Mapper | None = None) -> tuple[JobReport, list[Failure]]:
    """The whole-job report of summary files (module docstring), for thousands of ranks.

    Args:
        paths: summary files (``*.summary.json[.gz]``).
        replay_memory: the memory (bytes) a window's replay may take, or None for the default
            (:func:`.window_replay.replay_budget`); a window that needs more is not replayed, with a note saying so.
        mapper: how the summaries (:func:`.rank_summary.rank_item`, with ``on_index``: each called as it arrives) and each replayed
            window's graphs are read (:data:`.window_replay.Mapper`; default: here, one after another); a value that is
            an exception is a file whose worker process died on it, that file's failure.

    Returns:
        ``(report, failures)``: a file that cannot be read, of another version, another job than its folder's, without a
        rank, or that does not fit its format (:func:`~traceprobe.summary_file.read_summary`: every field and table checked,
        each file read and decoded once) is a :class:`~traceprobe.errors.Failure`.
    """
    from collections import defaultdict

    failures: list[Failure] = []
    budget = replay_budget(replay_memory)  # (the memory available when the job starts)
    windows: dict[tuple[str, str], list[tuple[int, str, str, list[float], dict[str, np.ndarray], RankColumns, int]]] = defaultdict(list)
    step_counts: dict[tuple[str, str], int] = {}
    jobs: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    read = mapper(rank_item, [str(p) for p in paths], on_index=interned) if mapper is not None and len(paths) > 1 \
        else [rank_item(str(p)) for p in paths]
    for path, got in zip(paths, read):
        if isinstance(got, Exception):  # (the death of the worker that read it: the mapper's own error)
            failures.append(Failure(str(path), str(getattr(got, "reason", got))))
            continue
        if isinstance(got, Failure):
            failures.append(got)
            continue
        run, window, n_steps, item = got
        windows[(run, window)].append(item)
        step_counts[(run, window)] = n_steps  # (the same for every rank of the window)
        jobs[str(Path(path).parent)][item[2]] += 1
    del read  # (each window's items go once it is reported: held here, they stayed through the replay, 280 MB at 4,096 ranks)
    # another job than its folder's
    major = {folder: max(c, key=lambda j: c[j]) for folder, c in jobs.items()}
    dist, outl, stragglers, causes, clocks, what_ifs = [], [], [], [], [], []
    notes: dict[tuple[str, str], str] = {}
    for (run, window), items in sorted(windows.items()):
        keep = []
        for rank, path, job, fig, coll, cols, events in items:
            if job != major[str(Path(path).parent)]:
                failures.append(Failure(path, f"traceprobe summary of another job ({job!r}; the other summaries of this folder are of "
                                              f"{major[str(Path(path).parent)]!r}): left out"))
            else:
                keep.append((rank, path, fig, coll, cols, events))
        keep.sort(key=lambda x: (x[0], x[1]))
        if len({x[0] for x in keep}) < 2:
            continue
        ranks = [x[0] for x in keep]
        figs = pd.DataFrame(np.array([x[2] for x in keep], dtype=np.float64).reshape(len(keep), len(FIGURES)),
                            columns=list(FIGURES), index=pd.Index(ranks, name="rank"))
        d, o = _distribution(figs, run, window)
        dist += d
        outl += o
        last = list({x[0]: x for x in keep}.values())  # one file per rank: the last by path
        wc = match_rows(_coll_frame(last), tuple(x[0] for x in last), run, window)
        est = estimate_clocks(wc.per_rank, wc.ranks, run, window)
        clocks.append(est)
        stragglers.append(wc)
        steps = step_counts[(run, window)]
        replayed = None
        graphs, note, failed = window_graphs([x[1] for x in last], sum(x[5] for x in last), budget, mapper)
        if note:
            notes[(run, window)] = note
        failures += [Failure(getattr(e, "path", run), f"not replayed: {getattr(e, 'reason', e)}") for e in failed]
        if graphs and all(g is not None for g in graphs):
            replayed = window_what_if(run, window, "", [g for g in graphs if g is not None], window_instances(wc))
            what_ifs.append(replayed)
        causes.append(window_causes(wc, rank_tables([x[4] for x in last]), steps, replayed))
        items.clear()
    figures = pd.DataFrame(dist, columns=DIST_COLUMNS).astype({"ranks": np.int64})
    outliers = pd.DataFrame(outl, columns=OUTLIER_COLUMNS).astype({"rank": np.int64})
    st = _stragglers_of(stragglers)
    return JobReport(figures, outliers, st, tuple(causes), tuple(clocks), tuple(what_ifs), notes), sorted(failures, key=lambda f: f.path)


def _coll_frame(keep: list) -> pd.DataFrame:
    """The collectives of a window's ranks (``keep``: in increasing rank order) as :func:`.collectives.match_rows` reads them."""
    n = [len(x[3]["start_ns"]) for x in keep]
    out = {"rank": np.repeat(np.array([x[0] for x in keep], dtype=np.int64), n)}
    cols = {c: np.concatenate([x[3][c] for x in keep]) for c in COLL}  # (object columns stay object: shared strings)
    return pd.DataFrame({**out, **{c: pd.Series(v, dtype=object) if v.dtype == object else v for c, v in cols.items()}})
