"""Summary: everything one ``overlap-report`` call produced, computed once.

Renderers take a :class:`Summary` and only format it; nothing here reads files
(``collect.analyze_paths`` loads the traces and calls :func:`summarize`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import pandas as pd

from ..errors import Failure
from .advice.replayed import with_what_if
from .causal.what_if_windows import WindowWhatIf, window_what_ifs
from .job.causes import WindowCauses, window_causes, with_causes
from .job.clocks import ClockEstimate, aligned_tables, estimate_clocks, shift_times
from .job.collectives import WindowCollectives, match_window
from .job.ranks import rank_summary
from .per_trace import OverlapReport
from .run import Run, build_runs, run_group
from .variants import variant_summary


@dataclass(frozen=True)
class Summary:
    """The result of analysing a set of traces.

    Attributes:
        reports: one :class:`~traceprobe.analysis.per_trace.OverlapReport` per trace
            that loaded, in the order of the sorted file list.
        runs: the reports grouped into runs (ranks x windows), see
            :func:`.run.build_runs`.
        rank_summary: across-rank figures per window, see :func:`.ranks.rank_summary`.
        variants: stopwatch against evidence, see :func:`.variants.variant_summary`.
        failures: files that could not be analysed (path and one-line reason).
        collectives: collectives matched across the ranks of each window with
            two or more ranks, see :func:`.collectives.match_window`.
        causes: per such window, waits, transfer, straggler and blame, see
            :func:`.causes.window_causes`; the reports' findings are those of
            :func:`.causes.with_causes` (waits named by the rank waited for).
        clocks: per such window, each rank's clock offset and drift from its collectives, see
            :func:`.clocks.estimate_clocks`; with ``align_clocks`` and clocks that differ, the window's
            collectives and causes are those on the reference rank's clock (its ``clock`` line says so).
        what_ifs: per window (a window of two or more ranks replayed as one job, every other trace alone), what
            removing each cause would give back, see :func:`.what_if_windows.window_what_ifs`.
        warnings: one line each, ``<path>: <what the loader dropped>`` for each
            trace, then what grouping found odd (a rank repeated in a window, a
            window missing a rank its run has).
    """

    reports: tuple[OverlapReport, ...]
    runs: tuple[Run, ...]
    rank_summary: pd.DataFrame
    variants: pd.DataFrame
    failures: tuple[Failure, ...]
    warnings: tuple[str, ...]
    collectives: tuple[WindowCollectives, ...] = ()
    causes: tuple[WindowCauses, ...] = ()
    clocks: tuple[ClockEstimate, ...] = ()
    what_ifs: tuple[WindowWhatIf, ...] = ()


def _run_warnings(runs: list[Run]) -> list[str]:
    out = []
    for run in runs:
        out.extend(run.notes)  # (traces the manifest lacked, joined by their own rank and steps)
        ranks = set(run.ranks)
        for w in run.windows:
            for rank, n in sorted(Counter(r for r in w.ranks if r is not None).items()):
                if n > 1:
                    out.append(f"{run.name}: rank {rank} has {n} traces in window {w.label}")
            missing = sorted(ranks - set(w.ranks))
            if missing and w.rank_count:
                out.append(f"{run.name}: window {w.label} has no trace of rank(s) {', '.join(map(str, missing))}")
    return out


def run_collectives(runs: list[Run] | tuple[Run, ...]) -> list[WindowCollectives]:
    """Collectives matched across ranks, for every window of two or more known ranks (one trace per rank)."""
    out = []
    for run in runs:
        for w in run.windows:
            tables = {r: rep.collectives for r, rep in zip(w.ranks, w.reports) if r is not None}
            if len(tables) >= 2 and any(not t.empty for t in tables.values()):
                out.append(match_window(tables, run.name, w.label))
    return out


def summarize(reports: list[OverlapReport] | tuple[OverlapReport, ...], failures: list[Failure] | tuple[Failure, ...] = (),
              align_clocks: bool = False) -> Summary:
    """Group ``reports`` into runs and compute every across-trace table once.

    Args:
        reports: per-trace reports (their order is kept).
        failures: files that did not load.
        align_clocks: where a window's clock estimate says the ranks' clocks differ beyond its uncertainty
            (:attr:`.clocks.ClockEstimate.differ`), match its collectives and find its waits on the reference
            rank's clock (:func:`.clocks.aligned_tables`); elsewhere, and by default, times are compared as recorded.

    Returns:
        a :class:`Summary`.
    """
    reports = tuple(reports)
    colls, causes, reports, clocks, what_ifs, not_replayed = _across_ranks(reports, align_clocks)
    runs = build_runs(reports)
    warnings = [f"{r.path}: {w}" for r in reports for w in r.warnings] + _run_warnings(runs) + not_replayed
    return Summary(
        reports=reports,
        runs=tuple(runs),
        rank_summary=rank_summary(runs=runs),
        variants=variant_summary(runs=runs),
        failures=tuple(failures),
        warnings=tuple(warnings),
        collectives=tuple(colls),
        causes=tuple(causes),
        clocks=tuple(clocks),
        what_ifs=tuple(what_ifs),
    )


def merge(parts: list[Summary] | tuple[Summary, ...], order: list[str], failures: list[Failure] | tuple[Failure, ...] = ()) -> Summary:
    """One :class:`Summary` of ``parts``, each :func:`summarize` of the traces of whole runs (no run in two parts): what
    :func:`summarize` of all their reports gives (every table is per run, or per folder for the stopwatch), without
    replaying any window again. ``order``: the reports' paths in the order of the sorted file list (reports keep it);
    ``failures``: every file that did not load. Runs are sorted as :func:`.run.build_runs` sorts them (by name, then
    folder), and every per-window table follows them."""
    where = {p: i for i, p in enumerate(order)}
    reports = tuple(sorted((r for s in parts for r in s.reports), key=lambda r: where.get(r.path, len(where))))
    runs = sorted((r for s in parts for r in s.runs), key=lambda r: (r.name, r.folder))
    rank = {r.name: i for i, r in enumerate(runs)}

    def ordered(items: list) -> tuple:
        return tuple(sorted(items, key=lambda x: rank.get(x.run, len(rank))))  # (stable: windows keep their order)

    tables = [s.rank_summary for s in parts if not s.rank_summary.empty]
    ranks = pd.concat(tables, ignore_index=True) if tables else (parts[0].rank_summary if parts else rank_summary(runs=[]))
    if len(ranks):
        ranks = ranks.iloc[ranks["run"].map(lambda n: rank.get(n, len(rank))).argsort(kind="stable")].reset_index(drop=True)
    warnings = [f"{r.path}: {w}" for r in reports for w in r.warnings] + _run_warnings(runs)
    known = set(warnings)
    warnings += [w for s in parts for w in s.warnings if w not in known]  # (a part's own: a window not replayed)
    return Summary(reports=reports, runs=tuple(runs), rank_summary=ranks, variants=variant_summary(runs=runs),
                   failures=tuple(failures), warnings=tuple(warnings),
                   collectives=ordered([c for s in parts for c in s.collectives]),
                   causes=ordered([c for s in parts for c in s.causes]),
                   clocks=ordered([c for s in parts for c in s.clocks]),
                   what_ifs=ordered([w for s in parts for w in s.what_ifs]))


def display_key(name: str, folder: str, base: str) -> tuple[bool, str, str, str]:
    """Where a run (its ``name`` and ``folder``) comes on the first screen of traces under ``base`` (the folder they
    share): by the folder it is shown under (:func:`.run.run_group`), those of ``base`` itself after its sub-folders'
    (a folder's few loose traces do not hold back the lines of every sub-folder), then as :func:`.run.build_runs`
    sorts them."""
    group = run_group(name, folder)
    return group == base, group, name, folder


def display_order(runs: list[Run] | tuple[Run, ...], base: str) -> list[Run]:
    """``runs`` in the first screen's order (:func:`display_key`): the order :func:`traceprobe.collect.analyze_paths`
    hands out its parts in."""
    return sorted(runs, key=lambda r: display_key(r.name, r.folder, base))


def _across_ranks(reports: tuple[OverlapReport, ...], align_clocks: bool = False) -> tuple[
        list[WindowCollectives], list[WindowCauses], tuple[OverlapReport, ...], list[ClockEstimate], list[WindowWhatIf], list[str]]:
    """Match each window's collectives, estimate its clocks (and align them, with ``align_clocks``, where they differ),
    replay each window (its what-ifs), find its waits and straggler (named by its what-if, :func:`.causes.window_causes`),
    and give every rank's report the findings seen across ranks (:func:`.causes.with_causes`) and those of its window's
    replay (:func:`.replayed.with_what_if`); reports keep their order."""
    runs = build_runs(reports)
    colls = run_collectives(runs)
    by_key = {(c.run, c.window): c for c in colls}
    clocks, windows = [], []
    for run in runs:
        for w in run.windows:
            wc = by_key.get((run.name, w.label))
            if wc is None:
                continue
            ranked = {r: rep for r, rep in zip(w.ranks, w.reports) if r is not None}
            est = estimate_clocks(wc.per_rank, wc.ranks, run.name, w.label)
            clocks.append(est)
            seen = ranked
            if align_clocks and est.differ:
                tables = aligned_tables({r: rep.collectives for r, rep in ranked.items()}, est)
                wc = replace(match_window(tables, run.name, w.label), clock=est.describe() + "; times put on rank "
                             f"{est.reference}'s clock (--align-clocks)")
                seen = {r: replace(rep, exposed_comm=shift_times(rep.exposed_comm, est, r)) for r, rep in ranked.items()}
            by_key[(run.name, w.label)] = wc
            windows.append((run.name, w, wc, ranked, seen))
    colls = [by_key[(c.run, c.window)] for c in colls]
    what_ifs, not_replayed = window_what_ifs(runs, colls)
    replayed = {(x.run, x.window): x for x in what_ifs if not x.path}
    by_path = {x.path: x for x in what_ifs if x.path}
    causes = []
    new: dict[int, OverlapReport] = {}
    for name, w, wc, ranked, seen in windows:
        steps = w.steps[1] - w.steps[0] + 1 if w.steps else 1
        cause = window_causes(wc, seen, steps, replayed.get((name, w.label)))
        causes.append(cause)
        for r, rep in ranked.items():
            new[id(rep)] = with_causes(rep, r, cause)
    skip = {(c.run, c.window): (c.straggler, c.cause) for c in causes if c.straggler is not None and c.cause}
    for run in runs:  # (each report's findings from its window's replay, .replayed)
        for w in run.windows:
            joint = replayed.get((run.name, w.label))
            for rep in w.reports:
                x = by_path.get(rep.path) or (joint if joint is not None and rep.rank in joint.ranks else None)
                if x is not None:
                    new[id(rep)] = with_what_if(new.get(id(rep), rep), x, skip.get((run.name, w.label)))
    return colls, causes, tuple(new.get(id(r), r) for r in reports), clocks, what_ifs, not_replayed
