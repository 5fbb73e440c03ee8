"""The first screen's top finding per trace, in one unit rule, and the one action it calls for (the ``do`` line).

Nothing is computed here: the finding is the window's top what-if (:class:`traceprobe.analysis.causal.what_if_windows.WindowWhatIf`)
where it has one, else the trace's own top finding (:mod:`traceprobe.analysis.advice.findings`). Its figure is given per step
first and its window total second, labelled (``data loading 20.9 ms/step (41.7 ms in 2 steps)``); a trace without steps
gives its total, labelled (``exposed DtoH copy 58.0 ms in the trace``). The action is the advice's remedy shortened to a
few words (:data:`DO_CAUSE`, :data:`DO_KIND`); the full advice is under *what would give time back* (what-ifs) and in
``--detail``'s findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..analysis.advice.idle_advice import COMPILED_OPS, loader_kind
from ..analysis.causal.sync_names import sync_kind
from ..analysis.causal.what_if_kernels import ACTIONS as KERNEL_ACTIONS
from ..analysis.causal.what_if_windows import WindowWhatIf, report_runs_before
from ..analysis.host.python_frames import short_frame
from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary
from . import units

DO_CAUSE = {
    "graph_capture": "capture the graph once and replay it",
    "sync": "drop syncs from the loop (.item(), .cpu(), print); log every N steps",
    "sync_htod": "pin the batches (pin_memory=True); copy with non_blocking=True",
    "sync_condition": "keep the check on the device (torch.where) or check every N steps",
    "sync_data_dependent": "use torch.where or give the output size (nonzero_static, output_size=)",
    "compile": "keep shapes fixed; TORCH_LOGS=recompiles names the guard",
    "compile_once": "nothing to fix: compilation is a one-time cost",
    "slow_call": "keep input shapes fixed (pad or bucket them)",
    "warmup": "nothing to fix: a one-time cost, not a steady one",
    "warmup_unscheduled": "profile after warm-up (torch.profiler.schedule(wait=1, warmup=1))",
    "warmup_after_runs": "not start-up: new shapes or a recompile (TORCH_LOGS=recompiles)",
    "profiler": "nothing to fix in the program: the profiler's own work",
    "profiler_unscheduled": "nothing to fix: profiler start-up (schedule(wait=1, warmup=1) skips it)",
    "pinned_alloc": "allocate pinned buffers once and reuse them",
    "device_alloc": "keep tensor sizes steady; no empty_cache() in the loop",
    "other_rank": "see why the rank it waits for is late",
    "data_loading": "load in DataLoader workers (num_workers>0, pin_memory=True)",
    "data_loading_workers": "more DataLoader workers, or cheaper samples (augment on the GPU)",
    "optimizer": "use a fused or foreach optimizer (fused=True)",
    "dispatch": "fewer, larger kernels: torch.compile or CUDA graphs",
    "dispatch_compiled": 'replay it as graphs: torch.compile(mode="reduce-overhead")',
    "dispatch_replayed": "bring more of the step into its graphs, or larger batches",
    "cpu_op": "move the CPU work to the device or to a DataLoader worker",
    "sync_cpu_op": "drop the sync before the CPU work, or move that work to the device",
    "data_parallel": "use DistributedDataParallel, not nn.DataParallel",
    "host": "find the host time with record --with-stack or py-spy",
    "host_unrecorded": "record host ops too (the CPU activity) to see what held the host",
    "host_sampled": "record a whole window, not sampled, to see what held the host",
    "pageable_copy": "pin the buffer and copy with non_blocking=True",
    "imbalance": "balance the work across ranks (data, experts or stages)",
    **KERNEL_ACTIONS,
}
"""The action of each what-if cause (:data:`traceprobe.analysis.causal.what_if_windows.LABELS`), shortened from
:func:`traceprobe.analysis.causal.what_if_advice.advice`; ``compile_once``, ``warmup_unscheduled``: a one-time cost, in a
trace without steps for the latter, of a program that had not run before it (``warmup_after_runs`` where it had:
:func:`traceprobe.analysis.host.warmup_notes.runs_before`); ``profiler``, ``profiler_unscheduled``: the profiler's own work
(:func:`traceprobe.analysis.host.warmup.profiler_spans`), its start-up in the latter; ``sync_htod``, ``sync_condition``,
``sync_data_dependent``: syncs that wait for copies to the device from pageable memory, for a Python condition on a
device tensor, or for an op to size its output (:func:`traceprobe.analysis.causal.sync_names.sync_kind`); ``dispatch_compiled``, ``dispatch_replayed``: launch-bound inside compiled code,
without and with graph replays in the trace (:func:`traceprobe.analysis.advice.idle_advice.launch_fix`); ``host_unrecorded``:
host time in a trace that recorded no host ops (:data:`traceprobe.analysis.causal.what_if_windows.UNRECORDED_HOST`);
``host_sampled``: the same in a sampled trace; ``data_parallel``: host-side causes (:data:`DATA_PARALLEL_CAUSES`) of a step under ``nn.DataParallel``
(:func:`traceprobe.analysis.host.training.data_parallel_wrapper`); ``sync_cpu_op``: a sync and the CPU work it exposes, one story whichever of the two is on top (:func:`_sync_pair`);
``data_loading_workers``: a loader that has worker processes already
(:func:`traceprobe.analysis.advice.idle_advice.loader_kind`)."""

DO_KIND = {
    "exposed_copy": "issue the copies on a side stream (ordered by events) under compute",
    "wrapper_copy": "DDP's bucket copies: gradient_as_bucket_view=True removes them",
    "bubble": "use more microbatches or an interleaved schedule",
    "exposed_comm": "overlap the collectives with compute, or send less",
    "exposed_transfer": "overlap the collectives with compute, or send less",
    "wait": "fix the late rank's extra work; overlap on the others would not help",
    "straggler": "fix this rank's extra work; overlap on the others would not help",
    "idle_graph_capture": DO_CAUSE["graph_capture"],
    "idle_sync": DO_CAUSE["sync"],
    "idle_warmup": DO_CAUSE["warmup_unscheduled"],
    "idle_profiler": DO_CAUSE["profiler_unscheduled"],
    "idle_pinned_alloc": DO_CAUSE["pinned_alloc"],
    "idle_device_alloc": DO_CAUSE["device_alloc"],
    "idle_other_rank": DO_CAUSE["other_rank"],
    "idle_data_loading": DO_CAUSE["data_loading"],
    "idle_optimizer": DO_CAUSE["optimizer"],
    "idle_launch": DO_CAUSE["dispatch"],
    "idle_cpu_op": DO_CAUSE["cpu_op"],
    "idle_compile": DO_CAUSE["compile"],
    "idle_slow_call": DO_CAUSE["slow_call"],
    "pageable_copy": DO_CAUSE["pageable_copy"],
    "imbalance": DO_CAUSE["imbalance"],
    "idle_host": DO_CAUSE["host"],
    "stream_wait": "start the work it waits for earlier, or break the dependency",
    "queued_wait": "find what the queued work waits for: record its producer too",
    "cross_device": "balance the work across devices, or run them at once",
    **KERNEL_ACTIONS,
}
"""The action of each finding kind (:mod:`traceprobe.analysis.advice.findings`), shortened from its advice."""

ONE_TIME = ("warmup", "compile_once", "profiler", "profiler_unscheduled")
"""Actions of one-time costs: where such a cause is in some of a window's steps only, its figure is the window's total,
``once``, never a share per step (:func:`what_if_top`)."""

_TRAILING = re.compile(r"\s*\(?[-+]?[\d,.]+ ?(?:ns|µs|ms|s|%)\)?$")


@dataclass(frozen=True)
class Top:
    """A trace's top finding on the first screen: ``label`` with its figure (module doc), ``do`` its action
    (``""`` where none is known), ``what_if`` whether it is a what-if (its full advice is under *what would give
    time back*; else in ``--detail``); ``cause`` its cause in words (``data loading``, ``exposed HtoD copy``),
    ``figure`` its figure per step alone (``-20.9 ms/step``, ``-1.9 ms in the trace``), ``gain_ns`` what it would give
    back in the window (ns) and ``share`` that as a share of the window (0..1): how the first screen ranks windows;
    ``bound_ns`` the most its fix can give back (:func:`claim_bound`), which no figure of it exceeds."""

    label: str
    do: str
    what_if: bool
    cause: str = ""
    figure: str = ""
    gain_ns: float = 0.0
    share: float = 0.0
    bound_ns: float = 0.0


def claim_bound(row: dict, what_if: bool) -> float:
    """The bound of a claim, ns: what its fix takes out of the window. A what-if's (``row`` of its table): its
    ``removed_ns``, the cause's own time on the ranks it is removed from and the other ranks' compute its contention
    relief lowers (:func:`traceprobe.analysis.causal.what_if.what_ifs`): the replay's times are maxima of sums over the
    dependency graph, so taking x ns out of its weights ends no path more than x ns earlier (the part of it on a
    critical path is :mod:`traceprobe.analysis.causal.what_if_plan`'s bound). A span finding's (``row`` of the report's
    findings): its ``headroom_ns``, wall time of the window no other finding claims, which fixing it can at most give
    back. :func:`what_if_top` and :func:`finding_top` print no figure above it (a figure above it would be a defect of
    the replay: the claim says its bound)."""
    return float(row.get("removed_ns", row["gain_ns"])) if what_if else float(row["headroom_ns"])


def per_step(per_ns: float, total_ns: float, steps: int, sign: str = "") -> str:
    """A figure per step first and its total labelled second: ``-20.9 ms/step (-41.7 ms in 2 steps)``; ``from the 2nd
    step`` where the figure is more than the total over its steps (a what-if of a cause that delays the step after it,
    :func:`traceprobe.analysis.causal.what_if.what_if`); without steps, the total labelled: ``-1.7 ms in the trace``."""
    if steps <= 0 or units.missing(per_ns) or per_ns <= 0:
        return f"{sign}{_ms(total_ns)} in the trace"
    if steps == 1:
        return f"{sign}{_ms(per_ns)}/step (1 step)"
    later = " from the 2nd step" if per_ns * steps > total_ns * 1.05 else ""  # (.what_if: none in the window's first)
    return f"{sign}{_ms(per_ns)}/step{later} ({sign}{_ms(total_ns)} in {steps} steps)"


def _ms(ns: float) -> str:
    """Milliseconds from 0.1 ms to 1 s (as the what-if lines give them), else :func:`.units.duration`."""
    return f"{ns / 1e6:,.1f} ms" if 1e5 <= abs(ns) < 1e9 else units.duration(ns)


def _what_if_causes(w: WindowWhatIf) -> tuple[str, str]:
    """(the cause it is named by, the cause of its action): a slow call seen once is a first call (warm-up,
    :meth:`WindowWhatIf.named_cause`), a compilation or warm-up seen once is a one-time cost, profiled or not (without
    steps); without steps, warm-up and the profiler's own work are start-up to record after only where no run of the
    program went before the window (:attr:`WindowWhatIf.runs_before`)."""
    t = w.top or {}
    cause = w.named_cause(t) if t else ""
    every = int(t.get("steps_with", 0)) >= 2 and int(t.get("steps_with", 0)) >= w.steps - 1
    if cause == "compile" and not every:
        return cause, "compile_once"
    if cause in ("warmup", "profiler") and w.steps == 0:
        return cause, f"{cause}_unscheduled" if w.runs_before <= 0 else "warmup_after_runs" if cause == "warmup" else cause
    return cause, cause


def what_if_top(w: WindowWhatIf) -> Top | None:
    """The first-screen form of a window's top what-if (module doc); None without one."""
    t = w.top
    if t is None:
        return None
    cause, action = _what_if_causes(w)
    who = f"{w.every_rank} " if t["rank"] < 0 else f"rank {t['rank']} " if w.ranked else ""
    bound = claim_bound(t, True)
    gain, per = min(float(t["gain_ns"]), bound), min(float(t["per_step_ns"]), bound)  # (no figure above its bound)
    figure = per_step(per, gain, w.steps, sign="-")
    if action in ONE_TIME and w.steps >= 2 and 0 < int(t.get("steps_with", 0)) < w.steps:  # (not a cost of every step)
        figure = f"-{_ms(gain)} once ({int(t['steps_with'])} of {w.steps} steps)"
    do = DO_CAUSE.get(action, "")
    if cause == "host" and t.get("top"):  # (the trace's stacks name the Python function)
        do = f"speed up {short_frame(str(t['top']), brief=True)} or move it off the step"
    if cause == "host" and w.unrecorded_host:  # (host ops not recorded, or sampled: the trace cannot tell what held it)
        do = DO_CAUSE["host_unrecorded" if w.unrecorded_host == "none" else "host_sampled"]
    if cause == "sync" and sync_kind(str(t.get("top", ""))):  # (copies from pageable memory, a condition, a data-sized op)
        do = DO_CAUSE[f"sync_{sync_kind(str(t.get('top', '')))}"]
    if cause == "data_loading" and loader_kind(str(t.get("top", ""))) == "workers":  # (it has workers: they cannot keep up)
        do = DO_CAUSE["data_loading_workers"]
    if cause == "dispatch" and COMPILED_OPS.search(str(t.get("top", ""))):  # (compiled already: not "torch.compile it")
        do = DO_CAUSE["dispatch_replayed" if w.replays else "dispatch_compiled"]
    if _sync_pair(w, t):
        do = DO_CAUSE["sync_cpu_op"]
    part = w.partial()  # (a sampled or cut-short trace says so beside its figure)
    return Top(f"{who}{w.cause_label(cause)} {figure}" + (f" ({part})" if part else ""), do, True, w.cause_label(cause),
               figure.split(" (")[0], gain, gain / max(w.window_ns, 1), bound)


DATA_PARALLEL_CAUSES = ("dispatch", "host", "optimizer", "idle_launch", "idle_host", "idle_optimizer")
"""What-if causes and finding kinds of host time that ``nn.DataParallel``'s one process causes (its threads launch for
every GPU under one interpreter lock): their action is DDP (:data:`DO_CAUSE` ``data_parallel``)."""

PAIR_SHARE = 0.5
"""A sync and CPU work of one rank are one story where the lesser of the two what-ifs gives back at least this share of
the greater (:func:`_sync_pair`)."""


def _sync_pair(w: WindowWhatIf, t: dict) -> bool:
    """Whether the top what-if ``t`` is a plain sync (not one for a copy, a condition or a data-sized op) or CPU work
    that launches nothing, and the same rank's other one gives back at least :data:`PAIR_SHARE` of its gain: the sync
    drained the device's queue, so the CPU work after it ran with the device idle (the what-if advice says so). Which
    of the two comes first then turns on a few per cent of the window (two recordings of one program differ), and
    either fix gives most of it back: one action names both, so the same program gets the same ``do`` line."""
    cause = str(t.get("cause", ""))
    if cause not in ("sync", "cpu_op") or (cause == "sync" and sync_kind(str(t.get("top", "")))):
        return False
    other = "cpu_op" if cause == "sync" else "sync"
    rows = w.table[(w.table["rank"] == t["rank"]).to_numpy() & (w.table["cause"] == other).to_numpy()]
    if other == "sync":
        rows = rows[[not sync_kind(str(x)) for x in rows["top"]]]
    return bool(len(rows)) and int(rows["gain_ns"].max()) >= PAIR_SHARE * int(t["gain_ns"])


def finding_top(r: OverlapReport) -> Top | None:
    """The first-screen form of a trace's own top finding (module doc); None without one."""
    f = getattr(r, "findings", None)
    if f is None or len(f) == 0:
        return None
    top = f.iloc[0]
    kind = str(top["kind"])
    label = top["label"] if "label" in f.columns and isinstance(top["label"], str) and top["label"] else kind.replace("_", " ")
    head = _TRAILING.sub("", label)
    if kind == "bubble" and not head.startswith("pipeline"):
        head = f"pipeline {head}"
    bound = claim_bound(top.to_dict(), False)
    total, per = min(float(top["headroom_ns"]), bound), min(float(top["per_step_ns"]), bound)
    steps = round(total / per) if per > 0 else 0
    action = DO_KIND.get(kind, "")
    if kind in ("idle_warmup", "idle_profiler") and (steps or report_runs_before(r)):  # (no start-up: one-time, or ran before)
        cause = kind.removeprefix("idle_")
        action = DO_CAUSE[cause if steps or cause == "profiler" else "warmup_after_runs"]
    sep = "; " if re.search(r"\d", head) else " "
    figure = per_step(per, total, steps, sign="-")  # (what fixing it could give back: signed as the what-ifs are)
    window = r.window_ns[1] - r.window_ns[0]
    return Top(f"{head}{sep}{figure}", action, False, head, figure.split(" (")[0], total, total / window if window > 0 else 0.0, bound)


UNMODELLED = ("queued_wait",)
"""Span findings of lost device time the replay cannot model (work launched long before it ran, the device idle in
between, waiting for something the trace does not show): where one is the report's top finding and larger than its
window's top what-if gain, it is the first screen's finding."""


def _unmodelled_stall(r: OverlapReport) -> int:
    """The headroom (ns) of ``r``'s top span finding where it is of :data:`UNMODELLED`, else 0."""
    f = getattr(r, "findings", None)
    if f is None or len(f) == 0 or str(f.iloc[0]["kind"]) not in UNMODELLED:
        return 0
    return int(f.iloc[0]["headroom_ns"])


def top_findings(summary: Summary) -> dict[int, Top]:
    """Each report's top finding (module doc), by ``id(report)``: its window's top what-if, else its own top finding;
    its own where that is a stall the replay cannot model (:data:`UNMODELLED`) larger than the what-if's gain."""
    out: dict[int, Top] = {}
    by_path = {w.path: w for w in summary.what_ifs if w.path}
    by_window = {(w.run, w.window): w for w in summary.what_ifs if not w.path}
    for run in summary.runs:
        for win in run.windows:
            for rep in win.reports:
                w = by_path.get(rep.path) or by_window.get((run.name, win.label))
                top = what_if_top(w) if w is not None else None
                if top is not None and w is not None and _unmodelled_stall(rep) > int(w.top["gain_ns"]):  # type: ignore[index]
                    top = None  # (a queued stall the replay cannot model, larger than its top: the largest loss leads)
                top = top or finding_top(rep)
                if top is not None and getattr(rep, "wrapper", "") == "nn.DataParallel" and _cause_of(top, w) in DATA_PARALLEL_CAUSES:
                    top = replace(top, do=DO_CAUSE["data_parallel"])
                if top is not None:
                    out[id(rep)] = top
    return out


def _cause_of(top: Top, w: WindowWhatIf | None) -> str:
    """The what-if cause of a first-screen finding taken from ``w``'s top, else the kind of the report's own finding
    (read back from its action: :data:`DO_KIND`)."""
    if top.what_if and w is not None and w.top is not None:
        return str(w.top.get("cause", ""))
    return next((k for k, v in DO_KIND.items() if v == top.do and k.startswith("idle_")), "")


def tops_by_path(summary: Summary) -> dict[str, Top]:
    """:func:`top_findings` by each report's path (for a renderer that walks ``summary.reports``, whose objects may
    not be the runs' own)."""
    tops = top_findings(summary)
    return {rep.path: tops[id(rep)] for run in summary.runs for win in run.windows for rep in win.reports if id(rep) in tops}


def fit(text: str, width: int | None) -> str:
    """``text`` in at most ``width`` characters, cut after a whole word with ``…`` where it is longer (None: whole)."""
    if width is None or len(text) <= width:
        return text
    cut = text[: max(width - 1, 1)]
    space = cut.rfind(" ")
    if text[len(cut)] != " " and space > 0:  # (the last word is cut: leave it out)
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + "…"
