"""Print the markdown table of a folder of recorded scenarios (sample_traces/matrix, tests/data/heldout/*): each
scenario's built-in cause as its injected.jsonl says (measured in the run), the top what-if ``overlap-report`` gives
(the table's top finding), and the gain against the built-in time; and, where the folder holds the balanced control
of the same parallelism (``<parallelism>-balanced``, recorded in the same run of matrix_session.sh), the *measured* gain: the
scenario's step time (per rank, the mean over its profiled steps after the first of the longer of each step's host
duration and device span; the median over ranks) less the control's, and the what-if against it. A host delay hidden behind queued device work costs less than its built-in
time: the control says how much it cost. The item-log scenarios (and the GradScaler's) build in two causes, a sync and
every rank's preparation, and measure each: the top what-if is compared with the one it names. A scenario's control is
the longest ``<prefix>balanced`` whose prefix starts its name (``ddp-accum-balanced`` for ``ddp-accum-compute``, not for
``ddp-dataloader-workers``). A window without steps (a trace without ``ProfilerStep``) gives its what-if as the
window's total: it is not set against a per-step built-in time.

Usage: python scripts/matrix_table.py FOLDER [FOLDER...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from traceprobe.collect import analyze_paths

OWN_WORKLOAD = {"sync", "new_shape", "recompile"}
"""Cause kinds that scripts/matrix_scenarios.py runs on a model of their own (``ddp_item``, ``ddp_new_shape``,
``ddp_recompile``), not the balanced control's: their facts hold their own measurement, and no control is compared."""


def _step_ms(summary) -> float:
    """The job's step time: per rank, over its profiled steps after the first (the first also holds work queued before
    the window), the mean of each step's longer of its host duration (``ProfilerStep#N``: a host delay before the step's
    device work is inside it, where the host waits for the device each step) and its device span (first device work to
    last: where the host runs ahead, the device sets the pace); the median over the ranks, in ms (nan with fewer than
    two steps)."""
    per_rank = [float(np.maximum(r.steps["host_ns"], r.steps["gpu_end_ns"] - r.steps["gpu_start_ns"]).iloc[1:].mean())
                for r in summary.reports if len(r.steps) > 1]
    return float(np.median(per_rank)) / 1e6 if per_rank else float("nan")


def preparation_ms(f: dict) -> float | None:
    """Every rank's preparation, measured where a scenario builds it in beside a sync (ms/step): an item-log's
    ``prep_cost_ms_per_step`` (blocks without it, the log kept), a GradScaler's ``step_ms_scaled`` less
    ``step_ms_scaled_no_prep``; None where it builds in none."""
    if "prep_cost_ms_per_step" in f:
        return float(f["prep_cost_ms_per_step"])
    if "step_ms_scaled_no_prep" in f:
        return float(f["step_ms_scaled"] - f["step_ms_scaled_no_prep"])
    return None


def control_of(name: str, f: dict, facts: dict) -> str | None:
    """A scenario's balanced control in the same folder (module doc): the same parallelism and world size, and the longest
    ``<prefix>balanced`` name whose prefix starts ``name``; None without one."""
    found = [c for c, g in facts.items() if g["cause_kind"] == "none" and g["parallelism"] == f["parallelism"]
             and g.get("world_size") == f.get("world_size") and name.startswith(c.removesuffix("balanced"))]
    return max(found, key=len, default=None)


def table(folder: Path, analysed: Callable[[Path], Any] | None = None) -> list[str]:
    """The table's lines for one folder of scenarios (one subfolder each, facts in ``injected.jsonl``); ``analysed``
    gives a scenario folder's summary (its ``what_ifs`` and ``reports``; default: :func:`analyze_paths` of it)."""
    facts = {f["folder"]: f for f in map(json.loads, (folder / "injected.jsonl").read_text().splitlines())}
    lines = ["| run | parallelism | ranks | built in | top what-if | gain against built in | measured (step against control) | "
             "gain against measured |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    analyse = analysed or (lambda p: analyze_paths([str(p)], jobs=1))
    summaries = {name: analyse(folder / name) for name in sorted(facts)}
    steps = {name: _step_ms(s) for name, s in summaries.items()}
    for name, f in sorted(facts.items()):
        summary = summaries[name]
        label = next((w.label() for w in summary.what_ifs), "") or "no what-if above the noise floor"
        window = next((w for w in summary.what_ifs if w.top is not None), None)
        top = window.top if window is not None else None
        built = f["injected_ms_per_step"]
        who = "every rank" if f["late_rank"] is None and f["cause_kind"] != "none" else f"rank {f['late_rank']}" if f["late_rank"] is not None else "-"
        cause = f"{who}: {f['cause']} ({built:.1f} ms/step)"
        prep = preparation_ms(f)
        if prep is not None:  # (two built-in causes, each measured; the top is compared with its own)
            cause += f"; every rank's preparation: {prep:.1f} ms/step" + (" with the log kept" if "prep_cost_ms_per_step" in f else "")
            if top is not None and top["cause"] == "host":
                built = prep
        per_step = window is not None and window.steps > 0
        off = f"{(top['per_step_ns'] / 1e6 - built) / built:+.0%}" if top is not None and built > 0 and per_step else ""
        control = control_of(name, f, facts)
        same = control and control != name and f["cause_kind"] not in OWN_WORKLOAD
        measured = steps[name] - steps[control] if same else float("nan")
        got = top["per_step_ns"] / 1e6 if top is not None else 0.0
        vs = f"{(got - measured) / measured:+.0%}" if measured == measured and measured > 1.0 else ""
        shown = f"{measured:.1f} ms/step" if measured == measured else ""
        lines.append(f"| `{name}` | {f['parallelism']} | {f.get('world_size', '')} | {cause} | "
                     f"{label} | {off} | {shown} | {vs} |")
    return lines


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"\n{arg}\n")
        print("\n".join(table(Path(arg))))
