"""Runs: the traces of one job, as ranks x profiler windows.

A distributed training job profiled with a repeating schedule writes one trace
per rank per profiler window (``tensorboard_trace_handler``: ``rank0.<ts>.pt.trace.json``
for every window; ``traceprobe record --script --repeat N``:
``<script>.steps2-4.rank0.pt.trace.json.gz``). HolisticTraceAnalysis's
multi-rank ``Trace`` (``hta/common/trace.py``) is the model: the ranks of a job
are one object, built once. traceprobe adds the second axis, the profiler
window, because one folder often holds several.

Each trace is placed by three keys, computed by :func:`trace_key` from what one
per-trace report carries (no file is read here):

- *run*: the trace's folder, and, when a ``manifest.json`` names the trace, its
  workload (and its variant, unless the manifest entry records a step window, as
  ``record --script`` does: there the variant *is* the window). The label is
  ``<folder>/<workload>[.<variant>]`` or the folder alone.
- *window*: the step range of the trace's ``ProfilerStep#N`` annotations
  (``steps 2-4``); else a ``.stepsA-B.`` in the file name or the manifest's
  ``steps``; else the trace is its own window (``trace``), and repeated ranks are
  told apart by file name order (``trace 1``, ``trace 2``, ...). Where a window with
  steps holds a rank twice (two jobs recorded into one folder), its traces are split
  by time: the ranks of one job's window overlap in time (``steps 2-4``, ``steps 2-4 #2``,
  in time order), where that gives each rank once.
- *rank*: ``distributedInfo.rank``; else the manifest's ``rank``; else a
  ``rank<N>`` in the file name; else none.

A trace the folder's manifest lacks (its rank killed after writing the trace, before its manifest entry) while it
names others of the folder joins the run whose window has its steps and lacks its rank, by its own rank and steps
(read from the trace), where exactly one does; :attr:`Run.notes` says the manifest lacked it. So does such a trace beside
the summaries of the others (the ranks that finished wrote theirs after their entries; the killed one none), which
would otherwise be a job of its own (``traces without a job id``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .per_trace import OverlapReport

_NAME_STEPS = re.compile(r"(?:^|[._-])steps(\d+)-(\d+)(?:[._-]|$)")
_NAME_RANK = re.compile(r"(?:^|[._-])rank(\d+)(?:[._-]|$)")


@dataclass(frozen=True)
class TraceKey:
    """Where one trace sits: ``run`` label, ``window`` label, ``steps`` (first, last) or None, ``rank`` or None."""

    run: str
    window: str
    steps: tuple[int, int] | None
    rank: int | None


def _steps_of(r: OverlapReport) -> tuple[int, int] | None:
    if not r.steps.empty:
        s = r.steps["step"]
        return int(s.min()), int(s.max())
    m = _NAME_STEPS.search(Path(r.path).name)
    if m:
        return int(m.group(1)), int(m.group(2))
    st = r.info.get("steps")
    if isinstance(st, (list, tuple)) and len(st) == 2 and all(isinstance(x, int) for x in st):
        return int(st[0]), int(st[1])
    return None


def _rank_of(r: OverlapReport) -> int | None:
    if r.rank is not None:
        return r.rank
    if isinstance(r.info.get("rank"), int):
        return int(r.info["rank"])
    m = _NAME_RANK.search(Path(r.path).name)
    return int(m.group(1)) if m else None


def _folder(path: str) -> str:
    """The folder of a trace path, or of a ``protocol://`` URL (whose ``//`` Path() would fold)."""
    return path.rsplit("/", 1)[0] if "://" in path else str(Path(path).parent)


TRACES_WITHOUT_JOB = "traces without a job id"
"""The job of traces read beside summaries (which carry theirs): a run of their own, never a window of the summaries'."""


def run_name(path: str, info: dict) -> str:
    """The run label of a trace at ``path`` whose report carries ``info`` (its manifest facts): the rule of the module
    docstring, known before the trace is analysed (:func:`traceprobe.collect.analyze_paths` orders its work by it)."""
    folder = _folder(path)
    if info.get("job") == TRACES_WITHOUT_JOB and "summary_of" not in info:
        folder = f"{folder} ({TRACES_WITHOUT_JOB})"
    w, v = info.get("workload"), info.get("variant")
    if not w:
        return folder
    return f"{folder}/{w}" if info.get("steps") is not None or not v else f"{folder}/{w}.{v}"


def run_group(name: str, folder: str) -> str:
    """The folder a run is shown under on the first screen: its own folder where a manifest names its runs (the runs of
    one recording side by side), else the folder above it (``causes/ddp-compute`` under ``causes``)."""
    return folder if name != folder else _folder(folder)


def _run_of(r: OverlapReport) -> str:
    return run_name(r.path, r.info)


def trace_key(r: OverlapReport) -> TraceKey:
    """The run, window and rank of one report (rules in the module docstring).

    A window without steps is labelled ``trace``; :func:`build_runs` numbers it when
    one rank has several such traces in a run.
    """
    steps = _steps_of(r)
    window = f"steps {steps[0]}-{steps[1]}" if steps else "trace"
    return TraceKey(_run_of(r), window, steps, _rank_of(r))


@dataclass(frozen=True)
class RunWindow:
    """One profiler window of a run: the traces of its ranks.

    Attributes:
        label: ``steps A-B``, ``trace`` or ``trace N``.
        steps: (first, last) ``ProfilerStep`` number, or None.
        reports: the window's reports, sorted by rank (unranked last), then path.
        ranks: the rank of each report (None where unknown), in the same order.
    """

    label: str
    steps: tuple[int, int] | None
    reports: tuple[OverlapReport, ...]
    ranks: tuple[int | None, ...]

    @property
    def rank_count(self) -> int:
        """Number of distinct known ranks in this window."""
        return len({r for r in self.ranks if r is not None})


@dataclass(frozen=True)
class Run:
    """The traces of one job: ranks x profiler windows (module docstring).

    Attributes:
        name: the run label (folder, or ``<folder>/<workload>[.<variant>]``).
        folder: the folder holding its traces.
        windows: its windows, in step order (windows without steps last, by label).
    """

    name: str
    folder: str
    windows: tuple[RunWindow, ...]
    notes: tuple[str, ...] = ()
    """One line per trace the folder's manifest lacked that joined this run by its own rank and steps."""

    @property
    def ranks(self) -> tuple[int, ...]:
        """The distinct known ranks across all windows, sorted."""
        return tuple(sorted({r for w in self.windows for r in w.ranks if r is not None}))

    @property
    def reports(self) -> tuple[OverlapReport, ...]:
        """Every report of the run, window by window."""
        return tuple(r for w in self.windows for r in w.reports)


def _rank_order(item: tuple[TraceKey, OverlapReport]) -> tuple[int, int, str]:
    k, r = item
    return (k.rank is None, k.rank if k.rank is not None else 0, r.path)


def _jobs(items: list[tuple[TraceKey, OverlapReport]]) -> list[list[tuple[TraceKey, OverlapReport]]]:
    """The traces of one window split by job where a rank has several: the ranks of one job's window run at once, so
    their trace windows overlap in time, and the traces of another job in the same folder (the same steps recorded
    again, later) do not. Split only where each group of overlapping traces holds each rank once; else one group (the
    run's warning names the repeated rank). Groups in time order."""
    ranks = [k.rank for k, _ in items if k.rank is not None]
    if len(ranks) == len(set(ranks)) or any(r.window_ns[1] <= r.window_ns[0] for _, r in items):
        return [items]
    groups: list[list[tuple[TraceKey, OverlapReport]]] = []
    end = None
    for item in sorted(items, key=lambda kr: kr[1].window_ns):
        lo, hi = item[1].window_ns
        if end is None or lo > end:  # (no overlap with the group before: another job)
            groups.append([])
            end = hi
        groups[-1].append(item)
        end = max(end, hi)
    for g in groups:
        known = [k.rank for k, _ in g if k.rank is not None]
        if len(known) != len(set(known)):
            return [items]
    return groups


def build_runs(reports: list[OverlapReport] | tuple[OverlapReport, ...]) -> list[Run]:
    """Group per-trace reports into runs and windows (rules in the module docstring).

    Returns:
        the runs sorted by name; every report is in exactly one window of one run.
    """
    by_run: dict[tuple[str, str], dict[str, list[tuple[TraceKey, OverlapReport]]]] = defaultdict(lambda: defaultdict(list))
    keyed, notes = _unlisted_joined([(trace_key(r), r) for r in reports])
    for k, r in keyed:
        by_run[(k.run, _folder(r.path))][k.window].append((k, r))
    runs = []
    for (name, folder), windows in sorted(by_run.items()):
        out: list[RunWindow] = []
        for label, items in windows.items():
            if label != "trace":
                parts = _jobs(items)
                for n, part in enumerate(parts):
                    part.sort(key=_rank_order)
                    lbl = label if n == 0 else f"{label} #{n + 1}"
                    out.append(RunWindow(lbl, part[0][0].steps, tuple(r for _, r in part), tuple(k.rank for k, _ in part)))
                continue
            # traces without steps: the n-th trace (by path) of each rank is window n
            seen: dict[int | None, int] = defaultdict(int)
            numbered: dict[int, list[tuple[TraceKey, OverlapReport]]] = defaultdict(list)
            for k, r in sorted(items, key=lambda kr: kr[1].path):
                numbered[seen[k.rank]].append((k, r))
                seen[k.rank] += 1
            for n, group in sorted(numbered.items()):
                group.sort(key=_rank_order)
                lbl = "trace" if len(numbered) == 1 else f"trace {n + 1}"
                out.append(RunWindow(lbl, None, tuple(r for _, r in group), tuple(k.rank for k, _ in group)))
        out.sort(key=lambda w: (w.steps is None, w.steps or (0, 0), w.label))
        runs.append(Run(name, folder, tuple(out), tuple(notes.get(name, ()))))
    return runs


def _unlisted_joined(keyed: list[tuple[TraceKey, OverlapReport]]) -> tuple[list[tuple[TraceKey, OverlapReport]], dict[str, list[str]]]:
    """The keys with each trace the folder's manifest lacks moved into the manifest's run whose window has its steps and
    lacks its rank, where exactly one does (module docstring); the note of each, by run."""
    listed: dict[tuple[str, str, str], set[int | None]] = defaultdict(set)  # (folder, run, window) -> ranks the manifest names
    for k, r in keyed:
        if r.info.get("workload"):
            listed[(_folder(r.path), k.run, k.window)].add(k.rank)
    if not listed:
        return keyed, {}
    out, notes = [], defaultdict(list)
    for k, r in keyed:
        folder = _folder(r.path)
        # (a bare trace beside the others' summaries too, run "<folder> (traces without a job id)": a rank killed there
        # never wrote its summary, which follows its entry)
        if not r.info.get("workload") and k.steps is not None and k.rank is not None:
            runs = [run for (f, run, w), ranks in listed.items() if f == folder and w == k.window and k.rank not in ranks]
            if len(runs) == 1:
                k = TraceKey(runs[0], k.window, k.steps, k.rank)
                notes[runs[0]].append(f"{r.path}: not in {folder}/manifest.json (its rank stopped before its entry?): "
                                      f"joined window {k.window} by its own rank {k.rank} and steps")
        out.append((k, r))
    return out, notes
