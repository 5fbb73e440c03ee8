"""Print the markdown table of a folder recorded by fix_scenarios.py (tests/data/heldout/w1-fixes): for each loop as
written, the top what-if ``overlap-report`` gives, and for each fix timed in the run the what-if of the cause it removes
against the gain it measured: the profiled gain (the slow loop's step time less the fix's, both inside the profiler, as
the trace was) and the unprofiled one (what the fix gives the job). The profiler's own cost on the host is in the trace,
so a host-side what-if is read against the profiled gain.

Usage: python scripts/fix_table.py FOLDER [FOLDER...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from traceprobe.collect import analyze_paths

CAUSE_OF_FIX = {
    ("launch-bound", "fixed"): "dispatch",  # (one CUDA graph of the step: no launch left)
    ("log-every-step", "fixed"): "sync", ("grad-check", "fixed"): "sync",
    ("log-every-step", "pretokenized"): "host", ("grad-check", "pretokenized"): "host",  # (Python outside any op)
    ("cpu-augment", "fixed"): "cpu_op", ("cpu-augment", "pre-augmented"): "cpu_op",
    ("decode", "fixed"): "sync",
}
"""The traceprobe cause each fix removes (what-if ``cause``); a fix not listed removes no one cause (a fused optimizer
takes away part of the optimizer's launches, which are part of ``dispatch``)."""


def table(folder: Path) -> list[str]:
    """The table's lines for one folder (one subfolder per scenario, its ``slow/`` traces; facts in ``fixes.jsonl``)."""
    facts = {f["folder"]: f for f in map(json.loads, (folder / "fixes.jsonl").read_text().splitlines())}
    lines = ["| loop | habit | top what-if | fix | what-if of the cause it removes | gain, profiled | against it | "
             "gain, unprofiled |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, f in sorted(facts.items()):
        summary = analyze_paths([str(folder / name / "slow")], jobs=1)
        w = next(iter(summary.what_ifs), None)
        label = (w.label() if w is not None else "") or "no what-if above the noise floor"
        per_cause = {}
        if w is not None:
            for row in w.table.itertuples():
                per_cause.setdefault(row.cause, row.per_step_ns / 1e6)
        slow = f["variants"]["slow"]
        for fix, v in f["variants"].items():
            if fix == "slow":
                continue
            prof = slow["profiled_ms_per_step"] - v["profiled_ms_per_step"]
            bare = slow["ms_per_step"] - v["ms_per_step"]
            cause = CAUSE_OF_FIX.get((name, fix))
            got = per_cause.get(cause, 0.0) if cause else None
            shown = f"{cause} -{got:.1f} ms/step" if cause and got is not None else "(no one cause)"
            off = f"{(got - prof) / prof:+.0%}" if got is not None and prof > 1.0 else ""
            lines.append(f"| `{name}` | {f['habit']} | {label} | {fix}: {v.get('removes', '')} | {shown} | "
                         f"{prof:.1f} ms/step | {off} | {bare:.1f} ms/step |")
    return lines


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"\n{arg}\n")
        print("\n".join(table(Path(arg))))
