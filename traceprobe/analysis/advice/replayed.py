"""Findings from the replay: a trace's findings where its window was replayed, each host-side one the gain of its what-if.

Definitions (quoted by docs/measures.md). :mod:`.findings` gives each span of a device's idle time a cause by what the host
was doing then (:mod:`.idle_causes`), and its *headroom* is that span: the most that fixing it could save. Where the
trace's window was replayed (:func:`.what_if_windows.window_what_ifs`: every trace with a dependency graph, ranks of a
window together), the replay answers the same question with the job's dependencies in it, and it is the one answer:

- every idle-cause finding that a what-if cause stands for (``idle_graph_capture``, ``idle_sync``, ``idle_profiler``, ``idle_warmup``,
  ``idle_pinned_alloc``, ``idle_device_alloc``, ``idle_other_rank``, ``idle_data_loading``, ``idle_optimizer``,
  ``idle_launch``, ``idle_host``) is replaced by the what-if rows of the trace's rank and of every rank at once that give
  back at least the window's noise floor (:attr:`.what_if_windows.WindowWhatIf.floor_ns`): kind :data:`KINDS` of the
  row's cause, ``headroom_ns`` its gain (int ns), ``per_step_ns`` its gain per step (-1 without steps). A host cause
  whose replay gives back less than the floor is no finding: the device had queued work, or the path ran elsewhere
  (the idle time is still in the idle-cause table, measured);
- the straggler's cause is its ``straggler`` finding (:func:`.causes.with_causes`), not listed twice;
- the findings that no replay stands for keep their span: exposed copies, the pipeline bubble, the exposed wait and
  transfer, dependency waits (``stream_wait``, ``queued_wait``) and ``cross_device``; under the window's noise floor they are dropped
  too, as a what-if is (one floor for every finding of a replayed window: 1% of it and 0.5 ms a step).

Rows keep the what-if table's order among themselves (a sync before the host work it exposed,
:func:`.what_if_order.ordered`) and are merged with the span findings largest first. Gains of two rows are not added
(removing both may give less than their sum): a replayed finding claims its gain, not a span of wall time.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..causal.what_if_windows import WindowWhatIf
from ..per_trace import OverlapReport
from .findings import COLUMNS, IDLE_KINDS, findings_frame
from .verdicts import Verdict

KINDS = {
    "graph_capture": "idle_graph_capture", "sync": "idle_sync", "profiler": "idle_profiler", "compile": "idle_compile",
    "slow_call": "idle_slow_call",
    "warmup": "idle_warmup", "pinned_alloc": "idle_pinned_alloc", "device_alloc": "idle_device_alloc",
    "other_rank": "idle_other_rank", "data_loading": "idle_data_loading", "optimizer": "idle_optimizer",
    "dispatch": "idle_launch", "cpu_op": "idle_cpu_op", "host": "idle_host", "pageable_copy": "pageable_copy",
    "imbalance": "imbalance",
}
"""The finding kind of each what-if cause (:data:`.what_if_windows.LABELS`): an idle cause's own kind where it has one."""

REPLACED = frozenset(k for c, k in IDLE_KINDS.items() if c not in ("dependency", "queued"))
"""Span findings (:mod:`.findings`) that the replay replaces (module docstring)."""


def replayed_rows(w: WindowWhatIf, rank: int | None, straggler: tuple[int, str] | None = None) -> list[tuple]:
    """The findings rows (:data:`.findings.COLUMNS`; ``device`` -1) of ``rank``'s what-ifs in window ``w`` (module
    docstring), in the table's order; ``rank`` None or a window of one trace: every row. The row of ``straggler``
    ((rank, cause), the window's straggler) is of kind ``straggler``."""
    ranks, rows = _floor_rows(w)
    if rank is not None and w.ranks:
        rows = [rows[i] for i in np.flatnonzero(np.isin(ranks, [rank, -1])).tolist()]
    return [("straggler" if straggler is not None and (r, cause) == straggler else kind, *rest)
            for r, cause, kind, *rest in rows]


def _floor_rows(w: WindowWhatIf) -> tuple[np.ndarray, list[tuple]]:
    """The rows of ``w``'s table at or above its noise floor, in order: their ranks (int64), and per row its rank, cause,
    kind and the rest of its findings row (subject, device -1, gain, gain per step, label, finding). Worded once per
    window (kept on it), not once per report of its ranks."""
    kept = vars(w).get("_floor_rows")
    if kept is None:
        t, rows = w.table, []
        if t is not None and not t.empty:
            keep = t["gain_ns"].to_numpy(np.int64) >= w.floor_ns
            for r in pd.DataFrame(t[keep]).to_dict(orient="records"):
                gain, per = int(r["gain_ns"]), int(r["per_step_ns"]) if w.steps else -1
                subject = w.every_rank if r["rank"] < 0 else f"rank {r['rank']}" if w.ranked and w.ranks else ""
                kind = KINDS.get(w.named_cause(r), w.named_cause(r))
                rows.append((int(r["rank"]), str(r["cause"]), kind, subject, -1, gain, per, w.label(r), w.finding(r)))
        kept = vars(w)["_floor_rows"] = (np.array([r[0] for r in rows], np.int64), rows)
    return kept


def with_what_if(rep: OverlapReport, w: WindowWhatIf, straggler: tuple[int, str] | None = None) -> OverlapReport:
    """``rep`` with its findings from the replay of its window ``w`` (module docstring); ``straggler``: (rank, cause) of
    the window's straggler, whose ``straggler`` finding (:func:`.causes.with_causes`) takes that row's place."""
    f = rep.findings
    given: list[tuple] = []
    if f is not None and not f.empty and "label" in f:
        given = list(zip(*(f[c].tolist() for c in COLUMNS)))
    spans = [r for r in given if r[0] not in REPLACED and int(r[3]) >= w.floor_ns]  # (one noise floor for every finding)
    device = next((int(r[2]) for r in spans if int(r[2]) >= 0), _device(rep))
    subject = f"rank {rep.rank}" if rep.rank is not None else ""
    own = {r[0]: r for r in spans if r[0] == "straggler"}
    rows = [own.get(k, (k, s or subject, device, *rest)) for k, s, _, *rest in replayed_rows(w, rep.rank, straggler)]
    if any(r[0] == "straggler" for r in rows):
        spans = [r for r in spans if r[0] != "straggler"]
    # (the table's order kept among replayed rows: each row's key the largest gain at or after it)
    keys = np.maximum.accumulate(np.array([r[3] for r in rows][::-1], np.int64))[::-1].tolist() if rows else []
    merged = sorted([(k, 0, i, r) for i, (k, r) in enumerate(zip(keys, rows))] +
                    [(r[3], 1, i, r) for i, r in enumerate(spans)], key=lambda x: (-x[0], x[1], x[2]))
    kept = [r for *_, r in merged]
    return with_findings(rep, findings_frame(kept, "str" if kept else object))


def with_findings(rep: OverlapReport, findings: pd.DataFrame, verdicts: list[Verdict] | None = None) -> OverlapReport:
    """``rep`` with ``findings`` (:data:`.findings.COLUMNS`) in place of its own, and ``verdicts`` where given (the same
    figures and levels, a hint told across ranks: :func:`.verdicts.waited`); its headline, where computed, is kept
    (it reads no finding and no verdict's words: as computed where the trace was analysed, not computed again)."""
    out = replace(rep, findings=findings) if verdicts is None else replace(rep, findings=findings, verdicts=verdicts)
    if "headline" in vars(rep):
        vars(out)["headline"] = rep.headline
    return out


def _device(rep: OverlapReport) -> int:
    d = rep.devices.devices if rep.devices is not None else None
    return int(d["device"].iloc[0]) if d is not None and len(d) else 0
